"""`bench sweep`: every variant through a grid of loads, each point run `repeats` times, into one sweep file.

Why a grid and not one point: whether speculation pays depends on load (it trades spare compute per step for
fewer steps; a full batch has no spare compute). A concurrency sweep (1, 2, 4 ... max_num_seqs, then 2x and 4x
of it to show queueing) and a Poisson rate sweep answer "up to what load", with goodput at the config's SLOs and
the crossover where the TPOT speedup falls below the floor (bench/sweep/analysis.py).

Each (load point, repeat) is one `run_benchmark` call, so every variant gets the same prompts and arrival
schedule at that point (one after the other, or at once with --mode simultaneous). The sweep file is rewritten
atomically after every (point, repeat); `--resume` runs only the missing ones, so SIGKILL loses at most the point
in flight and duplicates none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bench.prompts import TestCase
from bench.results import BenchResults, ResultsError, RunSettings, read_text, save_json
from bench.runner import Endpoint, RunOptions, run_benchmark
from config import pydantic_errors
from config.crossover import LoadKind  # one owner: crossover.json's model names the load kinds

SWEEP_SCHEMA_VERSION = 1
Grid = Literal["adaptive", "full"]
# The rate grid, when not given: these fractions of the baseline's request throughput at the largest
# concurrency within max_num_seqs, so it spans light load to past saturation (where the queue grows).
RATE_FRACTIONS = (0.25, 0.5, 0.75, 1.0, 1.5)
REQUESTS_PER_WORKER = 4  # at a concurrency point: each worker sends at least this many
RATE_WARMUP = 8  # requests sent at once before a rate point, as `bench run --rate` does: connections are open


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoadPoint(_Model):
    """One load of the grid: closed loop at `value` requests in flight, or Poisson arrivals at `value` per s."""

    kind: LoadKind
    value: float

    @property
    def label(self) -> str:
        return f"c={self.value:g}" if self.kind == "concurrency" else f"rate={self.value:g}/s"


class SweepSettings(_Model):
    """What every point shares; `run` is the template each point's RunSettings is made from."""

    run: RunSettings
    concurrencies: list[int] = Field(min_length=0)
    rates: list[float] | None = Field(description="Poisson rates (requests/s); None: derived from the baseline.")
    repeats: int = Field(ge=1)
    requests_per_point: int = Field(ge=1, description="At least this many measured requests per case and point.")
    max_num_seqs: int | None = Field(default=None, description="The services' batch size, when known (config).")
    grid: Grid = Field(
        default="full", description="full: every point `repeats` times; adaptive: bench/sweep/adaptive.py decides."
    )
    budget_minutes: float | None = Field(
        default=None, gt=0, description="adaptive: wall minutes the sweep may spend measuring."
    )


class PointRun(_Model):
    point: LoadPoint
    repeat: int = Field(ge=0)
    results: BenchResults


class PointDecision(_Model):
    """How the adaptive sweep decided one load of the candidate grid, and what it cost."""

    point: LoadPoint
    status: Literal["measured", "skipped", "undecided"]
    reason: str = Field(description="Why it was measured (coarse pass, bisection, repeat) or skipped, in words.")
    repeats: int = Field(ge=0)
    requests: int = Field(ge=0, description="Measured requests sent, every variant and case.")
    minutes: float = Field(ge=0, description="Wall minutes of its runs (the node's time).")
    device_minutes: float | None = Field(description="minutes x the Neuron devices the variants claim, when known.")
    predicted: dict[str, float] = Field(
        default_factory=dict,
        description="Speedup per `variant/kind` the fitted step-time model predicted before it was measured.",
    )


class AdaptiveLog(_Model):
    decisions: list[PointDecision]
    budget_minutes: float | None
    minutes: float = Field(description="Wall minutes of every run.")
    budget_exhausted: bool
    undecided: list[str] = Field(description="What is left undecided, in words (e.g. the budget ran out).")


class SweepResults(_Model):
    schema_version: Literal[1] = SWEEP_SCHEMA_VERSION
    created_at: datetime
    settings: SweepSettings
    points: list[PointRun]
    adaptive: AdaptiveLog | None = None

    def done(self) -> set[tuple[LoadKind, float, int]]:
        return {(p.point.kind, p.point.value, p.repeat) for p in self.points}

    @property
    def baseline(self) -> str:
        return self.points[0].results.baseline if self.points else ""


def concurrency_grid(max_num_seqs: int) -> list[int]:
    """1, 2, 4 ... up to max_num_seqs (always including it), then 2x and 4x of it, where requests queue."""
    if max_num_seqs < 1:
        raise ValueError(f"max_num_seqs={max_num_seqs} must be >= 1")
    grid: list[int] = []
    c = 1
    while c < max_num_seqs:
        grid.append(c)
        c *= 2
    return [*grid, max_num_seqs, 2 * max_num_seqs, 4 * max_num_seqs]


