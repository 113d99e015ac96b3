"""The suite's own time limit: a hanging test fails with a sentence, and the limit is gone afterwards."""

from __future__ import annotations

import signal
import time

import pytest

from tests.timeouts import TimeLimitExceeded, _limit


@pytest.mark.timeout(60)
def test_a_test_past_its_limit_fails_with_a_sentence() -> None:
    expected = r"sleepy ran longer than 0\.05 s; raise @pytest.mark.timeout"
    with pytest.raises(TimeLimitExceeded, match=expected), _limit(0.05, "sleepy"):
        time.sleep(5)
    remaining, _ = signal.getitimer(signal.ITIMER_REAL)
    assert 50 < remaining <= 60  # this test's own limit is running again


@pytest.mark.timeout(7)
def test_the_marker_sets_this_tests_limit() -> None:
    remaining, _ = signal.getitimer(signal.ITIMER_REAL)
    assert 0 < remaining <= 7
