"""What the adaptive sweep saves: per (k, alpha) of the measured H100 curves, the full grid's crossover against the
adaptive sweep's, their `uncertain` flags, and the ratio of requests; then the trn2 hours of `make bench-sweep`
with the default config, full grid against adaptive.

    .venv/bin/python perf/adaptive_sweep.py [--seeds 3] [--tokens 256] [--max-num-seqs 256]
        [--drift 0.01] [--jitter 0.03]

Part 1 simulates the measurements (bench/sweep/sim.py) from tests/bench/fixtures/step-times-h100-qwen3-32b.json:
per-request TPOTs from the step time at the batch, the acceptance model and timing noise, seeded per (load,
repeat) so both sweeps see the same samples. The full grid's requests include its 2x and 4x max_num_seqs points.

Part 2 prices the default sweep (docs/sweep.md "How long and what it costs"): a request takes 256 tokens x 45 ms
(the blog's baseline ITL on trn2) = 11.5 s; a closed-loop point of N requests at concurrency c takes
N / min(c, max_num_seqs) x 11.5 s, a rate point N / rate; the rates are the default fractions of
max_num_seqs / 11.5 s. The adaptive sweep's loads come from bench/sweep/adaptive.py's Planner on two assumed
outcomes: speculation pays at every load (the blog: 1.7x at max_num_seqs 4), or it stops paying at concurrency 2.
Speculative runs are counted as long as the baseline's (an upper bound). Numbers, not asserts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.standin.step_table import StepTable  # noqa: E402
from bench.sweep.adaptive import Measurement, Planner  # noqa: E402
from bench.sweep.analysis import Observation  # noqa: E402
from bench.sweep.run import RATE_FRACTIONS, LoadKind, concurrency_grid, point_requests  # noqa: E402
from bench.sweep.sim import SimulatedPair, adaptive, full_grid  # noqa: E402

TABLE = ROOT / "tests" / "bench" / "fixtures" / "step-times-h100-qwen3-32b.json"
FLOOR = 1.05
REQUEST_S = 256 * 0.045  # the default sweep's request on trn2 (docs/sweep.md)
REQUESTS = 32
CASES, VARIANTS, REPEATS = 2, 2, 3


def part1(seeds: int, tokens: int, mns: int, drift: float, jitter: float) -> None:
    table = StepTable.load(TABLE)
    grid = [float(c) for c in concurrency_grid(mns)]
    print(
        f"H100 curves, max_num_seqs {mns}, {tokens} tokens, grid {[int(g) for g in grid]}, 3 repeats, "
        f"run drift {drift:.1%}, request jitter {jitter:.1%}"
    )
    print(
        f"{'pair':10} {'seed':>4} {'full':>6} {'adaptive':>8} {'uncertain f/a':>14} {'requests f/a':>16} {'ratio':>7}"
    )
    ratios, agree, total = [], 0, 0
    for k in (3, 5, 7):
        for alpha in (0.6, 0.7, 0.8):
            for seed in range(seeds):
                pair = SimulatedPair(
                    table.curve(0), table.curve(k), k, alpha, mns, tokens=tokens, jitter=jitter, drift=drift, seed=seed
                )
                full = full_grid(pair, grid, REPEATS)
                found, _ = adaptive(pair, grid, REPEATS, FLOOR)
                ratio = found.requests / full.requests
                ratios.append(ratio)
                same = found.crossover == full.crossover and found.uncertain == full.uncertain
                agree += same
                total += 1
                flags = f"{full.uncertain!s:.1}/{found.uncertain!s:.1}"
                print(
                    f"k{k} a{alpha:<6} {seed:>4} {full.crossover or 0:>6g} {found.crossover or 0:>8g} {flags:>14} "
                    f"{full.requests:>8}/{found.requests:<7} {ratio:>6.1%}" + ("" if same else "  DIFFERS")
                )
    print(f"same crossover and flag: {agree}/{total}; request ratio max {max(ratios):.1%}, mean "
          f"{sum(ratios) / len(ratios):.1%}")  # fmt: skip


def _point_seconds(kind: LoadKind, value: float, mns: int) -> tuple[int, float]:
    """(requests, seconds) of one (point, repeat): every case and variant, one after the other."""
    n = point_requests(kind, value, REQUESTS)
    per_run = n / min(value, mns) * REQUEST_S if kind == "concurrency" else n / value
    return n * CASES * VARIANTS, per_run * CASES * VARIANTS


def _adaptive_hours(mns: int, crossover: float | None) -> tuple[float, list[str]]:
    capacity = mns / REQUEST_S
    grids = {
        "concurrency": [float(c) for c in concurrency_grid(mns) if c <= mns],
        "rate": [round(capacity * f, 3) for f in RATE_FRACTIONS],
    }
    seconds, plan = 0.0, []
    for kind, grid in grids.items():
        planner = Planner(grid, FLOOR, REPEATS)
        # the crossover in rate terms: the rate whose offered load is that concurrency's (Little's law)
        edge = None if crossover is None else (crossover if kind == "concurrency" else crossover / REQUEST_S)
        while (action := planner.next()) is not None:
            pays = edge is None or action.value < edge
            speedup = 1.7 if pays else 0.9
            obs = Observation(speedup, speedup * 0.98, speedup * 1.02, 0.045, 0.045 / speedup)
            n, s = _point_seconds(kind, action.value, mns)
            seconds += s
            planner.record(action, Measurement({("speculative", "all"): obs}, n, s))
        plan.append(f"{kind}: " + ", ".join(f"{v:g}x{len(ms)}" for v, ms in sorted(planner.measured.items())))
    return seconds / 3600, plan


def part2(mns: int = 4) -> None:
    full = sum(_point_seconds("concurrency", c, mns)[1] for c in concurrency_grid(mns)) * REPEATS
    capacity = mns / REQUEST_S
    full += sum(_point_seconds("rate", capacity * f, mns)[1] for f in RATE_FRACTIONS) * REPEATS
    print(f"\ntrn2 hours of `make bench-sweep`, default config (max_num_seqs {mns}, 2 cases, 2 variants, 3 repeats, "
          f"{REQUEST_S:.1f} s per request):")  # fmt: skip
    print(f"  full grid: {full / 3600:.1f} h")
    for label, crossover in (("pays at every load", None), ("stops paying at concurrency 2", 2.0)):
        hours, plan = _adaptive_hours(mns, crossover)
        print(f"  adaptive, {label}: {hours:.1f} h ({'; '.join(plan)}; load x runs)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3, help="simulated sweeps per (k, alpha)")
    p.add_argument("--tokens", type=int, default=256, help="output tokens per request")
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--drift", type=float, default=0.01, help="per-repeat drift of each service (one sigma)")
    p.add_argument("--jitter", type=float, default=0.03, help="per-request timing noise (one sigma)")
    a = p.parse_args()
    part1(a.seeds, a.tokens, a.max_num_seqs, a.drift, a.jitter)
    part2()


if __name__ == "__main__":
    main()
