"""Does spilling help? Mean TPOT through the endpoint with spill on and off, below and above the crossover.

    .venv/bin/python perf/endpoint_spill.py [--below 4] [--above 16] [--requests-per-stream 3]

Loopback stand-ins whose step grows with the requests in flight (`--step-per-seq-ms`), shaped like speculation
under load: the speculative one emits 3 tokens per step of 20 ms + 12 ms per other request, the baseline 1 token
per step of 25 ms + 1 ms per other request. Per token the speculative arm is faster below about 7 concurrent
requests and slower above (the crossover), so the endpoint sends every session to the speculative arm with a spill
threshold of 7. At each concurrency, bench's client runs closed-loop through the pinned Envoy with spill on and
then off; printed: mean TPOT, mean TTFT, and the requests the arm header says went where. Numbers, not an assert:
the machine is shared. Expected (issue 21): above the crossover TPOT with spill < without; below, equal within noise.
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
from charts.envoy_bootstrap import Upstream  # noqa: E402
from config import parse_config  # noqa: E402
from config.endpoint import CAPPED_SUFFIX, SPILL_METRICS  # noqa: E402
from tests.conftest import default_config_dict  # noqa: E402
from tests.router_harness import envoy_router, stand_in  # noqa: E402

CROSSOVER = 7
TOKENS = 24


async def mean_tpot_ttft_ms(url: str, streams: int, requests: int) -> tuple[float, float]:
    """Mean TPOT and mean TTFT: a request that waited for a slot on the arm shows in TTFT, not TPOT."""
    load = await run_load(
        Target(url, "loopback-model", "completions"), "hi", requests=requests, max_tokens=TOKENS, concurrency=streams
    )
    failed = [r.error for r in load.records if r.error]
    if failed:
        raise SystemExit(f"{len(failed)} requests failed, e.g. {failed[0]}")
    tpots = [
        (r.e2e_s - r.ttft_s) / (r.output_tokens - 1) * 1000
        for r in load.records
        if r.e2e_s is not None and r.ttft_s is not None and r.output_tokens > 1
    ]
    ttfts = [r.ttft_s * 1000 for r in load.records if r.ttft_s is not None]
    return statistics.fmean(tpots), statistics.fmean(ttfts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--below", type=int, default=4)
    parser.add_argument("--above", type=int, default=16)
    parser.add_argument("--requests-per-stream", type=int, default=3)
    args = parser.parse_args(argv)
    spec = ("--pattern", "3", "--step-per-seq-ms", "12")
    base = ("--pattern", "1", "--step-per-seq-ms", "1")
    with (
        stand_in("speculative", ttft_ms=50, step_ms=20, lifetime_s=900, extra=spec) as s,
        stand_in("baseline", ttft_ms=50, step_ms=25, lifetime_s=900, extra=base) as b,
    ):
        upstreams = {"speculative": Upstream("127.0.0.1", s.port), "baseline": Upstream("127.0.0.1", b.port)}
        for streams in (args.below, args.above):
            for spill in (True, False):
                data = default_config_dict()
                data["endpoint"] = {
                    "weights": {"speculative": 100},
                    "spill": spill,
                    "spill_threshold": {"speculative": CROSSOVER},
                }
                with tempfile.TemporaryDirectory() as tmp, envoy_router(parse_config(data), upstreams, Path(tmp)) as r:
                    tpot, ttft = asyncio.run(mean_tpot_ttft_ms(r.url, streams, streams * args.requests_per_stream))
                    spilled = sum(r.counter(name, "speculative" + CAPPED_SUFFIX) for name in SPILL_METRICS)
                print(
                    f"{streams:3d} streams ({'above' if streams > CROSSOVER else 'below'} the crossover {CROSSOVER}), "
                    f"spill {'on ' if spill else 'off'}: mean TPOT {tpot:6.2f} ms, TTFT {ttft:7.1f} ms, "
                    f"spilled {spilled:.0f} of {streams * args.requests_per_stream}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
