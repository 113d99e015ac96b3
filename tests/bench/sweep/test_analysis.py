"""The crossover rule on sweeps whose speedups are known: built from request records, so the speedups, the saturation
flags and the crossover all come out of the same code that reads a real sweep."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.results import BenchResults, CaseRun, RequestRecord, VariantInfo, summarize
from bench.spec_metrics import SpecDecodeResult
from bench.sweep.analysis import crossovers
from bench.sweep.run import LoadPoint, PointRun, SweepResults
from tests.bench.builders import record, run_settings, sweep_settings

FLOOR = 1.05
TOKENS = 11
BASE_TPOT = 0.02
REQUESTS = 12  # enough for the saturation test (it needs 6 and compares thirds)
WHEN = datetime(2026, 11, 26, tzinfo=UTC)
RUN = run_settings(requests=REQUESTS, max_tokens=TOKENS)


def _records(tpot: float, saturated: bool) -> list[RequestRecord]:
    """Requests 0.1 s apart; a saturated run's TTFT grows by 60 ms a request (its queue grows), a calm one's is flat."""
    out = []
    for i in range(REQUESTS):
        ttft = 0.05 + (0.06 * i if saturated else 0.0)
        out.append(record(i * 0.1, ttft, tpot, TOKENS))
    return out


def _case(variant: str, tpot: float, saturated: bool) -> CaseRun:
    records = _records(tpot, saturated)
    return CaseRun(
        variant=variant,
        test_case="json",
        kind="structured",
        started_at=WHEN,
        duration_s=2.0,
        records=records,
        summary=summarize(records, duration_s=2.0, max_tokens=TOKENS),
        spec_decode=SpecDecodeResult(engine="none", exposed=False),
    )


def sweep_of(points: list[tuple[int, float, bool]]) -> SweepResults:
    """One repeat per (concurrency, speculative TPOT speedup, whether the speculative side saturated)."""
    runs = []
    for concurrency, speedup, saturated in points:
        results = BenchResults(
            created_at=WHEN,
            settings=RUN,
            variants=[VariantInfo(name=n, base_url="http://127.0.0.1:1", model="m") for n in ("baseline", "spec")],
            baseline_variant="baseline",
            runs=[_case("baseline", BASE_TPOT, False), _case("spec", BASE_TPOT / speedup, saturated)],
        )
        runs.append(PointRun(point=LoadPoint(kind="concurrency", value=concurrency), repeat=0, results=results))
    settings = sweep_settings(run=RUN, concurrencies=[c for c, _, _ in points])
    return SweepResults(created_at=WHEN, settings=settings, points=runs)


def test_a_saturated_point_does_not_count_toward_the_crossover():
    """1.3x, 1.2x, then 0.9x where the queue grew: the 0.9x is the queue's, not speculation's, so no crossover is
    reported, and the last load that paid is 2."""
    (c,) = crossovers(sweep_of([(1, 1.3, False), (2, 1.2, False), (4, 0.9, True)]), FLOOR)
    assert c.value is None and c.speedup is None
    assert c.last_paying == 2 and c.last_paying_speedup is not None
    assert c.last_paying_speedup.median == pytest.approx(1.2)
    assert c.grid == [1, 2]


def test_a_variant_that_never_pays_has_no_last_paying_load():
    """0.9x, 0.8x, 0.7x: it crosses at the lowest load and paid nowhere. last_paying must be None, not the grid's top
    (the endpoint would let it take the highest load before spilling)."""
    (c,) = crossovers(sweep_of([(1, 0.9, False), (2, 0.8, False), (4, 0.7, False)]), FLOOR)
    assert c.value == 1 and c.speedup is not None and c.speedup.median == pytest.approx(0.9)
    assert c.last_paying is None and c.last_paying_speedup is None
