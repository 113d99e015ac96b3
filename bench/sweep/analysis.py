"""The numbers of a sweep: per load point and variant (median over repeats, with spread), saturation, goodput at
the SLOs, speedups per prompt kind, and the crossover where speculation stops paying.

Definitions (docs/sweep.md has the reasoning):
- Goodput, as `vllm bench serve --goodput` counts it: requests whose own TTFT and TPOT are both within the
  limits, per second of the run. A point "meets the SLO" when its p99 TTFT and p99 TPOT are within them.
- Saturated: the server's queue grows through the run, seen as TTFT (which includes the queue wait) growing
  from the first third of the requests to the last. Such repeats are flagged and left out of the medians; a
  point all of whose repeats saturate is flagged and left out of goodput maxima and the crossover.
- Speedup per kind: per repeat, the geometric mean over that kind's cases of baseline p50 TPOT / variant p50
  TPOT; the point's speedup is the median over repeats, its spread the lowest and highest.
- Crossover: the lowest load (concurrency, and separately rate) at which that speedup is below the floor.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.results import CaseRun, RequestRecord, percentile, summarize
from bench.sweep.run import LoadKind, LoadPoint, PointRun, SweepResults

# Saturated when the last third's median TTFT is more than SATURATION_GROWTH times the first third's and
# more than SATURATION_MIN_S above it (a few ms of jitter on a tiny TTFT is not a queue).
SATURATION_GROWTH = 2.0
SATURATION_MIN_S = 0.02
SATURATION_MIN_REQUESTS = 6


@dataclass(frozen=True)
class Slo:
    ttft_s: float
    tpot_s: float


def is_saturated(run: CaseRun) -> bool:
    """The queue grew through the run: TTFT of the last third of requests (by send time) well above the first."""
    ok = sorted((r for r in run.records if r.ok and r.ttft_s is not None), key=lambda r: r.start_s)
    if len(ok) < SATURATION_MIN_REQUESTS:
        return False
    third = len(ok) // 3
    early = statistics.median(r.ttft_s for r in ok[:third])  # type: ignore[misc]
    late = statistics.median(r.ttft_s for r in ok[-third:])  # type: ignore[misc]
    return late > SATURATION_GROWTH * early and late - early > SATURATION_MIN_S


def is_good(record: RequestRecord, slo: Slo) -> bool:
    """Within both limits; a one-token response has TPOT 0, as in vLLM's goodput."""
    if not record.ok or record.ttft_s is None:
        return False
    return record.ttft_s <= slo.ttft_s and (record.tpot_s or 0.0) <= slo.tpot_s


def goodput(runs: Iterable[CaseRun], slo: Slo) -> float:
    """Good requests per second over the runs' total duration."""
    runs = list(runs)
    seconds = sum(r.duration_s for r in runs)
    good = sum(is_good(rec, slo) for r in runs for rec in r.records)
    return good / seconds if seconds > 0 else 0.0


@dataclass(frozen=True)
class PointStats:
    """One (load point, variant): medians over the repeats that did not saturate (all, if every one did)."""

    point: LoadPoint
    variant: str
    repeats: int
    used: int
    saturated: bool  # every repeat saturated: flagged, left out of maxima and the crossover
    saturated_repeats: int
    requests: int
    errors: int
    ttft_p50: float | None
    ttft_p99: float | None
    tpot_p50: float | None
    tpot_p99: float | None
    itl_p50: float | None
    itl_p99: float | None
    e2e_p50: float | None
    e2e_p99: float | None
    output_tok_s: float
    per_user_tok_s: float | None  # p50 of each request's tokens / e2e
    devices: int | None
    acceptance_length: float | None
    request_rps: float
    goodput_rps: float
    meets_slo: bool
    tpot_spread: float | None  # (max - min) / median of p50 TPOT over the repeats used

    @property
    def per_device_tok_s(self) -> float | None:
        return self.output_tok_s / self.devices if self.devices else None


def _median(xs: Sequence[float | None]) -> float | None:
    values = [x for x in xs if x is not None]
    return statistics.median(values) if values else None


