"""Renovate's own validator at the pinned version passes renovate.json in strict mode, and the same validator refuses
a config Renovate would have to migrate, a broken regex and an unknown option: the check is not a formality. make
installs exactly the module's tree where the module looks for it."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.conftest import ROOT
from tools import renovate_tool
from tools.renovate_tool import CACHE, CONFIG, SOURCE, InstallError, ensure, installed, validate, version
from tools.tool_cache import MARKER_NAME


def makefile_variable(name: str) -> str:
    (value,) = re.findall(rf"^{name} := (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    return value


def test_make_test_installs_the_tree_the_module_reads_and_again_when_the_lock_changes():
    target = makefile_variable("RENOVATE_TOOL")
    assert target == str((CACHE / MARKER_NAME).relative_to(ROOT))
    makefile = (ROOT / "Makefile").read_text()
    (prerequisites,) = re.findall(r"^test: (.+)$", makefile, re.MULTILINE)
    assert "$(RENOVATE_TOOL)" in prerequisites.split()
    (rule,) = re.findall(r"^\$\(RENOVATE_TOOL\): (.+)$", makefile, re.MULTILINE)
    assert {"tools/renovate/package.json", "tools/renovate/package-lock.json"} <= set(rule.split())


def test_the_version_is_exact_and_the_lock_resolves_that_version():
    """npm ci refuses a lock out of step with package.json; a range would let the validator float."""
    pinned = version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned), f"tools/renovate/package.json pins renovate {pinned!r}; pin exactly"
    lock = json.loads((SOURCE / "package-lock.json").read_text())
    assert lock["packages"][""]["devDependencies"] == {"renovate": pinned}
    assert lock["packages"]["node_modules/renovate"]["version"] == pinned


def test_the_installed_validator_is_the_pinned_version():
    found = ensure()
    assert found.is_relative_to(ROOT / ".cache")
    out = subprocess.run([str(found), "--version"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == version()


def test_renovate_json_passes_renovates_validator_in_strict_mode():
    ensure()
    done = validate()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Validating renovate.json as repo config" in done.stdout
    assert "Config validated successfully" in done.stdout


def _config() -> dict:
    return json.loads(CONFIG.read_text())


def _pre_41_file_match(config: dict) -> None:
    manager = config["customManagers"][0]
    manager["fileMatch"] = [p.strip("/") for p in manager.pop("managerFilePatterns")]


def _unbalanced_regex(config: dict) -> None:
    config["customManagers"][0]["matchStrings"][-1] += "("


def _misspelt_option(config: dict) -> None:
    config["packageRules"][0]["matchPackageName"] = config["packageRules"][0].pop("matchPackageNames")


BROKEN = {
    "a config Renovate would migrate (fileMatch, renamed in Renovate 41)": (_pre_41_file_match, "migration"),
    "a matchString that is not a regex": (_unbalanced_regex, "Invalid regExp for customManagers"),
    "an option Renovate does not know": (_misspelt_option, "Invalid configuration option"),
}


@pytest.mark.parametrize("case", BROKEN, ids=list(BROKEN))
def test_the_strict_validator_refuses(case, tmp_path):
    ensure()
    breaks, said = BROKEN[case]
    config = _config()
    breaks(config)
    (tmp_path / "renovate.json").write_text(json.dumps(config, indent=2))
    done = validate(tmp_path / "renovate.json")
    assert done.returncode != 0 and said in done.stdout + done.stderr, done.stdout


def test_a_tree_of_another_lock_is_not_taken_as_installed(tmp_path):
    """An interrupted install (no marker) or a tree of the lock before Renovate bumped it installs again."""
    cache = tmp_path / "renovate"
    bin_dir = cache / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "renovate-config-validator").write_text("")
    assert not installed(cache)
    (cache / MARKER_NAME).write_text("renovate@1.0.0 package-lock.json sha256:" + "0" * 64 + "\n")
    assert not installed(cache)
    (cache / MARKER_NAME).write_text(renovate_tool._marker_text(SOURCE))
    assert installed(cache)


def test_without_npm_the_error_says_what_is_needed(tmp_path, monkeypatch):
    monkeypatch.setattr(renovate_tool.shutil, "which", lambda _: None)
    with pytest.raises(InstallError, match=r"needs npm \(Node.js\) on PATH"):
        ensure(tmp_path / "renovate")


# The uv options Renovate's pip-compile manager accepts in a lock's header, and those that take a value (which it
# accepts only as --option=value), at the pinned version: renovate/dist/modules/manager/pip-compile/common.js lines
# 50-98 (uvOptionsWithArguments, allowedCommonOptions, allowedOptions.uv). A header it refuses is skipped with a log
# line, and that lock never updates.
UV_OPTIONS_WITH_VALUE = {
    "--constraints", "--constraint", "--python-version", "--no-emit-package", "--prerelease", "--format",
    "--resolution", "--fork-strategy", "--exclude-newer", "--exclude-newer-package", "--group", "--override",
    "--overrides", "--output-file", "--extra", "--extra-index-url",
}  # fmt: skip
UV_FLAGS = {"--no-strip-extras", "--universal", "-v", "--generate-hashes", "--emit-index-url", "--index-url"}
UV_FLAGS |= {"--all-extras"}


def _pip_compile_locks() -> list[str]:
    (pattern,) = _config()["pip-compile"]["managerFilePatterns"]
    return sorted(p.name for p in ROOT.glob("requirements*.lock") if re.search(pattern.strip("/"), p.name))


def test_the_pip_compile_manager_reads_the_uv_locks_and_no_other():
    """The vLLM engine-check locks are hand-assembled (no header command) and stay frozen."""
    assert _pip_compile_locks() == ["requirements-bootstrap.lock", "requirements.lock"]


@pytest.mark.parametrize("lock", _pip_compile_locks())
def test_each_locks_header_is_a_command_renovate_reruns(lock):
    (command,) = re.findall(r"^#    uv pip compile (.*)$", (ROOT / lock).read_text(), flags=re.M)
    for word in command.split():
        option, eq, _ = word.partition("=")
        if not word.startswith("-"):
            assert (ROOT / word).is_file(), f"{lock}'s header compiles {word}, which is not in the repo"
        elif option in UV_OPTIONS_WITH_VALUE:
            assert eq, f"{lock}'s header has {word} without =value; Renovate's pip-compile manager refuses it"
        else:
            assert word in UV_FLAGS, f"{lock}'s header has {word}, an option Renovate's pip-compile manager refuses"
    assert f"--output-file={lock}" in command.split()
