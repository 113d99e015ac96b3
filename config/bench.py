"""The `bench` section: the service-level objectives goodput counts against and how `bench sweep` runs."""

from __future__ import annotations

from pydantic import Field

from config.section import Section


class SloConfig(Section):
    """Service-level objectives for goodput (`bench sweep`): a request is good when it meets both. Defaults:
    GuideLLM's chat SLOs (TTFT <= 200 ms and ITL <= 50 ms at p99)."""

    ttft_p99_ms: float = Field(default=200.0, gt=0, le=600_000, description="Time to first token limit, ms.")
    tpot_p99_ms: float = Field(default=50.0, gt=0, le=60_000, description="Time per output token limit, ms.")


class SweepConfig(Section):
    """`bench sweep`: how often each load point runs and when speculation counts as no longer paying."""

    repeats: int = Field(default=3, ge=1, le=10, description="Runs of every load point (median and spread).")
    speedup_floor: float = Field(
        default=1.05,
        gt=1.0,
        le=2.0,
        description="The crossover is the lowest load at which the p50 TPOT speedup falls below this.",
    )


class BenchConfig(Section):
    slo: SloConfig = SloConfig()
    sweep: SweepConfig = SweepConfig()