def _spread(xs: Sequence[float | None]) -> float | None:
    values = [x for x in xs if x is not None]
    mid = _median(values)
    return (max(values) - min(values)) / mid if values and mid else None


@dataclass(frozen=True)
class _Repeat:
    """One variant's runs at one (point, repeat), pooled over the test cases."""

    runs: list[CaseRun]
    devices: int | None

    @property
    def saturated(self) -> bool:
        return any(is_saturated(r) for r in self.runs)


def _repeats(sweep: SweepResults, point: LoadPoint, variant: str) -> list[_Repeat]:
    out = []
    for p in sweep.points:
        if p.point == point:
            info = next((v for v in p.results.variants if v.name == variant), None)
            runs = [r for r in p.results.runs if r.variant == variant]
            if runs:
                out.append(_Repeat(runs, info.devices if info else None))
    return out


def _acceptance(runs: Sequence[CaseRun]) -> float | None:
    lengths = [r.spec_decode.mean_acceptance_length or r.tokens_per_step() for r in runs]
    return _median(lengths)


def point_stats(sweep: SweepResults, point: LoadPoint, variant: str, slo: Slo) -> PointStats | None:
    repeats = _repeats(sweep, point, variant)
    if not repeats:
        return None
    calm = [r for r in repeats if not r.saturated]
    used = calm or repeats
    rows = []
    for rep in used:
        records = [rec for run in rep.runs for rec in run.records]
        seconds = sum(run.duration_s for run in rep.runs)
        s = summarize(records, duration_s=seconds, max_tokens=sweep.settings.run.max_tokens)
        rows.append((rep, s, seconds, records))
    p99_ttft = [s.ttft_s.p99 for _, s, _, _ in rows]
    p99_tpot = [s.tpot_s.p99 for _, s, _, _ in rows]
    ttft_p99, tpot_p99 = _median(p99_ttft), _median(p99_tpot)
    return PointStats(
        point=point,
        variant=variant,
        repeats=len(repeats),
        used=len(used),
        saturated=not calm,
        saturated_repeats=len(repeats) - len(calm),
        requests=sum(s.requests for _, s, _, _ in rows),
        errors=sum(s.errors for _, s, _, _ in rows),
        ttft_p50=_median([s.ttft_s.p50 for _, s, _, _ in rows]),
        ttft_p99=ttft_p99,
        tpot_p50=_median([s.tpot_s.p50 for _, s, _, _ in rows]),
        tpot_p99=tpot_p99,
        itl_p50=_median([s.itl_s.p50 for _, s, _, _ in rows]),
        itl_p99=_median([s.itl_s.p99 for _, s, _, _ in rows]),
        e2e_p50=_median([s.e2e_s.p50 for _, s, _, _ in rows]),
        e2e_p99=_median([s.e2e_s.p99 for _, s, _, _ in rows]),
        output_tok_s=_median([s.output_tok_s for _, s, _, _ in rows]) or 0.0,
        per_user_tok_s=_median([s.request_tok_s.p50 for _, s, _, _ in rows]),
        devices=used[0].devices,
        acceptance_length=_acceptance([run for rep in used for run in rep.runs]),
        request_rps=_median([s.ok / sec if sec > 0 else 0.0 for _, s, sec, _ in rows]) or 0.0,
        goodput_rps=_median([goodput(rep.runs, slo) for rep, _, _, _ in rows]) or 0.0,
        meets_slo=ttft_p99 is not None and tpot_p99 is not None and ttft_p99 <= slo.ttft_s and tpot_p99 <= slo.tpot_s,
        tpot_spread=_spread([s.tpot_s.p50 for _, s, _, _ in rows]),
    )


def load_points(sweep: SweepResults) -> list[LoadPoint]:
    """Every point in the sweep, concurrency first, each kind by increasing load."""
    unique = {(p.point.kind, p.point.value): p.point for p in sweep.points}
    return [unique[key] for key in sorted(unique, key=lambda k: (k[0] != "concurrency", k[1]))]


