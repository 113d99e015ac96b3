"""The cross-run cache of pure results (tests/result_cache.py) and what keys the vLLM engine verdicts, the cloud
assemblies and the cfn-lint findings."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess

import pytest

from tests import conftest, result_cache
from tests.engine import command_lines
from tests.engine.command_lines import all_command_lines, engine_key


@pytest.fixture
def cache_dir(tmp_path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(result_cache, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.delenv(result_cache.SWITCH, raising=False)
    return tmp_path / "cache"


def test_an_entry_is_found_under_its_key_only(cache_dir):
    result_cache.store("kind", "k1", b"verdicts")
    assert result_cache.load("kind", "k1") == b"verdicts"
    assert result_cache.load("kind", "k2") is None
    assert result_cache.load("other", "k1") is None


def test_switched_off_it_neither_reads_nor_writes(cache_dir, monkeypatch: pytest.MonkeyPatch):
    result_cache.store("kind", "k1", b"old")
    monkeypatch.setenv(result_cache.SWITCH, "0")
    assert result_cache.load("kind", "k1") is None
    result_cache.store("kind", "k2", b"new")
    monkeypatch.delenv(result_cache.SWITCH)
    assert result_cache.load("kind", "k2") is None


def test_a_half_written_entry_is_never_read(cache_dir, monkeypatch: pytest.MonkeyPatch):
    class Interrupted(Exception):
        pass

    def fail_midway(*_args):
        raise Interrupted

    monkeypatch.setattr(result_cache.os, "replace", fail_midway)
    with pytest.raises(Interrupted):
        result_cache.store("kind", "k1", b"x" * 1000)
    assert result_cache.load("kind", "k1") is None
    assert list((cache_dir / "kind").iterdir()) == []  # the partial file is removed too


def test_keys_do_not_run_parts_together():
    assert result_cache.key("ab", "c") != result_cache.key("a", "bc")
    assert result_cache.key("a") == result_cache.key(b"a")


def test_a_changed_command_line_is_another_engine_key():
    version, commands = next(iter(all_command_lines().items()))
    changed = copy.deepcopy(commands)
    changed[0]["argv"] = [*changed[0]["argv"], "--max-num-seqs", "3"]
    assert engine_key(version, commands) == engine_key(version, copy.deepcopy(commands))
    assert engine_key(version, changed) != engine_key(version, commands)


def test_a_changed_check_script_or_lock_is_another_engine_key(tmp_path, monkeypatch: pytest.MonkeyPatch):
    version, commands = next(iter(all_command_lines().items()))
    before = engine_key(version, commands)
    script = tmp_path / "engine" / "check.py"
    script.parent.mkdir()
    script.write_text("print('a check')\n")
    monkeypatch.setattr(command_lines, "HERE", script.parent)
    monkeypatch.setattr(command_lines, "ROOT", tmp_path)  # relative paths in the key, and no lock file here
    moved = engine_key(version, commands)
    script.write_text("print('another check')\n")
    assert len({before, moved, engine_key(version, commands)}) == 3


# --- the cloud assemblies and cfn-lint findings (tests/conftest.py): every input in the key, a stale entry refused


def _git_repo(root):
    """A repository with an app module, a test, a doc, a measurement script, an ignored file and the two test
    modules that synthesize; one more app module left untracked (another change's new file)."""
    files = {
        "stacks/app.py": "A = 1\n",
        "config/default.yaml": "name: x\n",
        "requirements.lock": "aws-cdk-lib==1\n",
        "tests/test_app.py": "def test(): pass\n",
        "tests/conftest.py": "def synthesize(): pass\n",
        "tests/result_cache.py": "KEY = 1\n",
        "docs/app.md": "# app\n",
        "perf/time.py": "print(1)\n",
        ".gitignore": "ignored/\n",
        "ignored/out.json": "{}\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    (root / "stacks" / "new.py").write_text("B = 2\n")


def test_the_app_inputs_are_every_file_but_tests_docs_and_perf_new_ones_included(tmp_path):
    _git_repo(tmp_path)
    names = {str(p.relative_to(tmp_path)) for p in result_cache.app_input_files(tmp_path)}
    assert names == {
        ".gitignore",
        "config/default.yaml",
        "requirements.lock",
        "stacks/app.py",
        "stacks/new.py",
        "tests/conftest.py",
        "tests/result_cache.py",
    }
    assert result_cache.app_input_files(tmp_path / "stacks" / "missing") is None  # no repository: nothing reused


def _fake_synthesize_cold(runs: list[str], marker: str):
    """synthesize_cold's stand-in: a one-stack assembly whose template carries `marker`; counts its runs."""

    def cold(config, outdir):
        runs.append(marker)
        outdir.mkdir(parents=True, exist_ok=True)
        stack = {"type": "aws:cloudformation:stack", "properties": {"templateFile": "S.template.json"}}
        (outdir / "manifest.json").write_text(json.dumps({"artifacts": {"S": stack}}))
        (outdir / "S.template.json").write_text(json.dumps({"Resources": {}, "Marker": marker}))
        (outdir / "asset.0123.zip").write_bytes(b"bundled layer")
        (outdir / "validation-report.json").write_text("{}")
        (outdir / conftest.CONSTRUCT_DEPENDENCIES).write_text(json.dumps({"dependencies": {}, "paths": {}}))
        return conftest.read_synth(config, outdir)

    return cold


@pytest.fixture
def app_repo(tmp_path, cache_dir, monkeypatch: pytest.MonkeyPatch):
    """The cache and the app's inputs in temporary folders; the per-process keys forgotten before and after."""
    root = tmp_path / "repo"
    root.mkdir()
    _git_repo(root)
    monkeypatch.setattr(result_cache, "ROOT", root)
    for cached in (result_cache.app_inputs_key, result_cache.environment_key):
        cached.cache_clear()
    yield root
    for cached in (result_cache.app_inputs_key, result_cache.environment_key):
        cached.cache_clear()


def test_a_cloud_assembly_is_reused_only_while_every_input_is_unchanged(
    app_repo, default_config, tmp_path, monkeypatch: pytest.MonkeyPatch
):
    runs: list[str] = []

    def synth(marker: str, config=default_config) -> str:
        monkeypatch.setattr(conftest, "synthesize_cold", _fake_synthesize_cold(runs, marker))
        result_cache.app_inputs_key.cache_clear()
        result_cache.environment_key.cache_clear()
        outdir = tmp_path / f"out-{len(list(tmp_path.iterdir()))}"
        return conftest.synthesize(config, outdir).template("S")["Marker"]

    assert synth("first") == "first"
    assert synth("stale") == "first" and runs == ["first"]  # reused: nothing changed
    (app_repo / "docs" / "app.md").write_text("# another doc\n")
    assert synth("stale") == "first"  # not an input
    (app_repo / "stacks" / "new.py").write_text("B = 3\n")  # an uncommitted module of the app
    assert synth("after the module") == "after the module"
    (app_repo / "tests" / "conftest.py").write_text("def synthesize(): return 1\n")
    assert synth("after conftest") == "after conftest"
    monkeypatch.setenv("CDK_DEFAULT_REGION", "eu-west-1")
    assert synth("after CDK's environment") == "after CDK's environment"
    changed = default_config.model_copy(update={"name": "another"})
    assert synth("another config", changed) == "another config"
    assert synth("stale", changed) == "another config"
    monkeypatch.setenv(result_cache.SWITCH, "0")
    assert synth("switched off", changed) == "switched off"


def test_a_reused_assembly_has_no_assets_and_reads_as_the_fresh_one(app_repo, default_config, tmp_path, monkeypatch):
    monkeypatch.setattr(conftest, "synthesize_cold", _fake_synthesize_cold([], "fresh"))
    fresh = conftest.synthesize(default_config, tmp_path / "a")
    reused = conftest.synthesize(default_config, tmp_path / "b")
    assert (fresh.templates, fresh.validation_report, fresh.constructs) == (
        reused.templates,
        reused.validation_report,
        reused.constructs,
    )
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == sorted(
        p.name for p in (tmp_path / "a").iterdir() if not p.name.startswith("asset.")
    )


def test_cfn_lint_findings_are_reused_only_for_the_same_templates(cache_dir, tmp_path, monkeypatch):
    runs: list[str] = []

    def lint(outdirs, finding: str):
        def cold(files):
            runs.append(finding)
            return [{"rule": "E1", "file": str(files[-1]), "line": 1, "message": finding}]

        monkeypatch.setattr(conftest, "_cfn_lint_cold", cold)
        return conftest.cfn_lint_errors(*outdirs)

    first, second = tmp_path / "a", tmp_path / "b"
    for outdir in (first, second):
        outdir.mkdir()
        for stack in ("Cluster", "Models", "Observability", "Workloads"):
            (outdir / f"S-{stack}.template.json").write_text('{"Resources": {}}')
    assert lint([first, second], "fresh")[0]["message"] == "fresh"
    copies = [tmp_path / "c", tmp_path / "d"]
    for source, copy_ in zip((first, second), copies, strict=True):
        shutil.copytree(source, copy_)
    (reused,) = lint(copies, "stale")
    assert reused["message"] == "fresh" and reused["file"] == str(copies[1] / "S-Workloads.template.json")
    assert lint([second, first], "reordered")[0]["message"] == "reordered"  # the folders' order is in the key
    (second / "S-Models.template.json").write_text('{"Resources": {"B": {}}}')
    assert lint([first, second], "after a byte")[0]["message"] == "after a byte"
    assert runs == ["fresh", "reordered", "after a byte"]
