"""What elastic trn2 capacity costs and saves, on paper: two 24-hour load traces through the HPA replay of the
rendered ScaledObjects and the Cluster Autoscaler node model (tests/charts/capacity_replay.py), static ceiling vs
elastic. Prints node-hours, USD per 1M output tokens and the queue time users see during each scale-up.

    .venv/bin/python perf/elastic_capacity.py [--price 40] [--tokens-per-second 22] [--peak 8]

Inputs are stated, not measured here: --price is a round placeholder (set your region's rate), --tokens-per-second
per running sequence follows the blog's ~45 ms ITL on open-ended prompts, a request is 600 output tokens (the
reference benchmark's), node Ready and replica time-to-Ready come from the config and the scrape interval from the
scraper configuration it renders (docs/elastic-capacity.md).
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from charts.autoscaling import render_autoscaling
from config import cost, load_config
from tests.charts.capacity_replay import CapacityReplay, Sample
from tests.charts.conftest import of_kind
from tests.charts.hpa_replay import scrape_interval
from tests.charts.test_autoscaling import QUERY_URL

DAY = 24 * 3600
OUTPUT_TOKENS = 600


def diurnal(peak: int) -> Callable[[int], int]:
    """Concurrent requests per profile: a day with a 3:1 peak-to-trough (peak at 14:00, trough at 02:00)."""
    trough = peak / 3
    return lambda now: round(trough + (peak - trough) * (1 - math.cos(2 * math.pi * (now - 2 * 3600) / DAY)) / 2)


def with_burst(peak: int) -> Callable[[int], int]:
    """The same day plus a 45-minute burst to twice the peak at 10:00 (a launch, a batch job)."""
    base = diurnal(peak)
    return lambda now: 2 * peak if 10 * 3600 <= now < 10 * 3600 + 45 * 60 else base(now)


def queue_episodes(history: list[Sample]) -> list[tuple[float, float, float]]:
    """(start hour, minutes, worst queue seconds) of each stretch in which requests waited."""
    episodes: list[tuple[float, float, float]] = []
    start, worst = None, 0.0
    for s in history:
        if s.queue_seconds > 0:
            start = s.time if start is None else start
            worst = max(worst, s.queue_seconds)
        elif start is not None:
            episodes.append((start / 3600, (s.time - start) / 60, worst))
            start, worst = None, 0.0
    if start is not None:
        episodes.append((start / 3600, (history[-1].time - start) / 60, worst))
    return episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--price", type=float, default=40.0, help="USD per trn2 node-hour (a placeholder)")
    parser.add_argument("--tokens-per-second", type=float, default=22.0, help="output tokens/s per running sequence")
    parser.add_argument("--peak", type=int, default=8, help="concurrent requests per profile at the daily peak")
    args = parser.parse_args()
    config = load_config()
    specs = {n: o["spec"] for n, o in of_kind(render_autoscaling(config, QUERY_URL), "ScaledObject").items()}
    request_seconds = OUTPUT_TOKENS / args.tokens_per_second
    t = config.trn2_nodes
    print(
        f"config: floor {t.min_size}, ceiling {t.max_size} trn2 nodes; node Ready {t.node_ready_seconds} s, replica "
        f"time-to-Ready {config.scaling.time_to_ready_seconds} s; scrape every {scrape_interval(config)} s; "
        f"{len(specs)} profiles; peak {args.peak} "
        f"concurrent requests per profile; ${args.price:.2f}/node-hour; {args.tokens_per_second} tok/s per sequence"
    )
    print("| trace | fleet | node-hours | M output tokens | USD per 1M tokens | when requests queued |")
    print("| --- | --- | --- | --- | --- | --- |")
    for trace_name, clients in (("3:1 day", diurnal(args.peak)), ("3:1 day + burst", with_burst(args.peak))):
        for fleet in ("static ceiling", "elastic"):
            run_specs = copy.deepcopy(specs)
            replay = CapacityReplay.from_config(config, run_specs)
            if fleet == "static ceiling":
                replay.min_nodes = replay.max_nodes
                for spec in run_specs.values():
                    spec["minReplicaCount"] = spec["maxReplicaCount"]
            replay.run(clients, seconds=DAY, tokens_per_second=args.tokens_per_second, request_seconds=request_seconds)
            hours = replay.node_seconds / 3600
            usd = cost.usd_per_million_tokens(args.price * hours / 24, replay.tokens / DAY)
            waits = ", ".join(
                f"{h:.1f} h for {m:.0f} min, worst {w:.0f} s" for h, m, w in queue_episodes(replay.history)
            )
            print(
                f"| {trace_name} | {fleet} | {hours:.1f} | {replay.tokens / 1e6:.2f} | {usd:.2f} | {waits or 'never'} |"
            )


if __name__ == "__main__":
    main()
