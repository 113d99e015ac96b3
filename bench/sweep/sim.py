"""A simulated sweep measurement from step-time curves: the adaptive sweep's decisions checked against the
full grid's on many curves in seconds, where loopback stand-ins would take minutes per curve.

Per (concurrency, repeat): the batch is min(concurrency, max_num_seqs); each request's TPOT is the step time at
that batch (bench/standin/step_table.py) times its steps / (tokens - 1), where a speculative request's steps follow the
acceptance model (a step accepts j of k drafts with probability alpha^j (1 - alpha), or k with alpha^k), times a
per-request timing jitter and a per-repeat drift (run-to-run differences on a shared accelerator). Requests per
point as `bench sweep` sends them (bench/sweep/run.py point_settings). Everything is seeded by (seed, load, repeat),
so a (load, repeat) is the same sample whichever sweep asks for it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from bench.standin.step_table import Curve, step_at
from bench.sweep.adaptive import Action, Measurement, Planner, Series
from bench.sweep.analysis import observe
from bench.sweep.run import point_requests

SERIES: Series = ("speculative", "structured")


@dataclass(frozen=True)
class SimulatedPair:
    """A baseline and a speculative service on measured curves, for one (k, alpha)."""

    base: Curve
    spec: Curve
    k: int
    alpha: float
    max_num_seqs: int
    tokens: int = 256
    requests: int = 32  # bench sweep --requests: at least this and 4x the concurrency per case
    jitter: float = 0.03  # per-request timing noise (relative, one sigma)
    drift: float = 0.01  # per-repeat drift of each service (relative, one sigma)
    seed: int = 0

    def requests_at(self, concurrency: float) -> int:
        return point_requests("concurrency", concurrency, self.requests)

    def _steps(self, rng: random.Random) -> int:
        produced, steps = 1, 0  # the first token comes with the prefill
        while produced < self.tokens:
            accepted = 0
            while accepted < self.k and rng.random() < self.alpha:
                accepted += 1
            produced += accepted + 1
            steps += 1
        return steps

    def measure(self, concurrency: float, repeat: int, resamples: bool = True) -> Measurement:
        rng = random.Random(f"{self.seed}/{concurrency:g}/{repeat}")
        batch = min(concurrency, self.max_num_seqs)
        n = self.requests_at(concurrency)
        base_step = step_at(self.base, batch) * rng.lognormvariate(0, self.drift)
        spec_step = step_at(self.spec, batch) * rng.lognormvariate(0, self.drift)
        base = [base_step * rng.lognormvariate(0, self.jitter) for _ in range(n)]
        spec = [spec_step * self._steps(rng) / (self.tokens - 1) * rng.lognormvariate(0, self.jitter) for _ in range(n)]
        obs = observe([(base, spec)], seed=repeat, resamples=None if resamples else 0)
        assert obs is not None
        seconds = (sum(base) + sum(spec)) * (self.tokens - 1) / max(1.0, batch)
        return Measurement({SERIES: obs}, requests=2 * n, seconds=seconds)


@dataclass(frozen=True)
class Outcome:
    crossover: float | None
    uncertain: bool
    requests: int


def full_grid(pair: SimulatedPair, grid: list[float], repeats: int) -> Outcome:
    """Every load `repeats` times; the crossover rule on the medians (no bootstrap needed). Loads above
    max_num_seqs are counted, not simulated: their TPOT is that of max_num_seqs, and the crossover uses the
    lowest load below the floor, which lies within max_num_seqs on these curves."""
    planner = Planner([v for v in grid if v <= pair.max_num_seqs], 1.05, repeats)
    requests = 0
    for value in grid:
        for repeat in range(repeats):
            if value > pair.max_num_seqs:  # the crossover rule skips nothing here, but these cost the most
                requests += 2 * pair.requests_at(value)
                continue
            m = pair.measure(value, repeat, resamples=False)
            requests += m.requests
            planner.record(Action(value, repeat, "full grid"), m)
    crossover, uncertain = planner.crossover(SERIES)
    return Outcome(crossover, uncertain, requests)


def adaptive(pair: SimulatedPair, grid: list[float], repeats: int, floor: float = 1.05) -> tuple[Outcome, Planner]:
    planner = Planner([v for v in grid if v <= pair.max_num_seqs], floor, repeats)
    while (action := planner.next()) is not None:
        planner.record(action, pair.measure(action.value, action.repeat))
    crossover, uncertain = planner.crossover(SERIES)
    return Outcome(crossover, uncertain, planner.requests()), planner
