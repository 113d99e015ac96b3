"""The adaptive sweep (`bench sweep`'s default; `--grid full` runs every point): the same crossover as the full
grid for a fraction of the requests.

Why: most of a full grid's hours measure points whose verdict was never in doubt (1.7x at concurrency 1 needs no
three repeats) or that lie far above the crossover, where the grid's largest concurrencies send the most requests.
The crossover is a threshold on a speedup that falls with load, so it can be found by bisection.

How, per load kind (concurrency, then rate), over the full grid's loads (concurrency only up to max_num_seqs:
above it the batch is full and TPOT is that of max_num_seqs):
1. Coarse pass upward from the lowest load, at most COARSE_STEP grid steps at a time (x4 on the doubling grid);
   once two loads are measured, a step-time model fitted to them (TPOT per variant, linear between measured loads
   and along the last slope above them) predicts every load, and the coarse pass stops at the first load whose
   predicted speedup is not far (FAR) above the floor: the loads it passes are skipped.
2. Bisection between the last paying and the first not-paying load, at the load whose predicted speedup is
   nearest the floor (the middle one without a model), until they are neighbours in the grid.
3. Only the two loads that bracket the crossover are repeated (up to `repeats`), until their speedup's interval
   clears the floor on one side: with one repeat a per-request bootstrap interval (bench/sweep/analysis.py
   observe), with more the range of the repeats (what crossover.json's `uncertain` reads). A bootstrap sees only
   request-to-request noise, so a bracketing load gets a second repeat, and a third while its median lies within
   DRIFT_Z run-to-run drifts (pooled over the repeated loads) of the floor.
4. `budget_minutes` caps the wall time the sweep spends measuring, whatever the mode (variants one after the
   other or at once): a run that would pass it (estimated from the nearest measured load) is not started, and the
   report says what is left undecided.
The crossover is then computed from the sweep file as for the full grid (bench/sweep/analysis.py crossovers), so
crossover.json keeps its schema; a grid load that was not measured is absent from its `grid`.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from bench.curve import value_at
from bench.prompts import TestCase
from bench.results import BenchResults
from bench.runner import Endpoint, RunOptions
from bench.sweep.analysis import Observation, first_below, repeat_observations, straddles
from bench.sweep.run import (
    AdaptiveLog,
    LoadKind,
    LoadPoint,
    PointDecision,
    PointRun,
    SweepResults,
    SweepSettings,
    derived_rates,
    run_point,
    start_sweep,
)

Series = tuple[str, str]  # (speculative variant, prompt kind)
KINDS: tuple[LoadKind, ...] = ("concurrency", "rate")  # in this order: the rate grid may derive from concurrency
COARSE_STEP = 2  # grid loads per coarse step: x4 on the doubling concurrency grid
DRIFT_Z = 2.0  # a median within this many run-to-run drifts of the floor is repeated
# The 5% quantiles of the chi-square distribution for 1..10 degrees of freedom (NIST/SEMATECH e-Handbook of
# Statistical Methods, 1.3.6.7.4 "Critical values of the chi-square distribution", lower tail 0.05): the upper
# bound of a standard deviation from `dof` degrees of freedom is sqrt(dof x variance / quantile). Beyond 10
# degrees of freedom the 10's bound is used (a little wider than needed).
CHI2_LOWER_5 = (0.00393, 0.103, 0.352, 0.711, 1.145, 1.635, 2.167, 2.733, 3.325, 3.940)
FAR = 0.15  # a predicted speedup more than 15% above the floor is not in doubt: the coarse pass skips that load


def label(series: Series) -> str:
    return f"{series[0]}/{series[1]}"


@dataclass(frozen=True)
class Measurement:
    """One (load, repeat): each series' observation, and its cost."""

    observations: dict[Series, Observation]
    requests: int
    seconds: float
    devices: int | None = None


@dataclass(frozen=True)
class Action:
    value: float
    repeat: int
    reason: str