def variants(sweep: SweepResults) -> list[str]:
    return list(dict.fromkeys(v.name for p in sweep.points for v in p.results.variants))


def all_stats(sweep: SweepResults, slo: Slo) -> list[PointStats]:
    out = []
    for point in load_points(sweep):
        for variant in variants(sweep):
            stats = point_stats(sweep, point, variant, slo)
            if stats is not None:
                out.append(stats)
    return out


@dataclass(frozen=True)
class KindSpeedup:
    """A speculative variant's TPOT speedup on one prompt kind at one point: median over repeats and range."""

    point: LoadPoint
    variant: str
    kind: str
    median: float
    low: float
    high: float
    repeats: int
    saturated: bool  # every repeat had the variant or the baseline saturated on this kind


def _geomean(xs: Sequence[float]) -> float | None:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _repeat_speedup(p: PointRun, variant: str, kind: str) -> tuple[float | None, bool]:
    """(geometric-mean TPOT speedup over the kind's cases, whether either side saturated) for one repeat."""
    r = p.results
    cases = [s for s in r.speedups() if s.variant == variant and s.kind == kind and s.stop == "fixed"]
    saturated = False
    for s in cases:
        for side in (r.run(variant, s.test_case), r.run(r.baseline, s.test_case)):
            saturated = saturated or (side is not None and is_saturated(side))
    return _geomean([s.tpot for s in cases if s.tpot]), saturated


def kind_speedups(sweep: SweepResults) -> list[KindSpeedup]:
    out = []
    baseline = sweep.baseline
    for point in load_points(sweep):
        runs = [p for p in sweep.points if p.point == point]
        kinds = list(dict.fromkeys(run.kind for p in runs for run in p.results.runs))
        for variant in (v for v in variants(sweep) if v != baseline):
            for kind in kinds:
                per_repeat = [_repeat_speedup(p, variant, kind) for p in runs]
                calm = [x for x, sat in per_repeat if x is not None and not sat]
                values = calm or [x for x, _ in per_repeat if x is not None]
                if values:
                    out.append(
                        KindSpeedup(
                            point, variant, kind, statistics.median(values), min(values), max(values), len(values),
                            saturated=not calm,
                        )
                    )  # fmt: skip
    return out


@dataclass(frozen=True)
class Crossover:
    """Where a speculative variant's TPOT speedup on one prompt kind first falls below the floor, per load kind.
    `value` None: it never does within the grid (it pays up to `last_paying`)."""

    variant: str
    kind: str
    load: LoadKind
    floor: float
    value: float | None
    speedup: KindSpeedup | None
    last_paying: float | None
    last_paying_speedup: KindSpeedup | None
    grid: list[float]

    @property
    def uncertain(self) -> bool:
        """The floor lies within the repeats' range at the crossover or at the last point that paid."""
        return any(
            s is not None and straddles(s.low, s.high, self.floor) for s in (self.speedup, self.last_paying_speedup)
        )


@dataclass(frozen=True)
class Observation:
    """One (point, repeat) of one series (variant, kind): the speedup as kind_speedups computes it, the
    interval of a per-request bootstrap around it, and the TPOTs behind it (geometric means over the cases)."""

    speedup: float
    low: float
    high: float
    base_tpot: float
    tpot: float


BOOTSTRAP_RESAMPLES = 200
BOOTSTRAP_LEVEL = 0.90  # the interval holds the middle 90% of the resampled speedups


