"""Progress of long transfers: a redrawn bar on a terminal, a log line every N seconds in a pod."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

DEFAULT_LOG_INTERVAL_S = 30.0
_BAR_REDRAW_S = 0.1
_BAR_WIDTH = 28


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


class Progress:
    """Thread-safe byte counter that reports itself; call `advance` from any worker, `close` once.

    On a TTY it redraws one line (at most every 0.1 s); otherwise (a pod's log) it writes a full line
    every `interval` seconds, so `kubectl logs` shows a build is alive without flooding.
    """

    def __init__(
        self,
        label: str,
        total: int,
        *,
        stream: TextIO | None = None,
        interval: float = DEFAULT_LOG_INTERVAL_S,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self._stream = stream if stream is not None else sys.stderr
        self._tty = self._stream.isatty() if tty is None else tty
        self._interval = interval
        self._clock = clock
        self._start = clock()
        self._last = self._start
        self._lock = threading.Lock()
        self._closed = False

    def advance(self, n: int) -> None:
        with self._lock:
            self.done += n
            now = self._clock()
            if now - self._last >= (_BAR_REDRAW_S if self._tty else self._interval):
                self._last = now
                self._emit(now, final=False)

    def add_total(self, n: int) -> None:
        """More work found along the way (files that turn out to need uploading)."""
        with self._lock:
            self.total += n

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._emit(self._clock(), final=True)

    def _emit(self, now: float, *, final: bool) -> None:
        elapsed = max(now - self._start, 1e-9)
        rate = self.done / elapsed
        pct = 100.0 * self.done / self.total if self.total else 100.0
        sizes = f"{human_bytes(self.done)}/{human_bytes(self.total)}"
        if final:
            text = f"{self.label}: {sizes} in {elapsed:.1f} s ({human_bytes(rate)}/s)"
        else:
            eta = (self.total - self.done) / rate if rate > 0 else float("inf")
            eta_text = f"{eta:.0f} s" if eta != float("inf") else "?"
            text = f"{self.label}: {sizes} ({pct:.0f}%), {human_bytes(rate)}/s, ETA {eta_text}"
        if self._tty:
            filled = int(_BAR_WIDTH * min(pct, 100.0) / 100)
            bar = "#" * filled + "." * (_BAR_WIDTH - filled)
            self._stream.write(f"\r[{bar}] {text}\x1b[K" + ("\n" if final else ""))
        else:
            self._stream.write(time.strftime("%H:%M:%S ") + text + "\n")
        self._stream.flush()
