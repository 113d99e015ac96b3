"""The one piecewise-linear rule that the adaptive sweep's TPOT model and the stand-in's step table share."""

from __future__ import annotations

import pytest

from bench.curve import value_at

POINTS = [(1.0, 10.0), (4.0, 16.0), (8.0, 12.0)]  # rises, then falls


def test_between_two_points_it_is_the_line_through_them() -> None:
    assert value_at(POINTS, 2.0) == pytest.approx(12.0)
    assert value_at(POINTS, 6.0) == pytest.approx(14.0)


def test_below_the_first_point_it_is_flat() -> None:
    assert value_at(POINTS, 0.0) == value_at(POINTS, 1.0) == 10.0


def test_above_the_last_point_it_follows_the_last_slope_unless_told_never_to_fall() -> None:
    assert value_at(POINTS, 12.0) == pytest.approx(8.0)
    assert value_at(POINTS, 12.0, never_falling=True) == 12.0
    rising = [(1.0, 10.0), (2.0, 12.0)]
    assert value_at(rising, 4.0) == value_at(rising, 4.0, never_falling=True) == pytest.approx(16.0)


def test_one_point_is_flat_and_none_is_refused() -> None:
    assert value_at([(2.0, 5.0)], 9.0) == 5.0
    with pytest.raises(ValueError, match="empty curve"):
        value_at([], 1.0)
