"""Results that are a pure function of their inputs, kept across test runs so a warm `make test` does not pay again.

Why it is safe: an entry is found only under the sha256 of every input that can change the result (the caller names
them), so a changed input is a miss and the work runs again. Entries are written whole (a temporary file renamed
into place), so concurrent shards and an interrupted run never leave a half entry to read. The folder is
gitignored: a fresh clone (CI) has no entries and computes everything. `TRN_SPECDEC_TEST_CACHE=0` switches it off
(`make test-cold`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = ROOT / ".cache" / "tests"
SWITCH = "TRN_SPECDEC_TEST_CACHE"
# What the app's results cannot depend on: the tests (but the two modules that synthesize and lint), the docs, the
# measurement scripts and CI's script. Everything else the repository holds (tracked or new, not ignored) is an input.
NOT_APP_INPUTS = ("tests/", "docs/", "perf/", ".ci/")
APP_INPUTS_IN_TESTS = ("tests/conftest.py", "tests/result_cache.py")


def enabled() -> bool:
    return os.environ.get(SWITCH, "1") != "0"


def key(*parts: str | bytes) -> str:
    """sha256 over the parts, each prefixed by its length, so ("ab", "c") and ("a", "bc") differ."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def files_key(paths: Iterable[Path], root: Path) -> str:
    """The key of these files' paths (relative to `root`, the repository) and contents, in a stable order."""
    files = sorted(p for p in paths if p.is_file())
    return key(*(part for p in files for part in (str(p.relative_to(root)), p.read_bytes())))


def _entry(kind: str, entry_key: str) -> Path:
    return CACHE_DIR / kind / f"{entry_key}.entry"


def load(kind: str, entry_key: str) -> bytes | None:
    """The stored result, or None (a miss, or the cache switched off)."""
    if not enabled():
        return None
    path = _entry(kind, entry_key)
    return path.read_bytes() if path.is_file() else None


def store(kind: str, entry_key: str, data: bytes) -> None:
    """Write the entry whole or not at all; nothing when the cache is switched off."""
    if not enabled():
        return
    path = _entry(kind, entry_key)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".partial-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def app_input_files(root: Path) -> list[Path] | None:
    """Every file that can change a synthesized app or its lint: the repository's files, tracked or new but not
    ignored (`git ls-files`: a module another change adds is an input before it is committed), minus
    NOT_APP_INPUTS, plus APP_INPUTS_IN_TESTS. Derived, not listed: a new package or data file is covered as it
    appears. None without git: then nothing is reused."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        return None
    names = {n for n in listed.split("\0") if n}
    kept = {n for n in names if not n.startswith(NOT_APP_INPUTS)} | (names & set(APP_INPUTS_IN_TESTS))
    return [root / n for n in sorted(kept)]


@functools.cache
def environment_key() -> str:
    """The interpreter, every installed distribution and its version (the lock as installed, not as written), the
    Node.js that jsii runs, and the CDK_/JSII_ variables CDK reads."""
    distributions = sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions())
    try:
        node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout
    except OSError:
        node = "no node"
    variables = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith(("CDK_", "JSII_")))
    return key(sys.version, *distributions, node, *variables)


@functools.cache
def app_inputs_key() -> str | None:
    """The key of every input of the app (app_input_files) and its environment, once per process (nothing edits
    the repository during a test run); None without git."""
    files = app_input_files(ROOT)
    return None if files is None else key(files_key(files, ROOT), environment_key())