def observe(
    cases: Sequence[tuple[Sequence[float], Sequence[float]]], seed: int = 0, resamples: int | None = None
) -> Observation | None:
    """From per-request TPOTs (baseline, variant) per case: the geometric mean over cases of p50 ratios, and its
    bootstrap interval (requests resampled with replacement within each case and side)."""
    cases = [(b, v) for b, v in cases if b and v]
    if not cases:
        return None

    def stat(pairs: Sequence[tuple[Sequence[float], Sequence[float]]]) -> tuple[float, float, float]:
        base = [percentile(b, 50) or 0.0 for b, _ in pairs]
        var = [percentile(v, 50) or 0.0 for _, v in pairs]
        ratio = _geomean([b / v for b, v in zip(base, var, strict=True) if v > 0]) or 0.0
        return ratio, _geomean(base) or 0.0, _geomean(var) or 0.0

    speedup, base_tpot, tpot = stat(cases)
    rng = random.Random(seed)
    resampled = sorted(
        stat([(rng.choices(b, k=len(b)), rng.choices(v, k=len(v))) for b, v in cases])[0]
        for _ in range(BOOTSTRAP_RESAMPLES if resamples is None else resamples)
    )
    if not resampled:
        return Observation(speedup, speedup, speedup, base_tpot, tpot)
    tail = (1 - BOOTSTRAP_LEVEL) / 2 * 100
    low, high = percentile(resampled, tail) or speedup, percentile(resampled, 100 - tail) or speedup
    return Observation(speedup, min(low, speedup), max(high, speedup), base_tpot, tpot)


def repeat_observations(p: PointRun) -> dict[tuple[str, str], Observation]:
    """Every speculative variant and prompt kind of one (point, repeat), from its requests' TPOTs."""
    r = p.results
    out: dict[tuple[str, str], Observation] = {}
    keys = dict.fromkeys((run.variant, run.kind) for run in r.runs if run.variant != r.baseline)
    for variant, kind in keys:
        cases = []
        for run in r.runs:
            base = r.run(r.baseline, run.test_case, run.stop)
            if (run.variant, run.kind, run.stop) == (variant, kind, "fixed") and base is not None:
                cases.append((_tpots(base), _tpots(run)))
        seed = int(p.point.value * 1000) + p.repeat
        if (obs := observe(cases, seed)) is not None:
            out[(variant, kind)] = obs
    return out


def _tpots(run: CaseRun) -> list[float]:
    return [t for r in run.records if r.ok and (t := r.tpot_s) is not None]


def straddles(low: float, high: float, floor: float) -> bool:
    """The floor lies within the repeats' range: the verdict at that point could go either way."""
    return low < floor <= high


def first_below(medians: Sequence[float], floor: float) -> int | None:
    """The index of the first load (increasing) whose median speedup is below the floor: the crossover rule."""
    return next((i for i, m in enumerate(medians) if m < floor), None)


def crossovers(sweep: SweepResults, floor: float) -> list[Crossover]:
    speedups = kind_speedups(sweep)
    out = []
    keys = dict.fromkeys((s.variant, s.kind, s.point.kind) for s in speedups)
    for variant, kind, load in keys:
        series = sorted(
            (s for s in speedups if (s.variant, s.kind, s.point.kind) == (variant, kind, load) and not s.saturated),
            key=lambda s: s.point.value,
        )
        first = first_below([s.median for s in series], floor)
        below = series[first] if first is not None else None
        paying = series[first - 1] if first else (series[-1] if first is None and series else None)
        out.append(
            Crossover(
                variant=variant,
                kind=kind,
                load=load,
                floor=floor,
                value=below.point.value if below else None,
                speedup=below,
                last_paying=paying.point.value if paying else None,
                last_paying_speedup=paying,
                grid=[s.point.value for s in series],
            )
        )
    return out


def best_goodput(stats: Sequence[PointStats]) -> dict[tuple[str, LoadKind], PointStats]:
    """Per (variant, load kind): the unsaturated point with the highest goodput."""
    best: dict[tuple[str, LoadKind], PointStats] = {}
    for s in stats:
        key = (s.variant, s.point.kind)
        if not s.saturated and (key not in best or s.goodput_rps > best[key].goodput_rps):
            best[key] = s
    return best


def chunk_gaps(record: RequestRecord) -> list[float]:
    """Gaps between streamed chunks (s), one per chunk after the first: ITL as `vllm bench serve` measures it."""
    t = record.chunk_times_s
    return [b - a for a, b in itertools.pairwise(t)]


def p(values: Sequence[float], q: float) -> float | None:
    return percentile(values, q)
