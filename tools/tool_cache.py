"""The project's tool cache (.cache/tools, gitignored): a pinned tool is built in a temporary folder beside its place
and renamed into it only whole, with a marker naming the pin written last, under a file lock so that concurrent test
processes install it once. tools/prometheus_tool.py and tools/renovate_tool.py fill their trees through it.
Standard library only: make runs it with the system Python before the venv exists."""

from __future__ import annotations

import fcntl
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

MARKER_NAME = ".installed"
T = TypeVar("T")


class InstallError(Exception):
    """Installing a pinned tool failed; the message says why and what to run."""


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


def install_for_make(cache: Path, installed: Callable[[], bool], ensure: Callable[[], T]) -> tuple[T, str] | None:
    """make's step for a tool: install it once or find it, touch its marker (newer than the step's prerequisites, so
    make does not run the step again) and say which of the two it was; None once the reason it failed is printed."""
    began = time.monotonic()
    was_installed = installed()
    try:
        found = ensure()
    except InstallError as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    (cache / MARKER_NAME).touch()
    return found, "already installed" if was_installed else f"installed in {time.monotonic() - began:.1f} s"
