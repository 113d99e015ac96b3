"""The ways a command on the deployer's machine is stopped: Ctrl-C (SIGINT), `kill` (SIGTERM) and a closed terminal
or SSH session (SIGHUP). Within `unwinding()` each raises `Interrupted` in the main thread, so every `finally` and
context manager runs (ops/out_of_service.py gives the service back) and the command ends with one sentence and
EXIT_INTERRUPTED (ops/kubectl.py, run_or_print). A step that must not be cut short runs under `deferred()`.

SIGKILL cannot be caught: a pause it leaves behind carries who took it, and the next ops command finds it
(ops/out_of_service.py, give_back_left_pauses).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A stopping signal arrived. A KeyboardInterrupt, so code that already cleans up after Ctrl-C (subprocess,
    asyncio, `except KeyboardInterrupt`) does the same for SIGTERM and SIGHUP."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signum)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()  # signal.signal works only there


@contextmanager
def unwinding() -> Iterator[None]:
    """Within: SIGINT, SIGTERM and SIGHUP raise Interrupted. A signal this process was started with ignored stays
    ignored (`nohup` ignores SIGHUP so the command outlives the terminal; a shell's background job ignores SIGINT)."""
    if not _in_main_thread():
        yield
        return
    previous = {s: signal.signal(s, _raise) for s in STOPPING if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextmanager
def deferred() -> Iterator[None]:
    """Within: SIGINT, SIGTERM and SIGHUP are only noted; on the way out the first one noted is raised again, so it
    acts (Interrupted, the default KeyboardInterrupt, or the default death of SIGTERM) once the step is done."""
    if not _in_main_thread():
        yield
        return
    noted: list[int] = []
    previous = {
        s: signal.signal(s, lambda signum, _frame: noted.append(signum))
        for s in STOPPING
        if signal.getsignal(s) is not signal.SIG_IGN
    }
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if noted:
            signal.raise_signal(noted[0])  # runs the handler just restored, here (CPython checks signals on return)