def derived_rates(sweep: SweepResults) -> list[float]:
    """RATE_FRACTIONS of the baseline's request throughput at the largest measured concurrency within
    max_num_seqs (the highest load that does not queue), rounded to 3 significant digits."""
    within = [
        p
        for p in sweep.points
        if p.point.kind == "concurrency"
        and (sweep.settings.max_num_seqs is None or p.point.value <= sweep.settings.max_num_seqs)
    ]
    if not within:
        return []
    top = max(p.point.value for p in within)
    throughputs = []
    for p in within:
        if p.point.value == top:
            runs = [r for r in p.results.runs if r.variant == p.results.baseline]
            seconds = sum(r.duration_s for r in runs)
            if seconds > 0:
                throughputs.append(sum(r.summary.ok for r in runs) / seconds)
    if not throughputs:
        return []
    capacity = sorted(throughputs)[len(throughputs) // 2]
    if capacity == 0:  # rates of 0 requests/s would be a grid of empty points, reported as if measured
        raise ValueError(
            f"the baseline {sweep.baseline!r} answered no request at concurrency {top:g} (the highest within "
            "max_num_seqs), so the rate grid cannot be derived from its throughput; fix the baseline service (its "
            "errors are above) or pass --rates"
        )
    return [float(f"{capacity * f:.3g}") for f in RATE_FRACTIONS]


def point_requests(kind: LoadKind, value: float, requests_per_point: int) -> int:
    """Requests of one run at a load: requests_per_point, and at a concurrency at least REQUESTS_PER_WORKER per
    worker, so every worker sends several. The simulations (bench/sweep/sim.py, perf/adaptive_sweep.py) count
    requests by this too."""
    return max(requests_per_point, REQUESTS_PER_WORKER * int(value)) if kind == "concurrency" else requests_per_point


def point_settings(settings: SweepSettings, point: LoadPoint) -> RunSettings:
    """The RunSettings of one point: point_requests requests, and a warm-up of one request per worker (closed
    loop) or RATE_WARMUP (open loop)."""
    requests = point_requests(point.kind, point.value, settings.requests_per_point)
    if point.kind == "concurrency":
        c = int(point.value)
        return settings.run.model_copy(update={"concurrency": c, "rate": None, "requests": requests, "warmup": c})
    return settings.run.model_copy(
        update={
            "concurrency": None,
            "rate": point.value,
            "requests": requests,
            "warmup": RATE_WARMUP,
        }
    )


def start_sweep(settings: SweepSettings, resume: SweepResults | None) -> SweepResults:
    """A new sweep file's content holding `resume`'s runs, refused when `resume` was run with other settings
    (its runs would not be comparable); both the full grid and the adaptive sweep start here."""
    if resume is not None and resume.settings != settings:
        raise ValueError(
            "--resume: the sweep file was run with other settings "
            f"({resume.settings.model_dump(exclude={'run'})}); pass the same options, or a new --out"
        )
    return SweepResults(created_at=datetime.now(UTC), settings=settings, points=list(resume.points if resume else []))


async def run_point(
    endpoints: Sequence[Endpoint],
    cases: Sequence[TestCase],
    settings: SweepSettings,
    point: LoadPoint,
    options: RunOptions,
) -> tuple[BenchResults, float, float]:
    """One run of `point` (every variant, in the settings' mode), its log lines indented; with the wall and client-CPU
    seconds it took, which each sweep logs its own way."""
    wall, cpu = time.perf_counter(), time.process_time()
    results = await run_benchmark(
        endpoints,
        cases,
        point_settings(settings, point),
        options=replace(options, log=lambda line: options.log(f"  {line}")),
    )
    return results, time.perf_counter() - wall, time.process_time() - cpu


async def run_sweep(
    endpoints: Sequence[Endpoint],
    cases: Sequence[TestCase],
    settings: SweepSettings,
    *,
    options: RunOptions | None = None,
    resume: SweepResults | None = None,
    on_point: Callable[[SweepResults], None] = lambda _: None,
) -> SweepResults:
    """The concurrency grid, then the rate grid (derived after the concurrency grid when not given), each
    point `repeats` times. `resume`: its (point, repeat) runs are kept and not run again."""
    sweep = start_sweep(settings, resume)
    options = options or RunOptions()
    log = options.log

    async def run_points(points: list[LoadPoint]) -> None:
        for point in points:
            for repeat in range(settings.repeats):
                if (point.kind, point.value, repeat) in sweep.done():
                    log(f"[{point.label} #{repeat + 1}] already in the sweep file; skipped")
                    continue
                log(f"[{point.label} #{repeat + 1}/{settings.repeats}]")
                results, wall, cpu = await run_point(endpoints, cases, settings, point, options)
                # the client's own CPU: near a core, its timestamps are late (python -m bench.standin.selfcheck)
                log(f"[{point.label} #{repeat + 1}] {wall:.1f} s wall, {cpu:.2f} s client CPU ({cpu / wall:.0%})")
                sweep.points.append(PointRun(point=point, repeat=repeat, results=results))
                on_point(sweep)

    await run_points([LoadPoint(kind="concurrency", value=c) for c in settings.concurrencies])
    rates = settings.rates if settings.rates is not None else derived_rates(sweep)
    if settings.rates is None:
        log(f"rate grid (from the baseline's throughput at max_num_seqs): {rates} requests/s")
    await run_points([LoadPoint(kind="rate", value=r) for r in rates])
    return sweep


def save_sweep(sweep: SweepResults, path: str | Path) -> Path:
    """Atomically and durably, like `bench run`'s results file."""
    return save_json(sweep.model_dump_json(indent=1), path)


def load_sweep(path: str | Path) -> SweepResults:
    file = Path(path)
    fix = f"pass a file written by `bench sweep` (schema_version {SWEEP_SCHEMA_VERSION})"
    text = read_text(file, where=f"sweep file {str(file)!r}", fix=fix)
    try:
        return SweepResults.model_validate_json(text)
    except ValidationError as err:
        first = pydantic_errors.sentence(err.errors()[0], fixes={}, default="{loc}: {msg}")
        raise ResultsError(
            f"sweep file {str(file)!r}: {first}; pass a file written by `bench sweep` "
            f"(schema_version {SWEEP_SCHEMA_VERSION})"
        ) from None
