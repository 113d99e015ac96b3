"""The supported Pythons come from pyproject.toml alone; the gate names them; the lock covers every one of them."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from tests.conftest import ROOT
from tools.python_support import LOCK, PYPROJECT, main, supported_minors, unsupported_reason

PYPROJECT_DATA = tomllib.loads(PYPROJECT.read_text())


def test_supported_minors_are_exactly_what_requires_python_admits():
    admits = SpecifierSet(PYPROJECT_DATA["project"]["requires-python"])
    expected = [(3, minor) for minor in range(6, 20) if f"3.{minor}.0" in admits]
    assert supported_minors() == expected
    assert (3, 11) in expected and (3, 13) in expected


def test_requires_python_of_another_shape_is_refused_with_the_expected_form():
    with pytest.raises(ValueError, match=r'">=3.A,<3.B"'):
        supported_minors('requires-python = ">=3.11"\n')


@pytest.mark.parametrize("minor", [11, 12, 13])
def test_gate_accepts_each_supported_version(minor):
    assert unsupported_reason((3, minor, 0), "python3", supported_minors()) is None


@pytest.mark.parametrize("version", [(3, 10, 13), (3, 14, 0), (2, 7, 18)])
def test_gate_names_the_range_the_version_found_and_how_to_point_make_elsewhere(version):
    reason = unsupported_reason(version, "/usr/bin/python3", supported_minors())
    assert reason is not None
    found = ".".join(map(str, version))
    assert "Python 3.11 to 3.13" in reason
    assert f"/usr/bin/python3 is Python {found}" in reason
    assert "make PYTHON=python3.13 synth" in reason


def test_gate_script_runs_under_the_bare_interpreter_and_passes_a_supported_one():
    done = subprocess.run(
        [sys.executable, "-I", "tools/python_support.py", "check"], cwd=ROOT, capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (0, "")


def test_gate_exits_2_with_the_sentence_on_stderr_for_an_unsupported_interpreter(monkeypatch, capsys):
    monkeypatch.setattr(sys, "version_info", (3, 10, 13, "final", 0))
    assert main(["check"]) == 2
    assert "trn-specdec needs Python 3.11 to 3.13" in capsys.readouterr().err


def _lock_requirements() -> list[Requirement]:
    """The pinned requirements of requirements.lock (one `name==version [; marker]` line each)."""
    lines = [line.rstrip(" \\") for line in LOCK.read_text().splitlines() if re.match(r"^[A-Za-z0-9]", line)]
    return [Requirement(line) for line in lines]


def test_lock_was_compiled_universally_from_the_lowest_supported_python():
    """Options with a value are written `--option=value`: Renovate's pip-compile manager reruns this header and
    refuses `--python-version 3.11` (renovate.json)."""
    header = LOCK.read_text().splitlines()[1]
    (low_major, low_minor) = supported_minors()[0]
    assert "--universal" in header and f"--python-version={low_major}.{low_minor} " in header, header
    assert "--generate-hashes" in header


@pytest.mark.parametrize("minor", [11, 12, 13])
def test_lock_installs_every_declared_dependency_on_linux_for_each_supported_python(minor):
    env = {
        "python_version": f"3.{minor}",
        "python_full_version": f"3.{minor}.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
    }
    installed = {
        canonicalize_name(req.name): req
        for req in _lock_requirements()
        if req.marker is None or Marker(str(req.marker)).evaluate(env)
    }
    declared = [*PYPROJECT_DATA["project"]["dependencies"], *PYPROJECT_DATA["dependency-groups"]["dev"]]
    for spec in map(Requirement, declared):
        pinned = installed.get(canonicalize_name(spec.name))
        assert pinned is not None, f"{spec.name} is not in requirements.lock for Python 3.{minor} on Linux"
        (version,) = [s.version for s in pinned.specifier]
        assert version in spec.specifier, f"requirements.lock pins {pinned} but pyproject.toml asks for {spec}"


@pytest.mark.parametrize("lock", sorted(ROOT.glob("requirements*.lock")), ids=lambda p: p.name)
def test_every_lock_is_regenerated_from_committed_inputs_only(lock):
    """The files a lock's `uv pip compile` header and its `# via -r` lines name are in the repo, never a path of
    the machine that compiled it (which nobody else could regenerate the lock from)."""
    text = lock.read_text()
    commands = re.findall(r"^#\s+uv pip compile (.*)$", text, flags=re.M)
    words = [w.split("=", 1)[-1] for c in commands for w in c.split()]  # --output-file=requirements.lock
    named = [w for w in words if re.search(r"\.(in|txt|toml|lock)(:[\w-]+)?$", w)]
    named += re.findall(r"^\s*# via -r (\S+)$", text, flags=re.M)
    for path in named:
        assert not path.startswith(("/", "~")), f"{lock.name} names {path}; compile from a committed input file"
        assert (ROOT / path.split(":")[0]).exists(), f"{lock.name} names {path}, which is not in the repo"
