"""Results that are a pure function of their inputs, kept across test runs so a warm `make test` does not pay again.

Why it is safe: an entry is found only under the sha256 of every input that can change the result (the caller names
them), so a changed input is a miss and the work runs again. Entries are written whole (a temporary file renamed
into place), so concurrent shards and an interrupted run never leave a half entry to read. The folder is
gitignored: a fresh clone (CI) has no entries and computes everything. `TRN_SPECDEC_TEST_CACHE=0` switches it off
(`make test-cold`).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from tests.conftest import ROOT

CACHE_DIR = ROOT / ".cache" / "tests"
SWITCH = "TRN_SPECDEC_TEST_CACHE"


def enabled() -> bool:
    return os.environ.get(SWITCH, "1") != "0"


def key(*parts: str | bytes) -> str:
    """sha256 over the parts, each prefixed by its length, so ("ab", "c") and ("a", "bc") differ."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def files_key(paths: Iterable[Path], root: Path = ROOT) -> str:
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
