"""SIGINT, SIGTERM and SIGHUP unwind the main thread as one exception; a signal the process was started with
ignored stays ignored; a deferred step finishes before the signal acts. Real signals to this process."""

from __future__ import annotations

import os
import signal
import time

import pytest

from ops.interrupts import Interrupted, deferred, unwinding


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_each_stopping_signal_raises_interrupted_naming_it_and_the_handlers_come_back(sig):
    before = signal.getsignal(sig)
    with pytest.raises(Interrupted, match=sig.name) as stopped, unwinding():
        os.kill(os.getpid(), sig)
        time.sleep(1)  # the handler runs in the main thread at the next bytecode
        pytest.fail("not interrupted")
    assert isinstance(stopped.value, KeyboardInterrupt) and stopped.value.signum == sig
    assert signal.getsignal(sig) is before


def test_a_hang_up_ignored_at_start_stays_ignored():
    """`nohup make build ...`: the command is meant to outlive the terminal."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with unwinding():
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.05)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_a_deferred_step_runs_to_its_end_and_the_first_signal_acts_after_it():
    done = []
    with pytest.raises(Interrupted, match="SIGTERM"), unwinding():
        with deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)  # the second Ctrl-C during a give-back
            time.sleep(0.05)
            done.append("given back")
        pytest.fail("the noted signal was not raised after the step")
    assert done == ["given back"]
