"""The one bounded reader of files a person names: regular files only, size checked before reading, never a hang."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from config.bounded_file import UnreadableFile, read_bounded

ARGS = {"where": "the file 'x'", "max_bytes": 16, "limit_name": "an x", "expect": "pass x", "unreadable_fix": "fix x"}


def test_a_small_regular_file_is_read_whole(tmp_path: Path) -> None:
    (tmp_path / "x").write_bytes(b"sixteen bytes ok")
    assert read_bounded(tmp_path / "x", **ARGS) == b"sixteen bytes ok"


def test_a_fifo_is_refused_without_opening_it(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "x")  # opening it would block until a writer came
    with pytest.raises(UnreadableFile, match=r"^the file 'x' is not a regular file .*; pass x$"):
        read_bounded(tmp_path / "x", **ARGS)


def test_a_sparse_file_over_the_bound_is_refused_by_its_size(tmp_path: Path) -> None:
    with (tmp_path / "x").open("wb") as f:
        f.truncate(64 * 1024 * 1024)
    with pytest.raises(UnreadableFile, match=r"is 67108864 bytes; an x is at most 16, check you chose the right file"):
        read_bounded(tmp_path / "x", **ARGS)


def test_a_missing_file_names_the_reason_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(UnreadableFile, match=r"cannot be read \(No such file or directory\); fix x$"):
        read_bounded(tmp_path / "x", **ARGS)
