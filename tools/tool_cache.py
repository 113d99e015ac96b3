"""The project's tool cache (.cache/tools, gitignored): a pinned tool is built in a temporary folder beside its place
and renamed into it only whole, with a marker naming the pin written last, under a file lock so that concurrent test
processes install it once. tools/prometheus_tool.py and tools/renovate_tool.py fill their trees through it.
Standard library only: make runs it with the system Python before the venv exists."""

from __future__ import annotations

import fcntl
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

MARKER_NAME = ".installed"


def marked(cache: Path, marker: str) -> bool:
    """The tree in `cache` was installed whole for the pin `marker` names."""
    path = cache / MARKER_NAME
    return path.is_file() and path.read_text() == marker


def install_once(cache: Path, marker: str, installed: Callable[[], bool], fill: Callable[[Path, Path], None]) -> None:
    """Unless `installed()`: fill(tree, scratch) builds the tool into `tree` (scratch: a temporary folder beside it for
    downloads), then the marker is written and `tree` replaces `cache` whole (a tree of another pin or a half-written
    one goes)."""
    if installed():
        return
    cache.parent.mkdir(parents=True, exist_ok=True)
    with (cache.parent / f"{cache.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if installed():
            return
        with tempfile.TemporaryDirectory(dir=cache.parent, prefix=f".{cache.name}-") as tmp:
            tree = Path(tmp) / "tree"
            fill(tree, Path(tmp))
            (tree / MARKER_NAME).write_text(marker)
            shutil.rmtree(cache, ignore_errors=True)
            tree.rename(cache)