@dataclass
class Planner:
    """Decides the next (load, repeat) of one load kind from what is measured so far. Pure: the async driver
    (run_adaptive_sweep) and the simulations (bench/sweep/sim.py) feed it measurements."""

    candidates: list[float]
    floor: float
    max_repeats: int
    measured: dict[float, list[Measurement]] = field(default_factory=dict)
    reasons: dict[float, list[str]] = field(default_factory=dict)
    predicted: dict[float, dict[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.candidates = sorted(set(self.candidates))

    def record(self, action: Action, measurement: Measurement) -> None:
        if action.value not in self.measured:
            self.predicted[action.value] = {label(s): p for s in self.series() if (p := self.predict(s, action.value))}
        self.measured.setdefault(action.value, []).append(measurement)
        self.reasons.setdefault(action.value, []).append(action.reason)

    def series(self) -> list[Series]:
        return list(dict.fromkeys(s for ms in self.measured.values() for m in ms for s in m.observations))

    def observations(self, s: Series, value: float) -> list[Observation]:
        return [m.observations[s] for m in self.measured.get(value, []) if s in m.observations]

    def median(self, s: Series, value: float) -> float:
        return statistics.median(o.speedup for o in self.observations(s, value))

    def interval(self, s: Series, value: float) -> tuple[float, float]:
        """One repeat: its bootstrap interval; more: the range of the repeats."""
        obs = self.observations(s, value)
        if len(obs) == 1:
            return obs[0].low, obs[0].high
        return min(o.speedup for o in obs), max(o.speedup for o in obs)

    def drift(self, s: Series) -> float | None:
        """Run-to-run spread of the speedup (relative, one sigma; its upper 95% bound), pooled over every load
        measured more than once: what a per-request bootstrap of one repeat cannot see."""
        sums, dof = 0.0, 0
        for value in self.measured:
            logs = [math.log(o.speedup) for o in self.observations(s, value) if o.speedup > 0]
            if len(logs) > 1:
                sums += statistics.variance(logs) * (len(logs) - 1)
                dof += len(logs) - 1
        if not dof:
            return None
        # an upper 95% confidence bound, not the estimate: from a few repeats the spread is often underestimated
        capped = min(dof, len(CHI2_LOWER_5))
        return math.sqrt(sums / dof * capped / CHI2_LOWER_5[capped - 1])

    def doubt(self, s: Series, value: float) -> str | None:
        """Why a load that brackets the crossover needs another repeat, or None when it is settled: it has all
        its repeats, or its interval clears the floor, it has more than one repeat (one repeat's bootstrap sees
        request-to-request noise, not run-to-run drift) and its median is more than DRIFT_Z pooled drifts from
        the floor."""
        n = len(self.observations(s, value))
        if n >= self.max_repeats:
            return None
        low, high = self.interval(s, value)
        if straddles(low, high, self.floor):
            return f"interval {low:.3f}-{high:.3f}x holds the floor {self.floor:g}x"
        if n < 2:
            return f"one repeat ({low:.3f}-{high:.3f}x) shows no run-to-run drift"
        drift = self.drift(s) or 0.0
        if abs(math.log(self.median(s, value) / self.floor)) <= DRIFT_Z * drift:
            return (
                f"median {self.median(s, value):.3f}x within {DRIFT_Z:g} run-to-run drifts ({drift:.1%}) of the floor"
            )
        return None

    def _loads(self, s: Series) -> list[float]:
        return sorted(v for v in self.measured if self.observations(s, v))

    def bracket(self, s: Series) -> tuple[float | None, float | None]:
        """(last paying, first not paying) among the measured loads, by the crossover rule (first_below)."""
        loads = self._loads(s)
        i = first_below([self.median(s, v) for v in loads], self.floor)
        if i is None:
            return (loads[-1] if loads else None), None
        return (loads[i - 1] if i else None), loads[i]

    def predict(self, s: Series, value: float) -> float | None:
        """The speedup at `value` from a step-time model of the measured loads: each side's TPOT linear between
        them, flat below the lowest, along the last slope (never falling) above the highest."""
        loads = self._loads(s)
        if len(loads) < 2:
            return None
        observed = [(v, obs) for v in loads if (obs := self.observations(s, v))]
        base = [(v, statistics.median(o.base_tpot for o in obs)) for v, obs in observed]
        spec = [(v, statistics.median(o.tpot for o in obs)) for v, obs in observed]
        tpot = value_at(spec, value, never_falling=True)
        return value_at(base, value, never_falling=True) / tpot if tpot > 0 else None

    def next(self) -> Action | None:
        """The lowest load any series needs next, or None when every series' crossover is bracketed by
        neighbouring, settled loads (or speculation paid up to the top of the grid)."""
        if not self.measured:
            return Action(self.candidates[0], 0, "coarse pass: the lowest load")
        if not self.series():  # no speculative variant measured (or none with a TPOT): nothing to bisect
            rest = [v for v in self.candidates if v not in self.measured]
            return Action(rest[0], 0, "no speedup to bisect on: every load once") if rest else None
        needs = [a for s in self.series() if (a := self._need(s)) is not None]
        return min(needs, key=lambda a: (a.value, a.repeat)) if needs else None

    def _need(self, s: Series) -> Action | None:
        lo, hi = self.bracket(s)
        index = self.candidates.index
        if hi is None and lo is not None and index(lo) + 1 < len(self.candidates):
            return self._coarse(s, index(lo))
        if hi is not None and lo is not None and index(hi) - index(lo) > 1:
            return self._bisect(s, lo, hi)
        # the crossover lies between neighbouring loads (or at the grid's bottom or above its top): settle them
        for value, side in ((hi, "first not paying"), (lo, "last paying")):
            if value is not None and (why := self.doubt(s, value)) is not None:
                return Action(value, len(self.measured[value]), f"repeat: {label(s)} {side}, {why}")
        return None

    def _bisect(self, s: Series, lo: float, hi: float) -> Action:
        index = self.candidates.index
        between = self.candidates[index(lo) + 1 : index(hi)]
        guesses = {v: p for v in between if (p := self.predict(s, v)) is not None}
        if guesses:
            value = min(guesses, key=lambda v: abs(guesses[v] - self.floor))
            why = f"predicted {guesses[value]:.3f}x, nearest the floor"
        else:
            value, why = between[len(between) // 2], "the middle load"
        return Action(value, 0, f"bisection for {label(s)} between {lo:g} (pays) and {hi:g} (does not): {why}")

    def _coarse(self, s: Series, last: int) -> Action:
        top = min(last + COARSE_STEP, len(self.candidates) - 1)
        for i in range(last + 1, top + 1):
            value = self.candidates[i]
            guess = self.predict(s, value)
            if i == top or (guess is not None and guess < self.floor * (1 + FAR)):
                why = "" if guess is None else f": predicted {guess:.3f}x"
                return Action(value, 0, f"coarse pass for {label(s)} up from {self.candidates[last]:g}{why}")
        raise AssertionError("unreachable: the loop returns at top")

    def crossover(self, s: Series) -> tuple[float | None, bool]:
        """(crossover, uncertain) as crossover.json states them (bench/sweep/analysis.py Crossover)."""
        lo, hi = self.bracket(s)
        uncertain = False
        for value in (v for v in (lo, hi) if v is not None):
            obs = self.observations(s, value)
            speeds = [o.speedup for o in obs]
            uncertain = uncertain or straddles(min(speeds), max(speeds), self.floor)
        return hi, uncertain

    def requests(self) -> int:
        return sum(m.requests for ms in self.measured.values() for m in ms)

    def decisions(self, kind: LoadKind, undecided: bool) -> list[PointDecision]:
        """Every load of the grid: how it was decided, what it cost, what the model predicted."""
        out = []
        for value in self.candidates:
            ms = self.measured.get(value, [])
            minutes = sum(m.seconds for m in ms) / 60
            devices = ms[0].devices if ms else None
            if ms:
                open_ = [label(s) for s in self.series() if value in self.bracket(s) and self.doubt(s, value)]
                status = "undecided" if open_ and undecided else "measured"
                reason = "; ".join(dict.fromkeys(self.reasons[value]))
                if status == "undecided":
                    reason += f"; still holds the floor for {', '.join(open_)} (budget)"
                predicted = self.predicted.get(value, {})
            else:
                status, reason = "skipped", self._skip_reason(value)
                predicted = {label(s): p for s in self.series() if (p := self.predict(s, value)) is not None}
            out.append(
                PointDecision(
                    point=LoadPoint(kind=kind, value=value),
                    status=status,
                    reason=reason,
                    repeats=len(ms),
                    requests=sum(m.requests for m in ms),
                    minutes=minutes,
                    device_minutes=minutes * devices if devices else None,
                    predicted=predicted,
                )
            )
        return out

    def _skip_reason(self, value: float) -> str:
        parts = []
        for s in self.series():
            _lo, hi = self.bracket(s)
            guess = self.predict(s, value)
            at = "" if guess is None else f" (predicted {guess:.3f}x)"
            if hi is not None and value > hi:
                parts.append(f"{label(s)}: above its crossover {hi:g}{at}")
            elif guess is not None and guess >= self.floor * (1 + FAR):
                parts.append(f"{label(s)}: predicted {guess:.3f}x, far above the floor")
            else:
                parts.append(f"{label(s)}: not needed to bracket the crossover{at}")
        return "not measured: " + "; ".join(parts) if parts else "not measured"

    def left_open(self) -> list[str]:
        """What a stop (the budget) leaves undecided, in words."""
        out = []
        for s in self.series():
            if (action := self._need(s)) is not None:
                lo, hi = self.bracket(s)
                where = f"between {lo:g} and {hi:g}" if lo is not None and hi is not None else f"above {lo:g}"
                out.append(f"{label(s)}: crossover {where} not settled (next: {action.reason})")
        return out


def _estimate_s(planner: Planner, value: float) -> float:
    """Wall seconds of one more run at `value`: the nearest measured load's seconds per unit of load scaled up
    (requests grow with concurrency), never less than that load's time."""
    if not planner.measured:
        return 0.0
    nearest = min(planner.measured, key=lambda v: abs(v - value))
    seconds = statistics.median(m.seconds for m in planner.measured[nearest])
    return seconds * max(1.0, value / nearest)


def wall_seconds(results: BenchResults) -> float:
    """The wall seconds a run in the sweep file took, from its first case run's start to its last one's end, so
    variants that ran at once (--mode simultaneous) count once: what a resumed sweep counts for a run it reuses."""
    if not results.runs:
        return 0.0
    start = min(r.started_at for r in results.runs)
    end = max(r.started_at + timedelta(seconds=r.duration_s) for r in results.runs)
    return (end - start).total_seconds()


def _measurement(run: PointRun, seconds: float) -> Measurement:
    runs = run.results.runs
    devices = [v.devices for v in run.results.variants]
    return Measurement(
        observations=repeat_observations(run),
        requests=sum(len(r.records) for r in runs),
        seconds=seconds,
        devices=sum(d for d in devices if d) if all(devices) else None,
    )


def _above_max_num_seqs(kind: LoadKind, values: list[float], mns: int | None) -> list[PointDecision]:
    return [
        PointDecision(
            point=LoadPoint(kind=kind, value=v),
            status="skipped",
            reason=f"not measured: above max_num_seqs {mns}, the batch is full and TPOT is that of {mns}",
            repeats=0,
            requests=0,
            minutes=0.0,
            device_minutes=None,
        )
        for v in values
    ]


@dataclass
class AdaptiveSweep:
    """One adaptive sweep under way: the concurrency loads, then the rate loads (derived from the concurrency
    points when not given), each through a Planner. Its state is its fields: the sweep file's content, the
    decisions of the load kinds done and what the budget left undecided, and the wall seconds spent measuring.

    The budget is wall time whatever the mode: a run made now counts what `clock` (monotonic; the tests inject
    one) says it took, so variants run at once (--mode simultaneous) count once; a run reused from the sweep file
    (--resume) counts its span in the file (wall_seconds)."""

    sweep: SweepResults
    floor: float
    run_point: Callable[[LoadPoint], Awaitable[BenchResults]]
    log: Callable[[str], None]
    on_point: Callable[[SweepResults], None]
    clock: Callable[[], float] = time.monotonic
    decisions: list[PointDecision] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)
    spent_s: float = 0.0
    exhausted: bool = False

    async def run(self) -> SweepResults:
        for kind in KINDS:
            await self.sweep_kind(kind)
            if self.exhausted:
                if kind == "concurrency":
                    self.undecided.append("the rate loads: not started (budget)")
                break
        self.publish([])
        return self.sweep

    async def sweep_kind(self, kind: LoadKind) -> None:
        """Every load of one kind the Planner asks for, until it is done or the next run would pass the budget."""
        mns = self.sweep.settings.max_num_seqs
        values = self.grid(kind)
        beyond = [v for v in values if kind == "concurrency" and mns is not None and v > mns]
        within = [v for v in values if v not in beyond]
        if not within:
            return
        planner = Planner(within, self.floor, self.sweep.settings.repeats)
        while (action := planner.next()) is not None and not self.over_budget(planner, action):
            planner.record(action, await self.measure(LoadPoint(kind=kind, value=action.value), action))
            self.publish(planner.decisions(kind, undecided=False))
        self.undecided.extend(planner.left_open() if self.exhausted else [])
        self.decisions.extend(planner.decisions(kind, undecided=self.exhausted))
        self.decisions.extend(_above_max_num_seqs(kind, beyond, mns))

    def grid(self, kind: LoadKind) -> list[float]:
        settings = self.sweep.settings
        if kind == "concurrency":
            return [float(c) for c in settings.concurrencies]
        if settings.rates is not None:
            return list(settings.rates)
        values = derived_rates(self.sweep)
        if values:
            self.log(f"rate grid (from the baseline's throughput at the highest concurrency measured): {values}")
        return values

    def over_budget(self, planner: Planner, action: Action) -> bool:
        """Whether the run `action` asks for would take the sweep past its budget (_estimate_s): then it is not
        started, and the sweep is exhausted."""
        budget = self.sweep.settings.budget_minutes
        if budget is None or self.spent_s + _estimate_s(planner, action.value) <= budget * 60:
            return False
        self.exhausted = True
        self.log(f"budget of {budget:g} min reached before {action.reason}")
        return True

    async def measure(self, point: LoadPoint, action: Action) -> Measurement:
        """The (point, repeat) `action` asks for: from the sweep file when it is there (--resume), else run now
        and timed by the clock."""
        run = next((p for p in self.sweep.points if p.point == point and p.repeat == action.repeat), None)
        if run is not None:
            seconds = wall_seconds(run.results)
        else:
            self.log(f"[{point.label} #{action.repeat + 1}] {action.reason}")
            start = self.clock()
            results = await self.run_point(point)
            seconds = self.clock() - start
            self.log(f"[{point.label} #{action.repeat + 1}] {seconds:.1f} s wall")
            run = PointRun(point=point, repeat=action.repeat, results=results)
            self.sweep.points.append(run)
        self.spent_s += seconds
        return _measurement(run, seconds)

    def publish(self, kind_decisions: list[PointDecision]) -> None:
        """The decisions so far into the sweep file's content, and on to `on_point` (which saves it)."""
        self.sweep.adaptive = AdaptiveLog(
            decisions=self.decisions + kind_decisions,
            budget_minutes=self.sweep.settings.budget_minutes,
            minutes=self.spent_s / 60,
            budget_exhausted=self.exhausted,
            undecided=list(self.undecided),
        )
        self.on_point(self.sweep)


async def run_adaptive_sweep(
    endpoints: Sequence[Endpoint],
    cases: Sequence[TestCase],
    settings: SweepSettings,
    floor: float,
    *,
    options: RunOptions | None = None,
    resume: SweepResults | None = None,
    on_point: Callable[[SweepResults], None] = lambda _: None,
    clock: Callable[[], float] = time.monotonic,
) -> SweepResults:
    """The AdaptiveSweep of `settings` on `endpoints`. `resume`: runs already in the file are reused, so the same
    decisions follow."""
    run_options = options or RunOptions()

    async def one_run(point: LoadPoint) -> BenchResults:
        return (await run_point(endpoints, cases, settings, point, run_options))[0]

    sweep = AdaptiveSweep(start_sweep(settings, resume), floor, one_run, run_options.log, on_point, clock)
    return await sweep.run()
