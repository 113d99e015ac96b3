"""Per-request accuracy of bench's streaming client against a loopback server's actual write times.

    .venv/bin/python perf/client_accuracy.py [--streams 1,16,64] [--tokens 600] [--step-ms 10] [--ttft-ms 80]

For each stream count, two loads against `python -m bench.standin.server` (its own process):
  - burst-end: every stream starts at once with the same length, so all of them finish in the same instant
    (what fixed-length requests on one vLLM batch produce);
  - poisson: the same number of requests at Poisson arrivals spread over one request's duration.
Every request has its own prompt, so each client record pairs with the server's log of that request. Truth is
the server's write times on the same CLOCK_MONOTONIC (perf_counter): TTFT = first write - client send,
E2E = last write - client send, TPOT = (last - first write) / (tokens - 1), ITL p50 = token-weighted median of
(write gap / tokens in that chunk). Printed: the largest error of any request (percent; TTFT also in ms), for
the client's socket-read stamps and, from the same run, for stamps taken when the reader resumes (what the
client did before). Each load runs --trials times; the median and the best trial are shown, because on a
shared machine other processes' CPU bursts land on one trial or another.
Targets (issue 11): every metric within 1%, TTFT within 1% or 2 ms (at an 80 ms TTFT).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.client import LoadResult, Target, make_session, run_load  # noqa: E402
from bench.results import RequestRecord, percentile  # noqa: E402
from bench.standin.selfcheck import loopback_server, server_log  # noqa: E402
from bench.standin.server import Script  # noqa: E402

METRICS = ("ttft", "tpot", "e2e", "itl_p50")
COLUMNS = (*METRICS, "ttft_ms")


def truth(log: dict[str, Any], send: float) -> dict[str, float]:
    sent, sizes = log["sent"], log["sizes"]
    tokens = sum(sizes)
    gaps = [(sent[i] - sent[i - 1]) / sizes[i] for i in range(1, len(sent))]
    return {
        "ttft": sent[0] - send,
        "e2e": sent[-1] - send,
        "tpot": (sent[-1] - sent[0]) / (tokens - 1),
        "itl_p50": percentile(gaps, 50, sizes[1:]) or 0.0,
    }


def measured(r: RequestRecord) -> dict[str, float]:
    values, weights = r.itl()
    return {
        "ttft": r.ttft_s or 0.0,
        "e2e": r.e2e_s or 0.0,
        "tpot": r.tpot_s or 0.0,
        "itl_p50": percentile(values, 50, weights) or 0.0,
    }


async def one_load(url: str, streams: int, tokens: int, mode: str, seconds: float, tag: str) -> LoadResult:
    target = Target(url, "loopback-model", "completions")
    prompts = [f"{tag} request {i}" for i in range(streams)]
    async with make_session(limit=streams) as session:
        # open every connection first: connection set-up is not what is measured
        await run_load(target, "warm", requests=streams, max_tokens=2, concurrency=streams, session=session)
        if mode == "burst-end":
            return await run_load(
                target, prompts, requests=streams, max_tokens=tokens, concurrency=streams, session=session
            )
        return await run_load(
            target, prompts, requests=streams, max_tokens=tokens, rate=streams / seconds, seed=1, session=session
        )


def worst_errors(records: list[RequestRecord], load: LoadResult, logs: list[dict[str, Any]], tag: str) -> dict:
    by_prompt = {log["body"].get("prompt"): log for log in logs}
    worst = dict.fromkeys(COLUMNS, 0.0)
    for i, r in enumerate(records):
        if not r.ok:
            raise RuntimeError(f"request {i} failed: {r.error}")
        t = truth(by_prompt[f"{tag} request {i}"], load.perf_start + r.start_s)
        m = measured(r)
        for key in METRICS:
            worst[key] = max(worst[key], abs(m[key] - t[key]) / t[key] * 100)
        worst["ttft_ms"] = max(worst["ttft_ms"], abs(m["ttft"] - t["ttft"]) * 1000)
    return worst


def within_target(worst: dict[str, float]) -> bool:
    """Issue 11: every metric within 1%; TTFT within 1% or 2 ms (2 ms is 2.5% of an 80 ms TTFT)."""
    ttft_ok = worst["ttft"] <= 1.0 or worst["ttft_ms"] <= 2.0
    return ttft_ok and all(worst[k] <= 1.0 for k in ("tpot", "e2e", "itl_p50"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--streams", default="1,16,64")
    p.add_argument("--tokens", type=int, default=600, help="output tokens per request")
    p.add_argument("--step-ms", type=float, default=10.0, help="time between chunks")
    p.add_argument("--ttft-ms", type=float, default=80.0)
    p.add_argument("--pattern", default="1", help="tokens per chunk, cycled")
    p.add_argument("--trials", type=int, default=3)
    a = p.parse_args(argv)
    pattern = tuple(int(x) for x in a.pattern.split(","))
    script = Script(ttft_s=a.ttft_ms / 1000, step_s=a.step_ms / 1000, pattern=pattern)
    seconds = a.ttft_ms / 1000 + len(script.chunk_sizes(a.tokens)) * a.step_ms / 1000
    print(f"{a.tokens} tokens per request in chunks of {a.pattern}, {a.step_ms:g} ms apart, TTFT {a.ttft_ms:g} ms")
    print(f"max over requests of |client - server truth|, median (best) of {a.trials} trials")
    head = "".join(f"{k + ' %':>16}" for k in METRICS) + f"{'TTFT ms':>16}"
    print(f"{'streams':>7}  {'load':<10}{'stamp':<8}{head}")
    failed = False
    with loopback_server(script, lifetime_s=3600) as url:
        for streams in (int(x) for x in a.streams.split(",")):
            for mode in ("burst-end", "poisson"):
                trials: dict[str, list[dict[str, float]]] = {"socket": [], "resumed": []}
                for trial in range(a.trials):
                    tag = f"{mode}-{streams}-{trial}"
                    load = asyncio.run(one_load(url, streams, a.tokens, mode, seconds, tag))
                    logs = server_log(url, 200)
                    trials["socket"].append(worst_errors(load.records, load, logs, tag))
                    resumed = [raw.as_resumed().to_record(load.perf_start) for raw in load.raw]
                    trials["resumed"].append(worst_errors(resumed, load, logs, tag))
                for stamp, results in trials.items():
                    median = {k: statistics.median(t[k] for t in results) for k in COLUMNS}
                    best = min(results, key=lambda t: max(t[k] for k in METRICS))
                    ok = within_target(median)
                    failed |= stamp == "socket" and not ok
                    cells = "".join(f"{median[k]:>8.3f} ({best[k]:.3f})".rjust(16) for k in COLUMNS)
                    print(f"{streams:>7}  {mode:<10}{stamp:<8}{cells}" + ("" if ok else "  over target"))
    print("targets: 1% each, TTFT 1% or 2 ms (median trial)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
