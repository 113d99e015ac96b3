"""Each serving stack's live metric names, handed on to the layers that may not import serving_stacks (bench: its
stand-in speaks a stack's vocabulary, and its acceptance reads a stack's counters). The one owner is each stack's
LIVE_METRICS (serving_stacks/contract.py); a profile's own is `ServingProfile.live_metrics`.
"""

from __future__ import annotations

from serving_stacks import STACKS, stack_named
from serving_stacks.contract import (
    HISTOGRAM_SUFFIXES,
    POSITION_LABEL,
    AcceptanceCounters,
    LiveMetrics,
    buckets,
    total,
)

__all__ = [
    "HISTOGRAM_SUFFIXES",
    "POSITION_LABEL",
    "STACK_NAMES",
    "VOCABULARIES",
    "AcceptanceCounters",
    "LiveMetrics",
    "buckets",
    "of_stack",
    "total",
]

STACK_NAMES: tuple[str, ...] = tuple(s.NAME for s in STACKS)
VOCABULARIES: tuple[LiveMetrics, ...] = tuple(s.LIVE_METRICS for s in STACKS)


def of_stack(name: str) -> LiveMetrics:
    """The live metrics of the stack called `name` (one of STACK_NAMES)."""
    return stack_named(name).LIVE_METRICS
