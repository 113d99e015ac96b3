"""Piecewise-linear curves through measured points: the one rule by which the adaptive sweep predicts each
variant's TPOT between the loads it measured (bench/sweep/adaptive.py) and the stand-in reads its step time
between a step table's batches (bench/standin/step_table.py)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence


def value_at(points: Sequence[tuple[float, float]], x: float, *, never_falling: bool = False) -> float:
    """y at `x` on the curve through `points` (increasing x): linear between two points, flat below the first,
    along the last segment's slope above the last; with `never_falling`, a falling last slope counts as flat (a
    TPOT predicted above the measured loads never drops)."""
    if not points:
        raise ValueError("an empty curve")
    if x <= points[0][0] or len(points) == 1:
        return points[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    (x0, y0), (x1, y1) = points[-2], points[-1]
    if never_falling:
        return y1 + max(0.0, (y1 - y0) / (x1 - x0)) * (x - x1)
    return y1 + (y1 - y0) * (x - x1) / (x1 - x0)
