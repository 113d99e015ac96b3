"""Self-check of the client: N concurrent streams against the loopback server, measured against known truth.

Why: before trusting a speedup measured on Trainium, show that this client, on this machine, reports TTFT,
TPOT and token-weighted ITL within 1% at the target load, and how much CPU it needs to do so.

    python -m bench.standin.selfcheck --streams 64 --tokens-per-s 100 --seconds 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.arguments import finite_number, positive_pattern, whole_number
from bench.client import LoadResult, Target, make_session, run_load
from bench.results import summarize
from bench.standin.server import Script
from config.exit_codes import EXIT_FAILED, EXIT_OK


@contextmanager
def loopback_server(script: Script, lifetime_s: float) -> Iterator[str]:
    """Start `python -m bench.standin.server` in its own process (so it does not share our CPU time)."""
    args = [
        sys.executable, "-m", "bench.standin.server",
        "--ttft-ms", str(script.ttft_s * 1000), "--step-ms", str(script.step_s * 1000),
        "--pattern", ",".join(map(str, script.pattern)), "--usage", script.usage,
        "--k", str(script.num_speculative_tokens), "--model", script.model,
        "--fail-every", str(script.fail_every), "--fault", script.fault, "--lifetime-s", str(lifetime_s),
    ]  # fmt: skip
    if script.stack:
        args += ["--stack", script.stack]
    if script.token_ids:
        args.append("--token-ids")
    for text, pattern in script.prompt_patterns:
        args += ["--pattern-for", f"{text}={','.join(map(str, pattern))}"]
    for text, at in script.diverge:
        args += ["--diverge-for", f"{text}={at}"]
    if script.eos_after is not None:
        args += ["--eos-after", str(script.eos_after)]
    if script.step_per_seq_s or script.max_num_seqs:
        args += ["--step-per-seq-ms", str(script.step_per_seq_s * 1000), "--max-num-seqs", str(script.max_num_seqs)]
    if script.step_curve:
        args += ["--step-curve", ",".join(f"{b}:{t * 1000!r}" for b, t in script.step_curve)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("LISTENING "):
            raise RuntimeError(f"loopback server did not start (said {line!r})")
        yield line.split()[1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def server_log(base_url: str, last: int) -> list[dict[str, Any]]:
    """The server's record of its last requests: arrival and write times (perf_counter) and chunk sizes."""
    with urllib.request.urlopen(base_url + "/debug/requests", timeout=10) as resp:  # loopback only
        return list(json.loads(resp.read())[-last:])


def server_lateness_ms(logs: list[dict[str, Any]], script: Script) -> tuple[float, float]:
    """Mean and max lateness of the server's writes against its own schedule."""
    late = [
        (sent - (log["arrived"] + script.ttft_s + i * script.step_s)) * 1000
        for log in logs
        for i, sent in enumerate(log["sent"])
    ]
    return (statistics.fmean(late), max(late)) if late else (0.0, 0.0)


def truth_from_server(logs: list[dict[str, Any]], load: LoadResult) -> dict[str, float]:
    """Truth from the server's actual write times, comparable with ours because perf_counter is
    CLOCK_MONOTONIC, one clock for every process on a Linux host. Averaged over the run, so no request needs
    pairing: mean TTFT = mean(first write) - mean(client send), and so on. This isolates the client's error
    from the server's own queueing (a burst of 64 arrivals takes the server milliseconds to parse)."""
    sends = [load.perf_start + r.start_s for r in load.records]
    if len(logs) != len(sends) or not logs:
        raise ValueError(f"{len(logs)} server log entries for {len(sends)} client requests; run on an idle server")
    first = statistics.fmean(log["sent"][0] for log in logs)
    last = statistics.fmean(log["sent"][-1] for log in logs)
    tokens = [sum(log["sizes"]) for log in logs]
    after_first = sum(sum(log["sizes"][1:]) for log in logs)
    decode = sum(log["sent"][-1] - log["sent"][0] for log in logs)
    return {
        "arrival": statistics.fmean(log["arrived"] for log in logs) - statistics.fmean(sends),
        "ttft": first - statistics.fmean(sends),
        "e2e": last - statistics.fmean(sends),
        "tpot": statistics.fmean(
            (log["sent"][-1] - log["sent"][0]) / (n - 1) for log, n in zip(logs, tokens, strict=True)
        ),
        "itl_mean": decode / after_first,
    }


