"""Which Pythons trn-specdec runs on, read from one place: `requires-python` in pyproject.toml.

    python3 tools/python_support.py check               # the gate `make setup` runs before it creates .venv
    .venv/bin/python -m tools.python_support verify-lock [--python PATH ...]

`check` runs on whatever interpreter the user has, before any venv exists, so it uses only the standard
library and syntax that Pythons older than the supported ones still parse: the user gets a sentence, not a
traceback. `verify-lock` proves requirements.lock installs and is consistent on every supported version: for
each one it installs the lock into a throw-away venv with the hashes checked, runs `uv pip check` (every
dependency of every locked package satisfied for that interpreter) and imports the project with it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
LOCK = ROOT / "requirements.lock"

# The only shape of requires-python we accept: a lower bound and an exclusive upper bound on minor versions.
_REQUIRES_PYTHON = re.compile(r'^requires-python\s*=\s*">=3\.(\d+),\s*<3\.(\d+)"\s*$', re.MULTILINE)


def supported_minors(pyproject_text: str | None = None) -> list[tuple[int, int]]:
    """The (3, minor) versions pyproject.toml's requires-python admits, oldest first."""
    text = PYPROJECT.read_text() if pyproject_text is None else pyproject_text
    match = _REQUIRES_PYTHON.search(text)
    if match is None:
        raise ValueError('pyproject.toml: requires-python must read ">=3.A,<3.B" (for example ">=3.11,<3.14")')
    low, high = int(match.group(1)), int(match.group(2))
    return [(3, minor) for minor in range(low, high)]


def unsupported_reason(version: tuple[int, ...], executable: str, supported: list[tuple[int, int]]) -> str | None:
    """None when `version` is supported, else the sentence the user reads."""
    if tuple(version[:2]) in supported:
        return None
    first, last = supported[0], supported[-1]
    found = ".".join(str(part) for part in version[:3])
    suggestion = f"python{last[0]}.{last[1]}"
    return (
        f"trn-specdec needs Python {first[0]}.{first[1]} to {last[0]}.{last[1]} (requires-python in pyproject.toml), "
        f"but {executable} is Python {found}. Install a supported Python and point make at it, "
        f"for example: make PYTHON={suggestion} synth"
    )


def _uv() -> list[str]:
    return [sys.executable, "-m", "uv"]


def _minor_of(python: str) -> tuple[int, int] | None:
    """The (major, minor) of an interpreter, or None when it does not run (missing, or a pyenv shim with no version)."""
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True, timeout=60
        )
    except OSError:
        return None
    if out.returncode != 0:
        return None
    major, minor = out.stdout.split()
    return int(major), int(minor)


def verify_one(python: str) -> None:
    """Install the lock for one interpreter into a throw-away venv, check it, import the project. Raises on failure."""
    env = os.environ | {"UV_PYTHON_DOWNLOADS": "never"}
    with tempfile.TemporaryDirectory(prefix="trn-specdec-lock-") as tmp:
        venv = Path(tmp) / "venv"
        venv_python = str(venv / "bin" / "python")
        steps = [
            [*_uv(), "venv", "--quiet", "--python", python, str(venv)],
            [*_uv(), "pip", "sync", "--quiet", "--python", venv_python, "--require-hashes", str(LOCK)],
            [*_uv(), "pip", "check", "--python", venv_python],
            [venv_python, "-c", "import config, stacks, charts, bench, model_build; config.load_config()"],
        ]
        for step in steps:
            done = subprocess.run(step, cwd=ROOT, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(step[:4])} ... failed for {python}:\n{done.stdout}{done.stderr}")


def verify_lock(pythons: list[str]) -> int:
    """Verify the lock on each interpreter; every supported minor version must be covered. Returns an exit code."""
    supported = supported_minors()
    if not pythons:
        pythons = [f"python{major}.{minor}" for major, minor in supported]
    covered: set[tuple[int, int]] = set()
    failed = False
    for python in pythons:
        minor = _minor_of(python)
        if minor is None:
            print(f"{python}: does not run here; install it or pass --python PATH (with pyenv: PYENV_VERSION=...)")
            failed = True
            continue
        start = time.perf_counter()
        try:
            verify_one(python)
        except RuntimeError as err:
            print(f"{python} (Python {minor[0]}.{minor[1]}): FAILED\n{err}")
            failed = True
            continue
        covered.add(minor)
        print(f"{python} (Python {minor[0]}.{minor[1]}): lock installs, uv pip check clean, project imports "
              f"({time.perf_counter() - start:.0f} s)")  # fmt: skip
    missing = [f"{major}.{minor}" for major, minor in supported if (major, minor) not in covered]
    if missing:
        print(f"not verified: Python {', '.join(missing)}")
    return 1 if failed or missing else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="exit 2 with a sentence unless this interpreter is a supported Python")
    verify = sub.add_parser("verify-lock", help="install and check requirements.lock on each supported Python")
    verify.add_argument("--python", action="append", default=[], help="an interpreter (default: python3.N on PATH)")
    args = parser.parse_args(argv)
    if args.command == "check":
        reason = unsupported_reason(sys.version_info, sys.executable, supported_minors())
        if reason is not None:
            print(reason, file=sys.stderr)
            return 2
        return 0
    if shutil.which("node") is None:
        print("verify-lock imports the CDK libraries, which need Node.js on PATH", file=sys.stderr)
        return 2
    return verify_lock(args.python)


if __name__ == "__main__":
    sys.exit(main())
