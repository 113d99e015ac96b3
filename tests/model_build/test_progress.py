"""Progress: a redrawn bar on a terminal, a log line every N seconds otherwise."""

from __future__ import annotations

import io

from model_build.progress import Progress, human_bytes


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_log_lines_appear_every_interval_when_not_a_terminal():
    stream, clock = io.StringIO(), Clock()
    progress = Progress("uploading", 100 * 2**20, stream=stream, interval=30, tty=False, clock=clock)
    for t in range(1, 100):
        clock.now = float(t)
        progress.advance(2**20)
    progress.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3 + 1  # at 30, 60 and 90 s, then the final line
    assert "uploading: 30.0 MiB/100.0 MiB (30%), 1.0 MiB/s, ETA 70 s" in lines[0]
    assert lines[-1].endswith("uploading: 99.0 MiB/100.0 MiB in 99.0 s (1.0 MiB/s)")
    assert "\r" not in stream.getvalue()


def test_a_terminal_gets_one_redrawn_bar():
    stream, clock = io.StringIO(), Clock()
    progress = Progress("hashing", 10, stream=stream, tty=True, clock=clock)
    clock.now = 1.0
    progress.advance(5)
    progress.close()
    text = stream.getvalue()
    assert text.count("\r") == 2 and text.endswith("\n") and "[##############..............]" in text


def test_human_bytes():
    assert [human_bytes(n) for n in (0, 1023, 1024, 5 * 2**30)] == ["0 B", "1023 B", "1.0 KiB", "5.0 GiB"]