async def measure(base_url: str, script: Script, streams: int, tokens: int, api: str) -> dict[str, Any]:
    target = Target(base_url=base_url, model="loopback-model", api=api)  # type: ignore[arg-type]
    async with make_session(limit=streams) as session:
        # open the connections first, as a long benchmark would have them: connection set-up is not decode timing
        await run_load(target, "selfcheck", requests=streams, max_tokens=2, concurrency=streams, session=session)
        cpu0, wall0 = _cpu_s(), time.perf_counter()
        load = await run_load(
            target, "selfcheck", requests=streams, max_tokens=tokens, concurrency=streams, session=session
        )
        cpu, wall = _cpu_s() - cpu0, time.perf_counter() - wall0
    summary = summarize(load.records, duration_s=load.duration_s, max_tokens=tokens)
    logs = await asyncio.to_thread(server_log, base_url, streams)
    chunks = sum(len(r.chunk_times_s) for r in load.records)
    return {
        "ok": summary.ok,
        "requests": summary.requests,
        "scripted": script.truth(tokens),
        "server": truth_from_server(logs, load),
        "client": {
            "ttft": summary.ttft_s.mean,
            "tpot": summary.tpot_s.mean,
            "itl_mean": summary.itl_s.mean,
            "e2e": summary.e2e_s.mean,
        },
        "lateness_ms": server_lateness_ms(logs, script),
        "cpu_s": cpu,
        "wall_s": wall,
        "chunks": chunks,
    }


def _pct(got: float | None, truth: float) -> float | None:
    return None if got is None or not truth else (got - truth) / truth * 100


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.standin.selfcheck", description=__doc__.splitlines()[0])
    p.add_argument("--streams", type=whole_number(1), default=64)
    p.add_argument("--tokens-per-s", type=finite_number(above=0), default=100.0, help="per stream")
    p.add_argument(
        "--seconds", type=finite_number(above=0), default=5.0, help="decode time per stream (bounded: max 120)"
    )
    p.add_argument("--ttft-ms", type=finite_number(at_least=0), default=1000.0)
    p.add_argument(
        "--pattern",
        type=positive_pattern,
        default=(1,),
        help="tokens per chunk, cycled (e.g. 1,3,2 as speculation does)",
    )
    p.add_argument("--api", choices=["chat", "completions"], default="completions")
    p.add_argument("--tolerance-pct", type=finite_number(at_least=0), default=1.0)
    a = p.parse_args(argv)
    if a.seconds > 120 or a.streams > 1024:
        p.error("need --seconds <= 120 and --streams <= 1024")
    pattern = a.pattern
    mean_chunk = sum(pattern) / len(pattern)
    script = Script(ttft_s=a.ttft_ms / 1000, step_s=mean_chunk / a.tokens_per_s, pattern=pattern)
    tokens = max(2, round(a.tokens_per_s * a.seconds))
    with loopback_server(script, lifetime_s=a.seconds * 3 + 60) as url:
        r = asyncio.run(measure(url, script, a.streams, tokens, a.api))
    print(
        f"{a.streams} streams x {a.tokens_per_s:g} tokens/s, {tokens} tokens each, chunks of {','.join(map(str, pattern))} tokens, "
        f"TTFT {a.ttft_ms:g} ms, {a.api} API: {r['ok']}/{r['requests']} ok"
    )
    print(f"{'mean of':<10}{'scripted':>11}{'server':>11}{'client':>11}{'err vs server':>15}{'err vs script':>15}")
    failed = r["ok"] != r["requests"]
    for key, label in (("ttft", "TTFT ms"), ("tpot", "TPOT ms"), ("itl_mean", "ITL ms"), ("e2e", "E2E ms")):
        scripted, server, client = r["scripted"][key], r["server"][key], r["client"][key]
        err = _pct(client, server)
        failed |= err is None or abs(err) > a.tolerance_pct
        print(
            f"{label:<10}{scripted * 1000:>11.3f}{server * 1000:>11.3f}{(client or 0) * 1000:>11.3f}"
            f"{err or 0:>+14.3f}%{_pct(client, scripted) or 0:>+14.3f}%"
        )
    late_mean, late_max = r["lateness_ms"]
    print(
        f"client CPU (getrusage, this process): {r['cpu_s']:.2f} s in {r['wall_s']:.2f} s wall = "
        f"{r['cpu_s'] / r['wall_s'] * 100:.1f}% of one core, {r['cpu_s'] / max(r['chunks'], 1) * 1e6:.0f} us per chunk"
    )
    print(
        f"server handler started {r['server']['arrival'] * 1000:.3f} ms after the client sent (mean); its writes were "
        f"{late_mean:.3f} ms late on average, {late_max:.3f} ms at most, against its schedule"
    )
    print(("FAIL" if failed else "PASS") + f": client means within {a.tolerance_pct}% of the server's actual timing")
    return EXIT_FAILED if failed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
