"""What the endpoint's router adds to TTFT on loopback: the pinned Envoy (charts/endpoint.py) vs. the stand-in direct.

    .venv/bin/python benchmarks/endpoint_overhead.py [--streams 64] [--requests 192] [--trials 3]

Two loopback stand-ins (`python -m bench.loopback_server`, own processes, 50 ms TTFT, 10 ms steps) and Envoy on the
rendered bootstrap (2 worker threads, as in the cluster). Two router paths: a plain arm (weights all on the
baseline) and a spilling arm (weights all on the speculative profile, a threshold no load reaches: the extra
loopback hop through its capped gate). Each trial runs, back to back at --streams concurrent streams with bench's
client, direct and via the router (alternating which goes first), for both paths; printed: TTFT p50 and p99 per mode and the router's addition
(via minus direct), per trial and the median of trials. Numbers, not an assert: the machine is shared.
Target (issue 21): p50 added <= 2 ms, p99 added <= 5 ms at 64 streams.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.client import Target, run_load  # noqa: E402
from bench.results import percentile  # noqa: E402
from charts.endpoint import Upstream  # noqa: E402
from config import parse_config  # noqa: E402
from tests.conftest import default_config_dict  # noqa: E402
from tests.router_harness import envoy_router, stand_ins  # noqa: E402

PATHS = {
    "plain arm": ("baseline", {"weights": {"baseline": 100}}),
    "spilling arm": ("speculative", {"weights": {"speculative": 100}, "spill_threshold": {"speculative": 4096}}),
}


async def ttfts_ms(url: str, streams: int, requests: int) -> list[float]:
    load = await run_load(
        Target(url, "loopback-model", "completions"), "hello", requests=requests, max_tokens=16, concurrency=streams
    )
    failed = [r.error for r in load.records if r.error]
    if failed:
        raise SystemExit(f"{len(failed)} requests failed, e.g. {failed[0]}")
    return [r.ttft_s * 1000 for r in load.records if r.ttft_s is not None]


def p(values: list[float], q: float) -> float:
    return float(percentile(values, q) or 0.0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--requests", type=int, default=192, help="per mode and trial")
    parser.add_argument("--trials", type=int, default=6)
    args = parser.parse_args(argv)
    added: dict[str, list[tuple[float, float]]] = {name: [] for name in PATHS}
    with stand_ins(["baseline", "speculative"], ttft_ms=50, step_ms=10, lifetime_s=900) as si:
        upstreams = {name: Upstream("127.0.0.1", s.port) for name, s in si.items()}
        for name, (profile, endpoint) in PATHS.items():
            data = default_config_dict()
            data["endpoint"] = endpoint
            with tempfile.TemporaryDirectory() as tmp, envoy_router(
                parse_config(data), upstreams, Path(tmp), concurrency=2
            ) as router:
                asyncio.run(ttfts_ms(router.url, args.streams, args.streams))  # warm the connections
                for trial in range(args.trials):
                    order = [si[profile].url, router.url][:: 1 if trial % 2 == 0 else -1]  # alternate who goes first
                    runs = {url: asyncio.run(ttfts_ms(url, args.streams, args.requests)) for url in order}
                    direct, via = runs[si[profile].url], runs[router.url]
                    row = (p(via, 50) - p(direct, 50), p(via, 99) - p(direct, 99))
                    added[name].append(row)
                    print(
                        f"{name:13s} trial {trial + 1}: TTFT p50 direct {p(direct, 50):6.2f} via {p(via, 50):6.2f} ms, "
                        f"p99 direct {p(direct, 99):6.2f} via {p(via, 99):6.2f} ms -> added p50 {row[0]:+.2f} "
                        f"p99 {row[1]:+.2f} ms",
                        flush=True,
                    )
    print(f"\nrouter overhead at {args.streams} streams, median of {args.trials} trials:")
    for name, rows in added.items():
        p50 = statistics.median(r[0] for r in rows)
        p99 = statistics.median(r[1] for r in rows)
        print(f"  {name:13s} added TTFT p50 {p50:+.2f} ms, p99 {p99:+.2f} ms (target <= 2 ms, <= 5 ms)")


if __name__ == "__main__":
    main()
