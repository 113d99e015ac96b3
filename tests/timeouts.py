"""Every test gets a time limit, and tests that assert on wall-clock timing are marked.

Why our own (SIGALRM, main thread) rather than pytest-timeout: the locks stay as they are, and a hung loopback
stream or subprocess fails its test with a sentence instead of stalling the whole suite on a shared machine.
`@pytest.mark.timeout(S)` changes one test's limit; `@pytest.mark.timing` marks tests whose assertions depend on
the machine having CPU to spare: the suite runs them in its one process (serially, never in parallel with each
other); `pytest -m "not timing"` leaves them out on a busy machine and `pytest -m timing` runs only them.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CALL_LIMIT_S = 300.0  # a test body
SETUP_LIMIT_S = 900.0  # fixtures, including the session's CDK synths on a loaded 2-core machine


class TimeLimitExceeded(Exception):
    """A test or its set-up ran past its limit."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "timeout(seconds): this test's time limit instead of 300 s")
    config.addinivalue_line(
        "markers", "timing: asserts on wall-clock timing with margins; deselect with -m 'not timing' on a busy machine"
    )


@contextmanager
def _limit(seconds: float, what: str) -> Iterator[None]:
    def expire(_signum: int, _frame: Any) -> None:
        raise TimeLimitExceeded(f"{what} ran longer than {seconds:g} s; raise @pytest.mark.timeout or find the hang")

    previous = signal.signal(signal.SIGALRM, expire)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:  # an enclosing limit keeps running
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 0.001))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _limit(SETUP_LIMIT_S, f"set-up of {item.nodeid}"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    marker = item.get_closest_marker("timeout")
    seconds = float(marker.args[0]) if marker else CALL_LIMIT_S
    with _limit(seconds, item.nodeid):
        return (yield)
