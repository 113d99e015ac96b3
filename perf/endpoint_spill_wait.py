"""Does spill make requests wait? Time each request spends in the router, kept and spilled, before and after issue 36.

    .venv/bin/python perf/endpoint_spill_wait.py [--threshold 2] [--bursts 5] [--idle-s 60] [--design before after]

The pinned Envoy on the rendered bootstrap (every session to the speculative arm) in front of loopback stand-ins
that answer 50 ms after a request arrives and then stream 40 tokens 50 ms apart (about 2 s a stream, as in the
issue), and close a connection idle for 5 s, as vLLM does (VLLM_HTTP_TIMEOUT_KEEP_ALIVE's default). Per request
the script takes its TTFT at the client and subtracts the stand-in's own time from arrival to first write (its
log, same monotonic clock): what is left is the time in the router, i.e. waiting for a slot or a connection.

Scenarios (threshold T, one configured replica unless said):
- 2T and 4T requests at once onto open connections, `--bursts` times each: router time of the kept and of the
  spilled requests (median, max), and how many kept ones reached the arm only after a stream of their burst had
  ended (they waited for a slot);
- below the crossover: 5 bursts of T at once on open connections, then T at once after `--idle-s` without
  traffic (every connection closed by then): how many spilled;
- 2 configured replicas with one of them down: 2T at once (where the second replica's share goes);
- a replica that has just come up: the second added to the DNS answer, then 2T at once (it has no connection yet).
Also Envoy's connection setup time to the arm (upstream_cx_connect_ms).

`before`: the capped cluster's limits up to issue 36 (per host T connections, T x replicas requests waiting,
Envoy's default upstream idle timeout of 1 h); `after`: as rendered now (charts/envoy_bootstrap.py cap);
`pending-1` (not chosen, docs/endpoint.md): per host T connections, one request waiting, connections opened ahead
(per_upstream_preconnect_ratio 3) and the idle timeout of now. Numbers, not an assert: the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from bench.standin.selfcheck import server_log  # noqa: E402
from charts.envoy_bootstrap import Resolver, Upstream  # noqa: E402
from config import parse_config  # noqa: E402
from config.endpoint import ARM_HEADER, CAPPED_SUFFIX, SPILL_METRICS, STICKY_HEADER  # noqa: E402
from tests.conftest import default_config_dict  # noqa: E402
from tests.ports import free_port  # noqa: E402
from tests.router_harness import LoopbackDns, Router, envoy_router, stand_in  # noqa: E402

VLLM_KEEP_ALIVE_S = 5.0  # vllm/envs.py VLLM_HTTP_TIMEOUT_KEEP_ALIVE default, 0.9.1 and 0.29.0
TTFT_MS, STEP_MS, TOKENS = 50, 50, 40
CAPPED = "speculative" + CAPPED_SUFFIX
REPLICAS_NAME = "speculative-replicas.perf"
BIG = 1_000_000


def per_host_limits(
    threshold: int, waiting: int, *, idle_timeout: bool, preconnect: bool
) -> Callable[[dict[str, Any]], None]:
    """The capped cluster limited per host to `threshold` connections with `waiting` requests allowed to wait for
    one and no request limit; without `idle_timeout` also Envoy's default upstream idle timeout (1 h)."""

    def edit(bootstrap: dict[str, Any]) -> None:
        for cluster in bootstrap["static_resources"]["clusters"]:
            if not idle_timeout:
                cluster.pop("typed_extension_protocol_options", None)
            if cluster["name"] == CAPPED:
                cluster["circuit_breakers"] = {
                    "thresholds": [{"max_connections": BIG, "max_pending_requests": waiting, "max_requests": BIG}],
                    "per_host_thresholds": [{"max_connections": threshold}],
                }
                if preconnect:
                    cluster["preconnect_policy"] = {"per_upstream_preconnect_ratio": 3}

    return edit


def design_edit(design: str, threshold: int, replicas: int) -> Callable[[dict[str, Any]], None] | None:
    if design == "before":  # as rendered up to issue 36
        return per_host_limits(threshold, threshold * replicas, idle_timeout=False, preconnect=False)
    if design == "pending-1":  # per host, kept open, one waiting place, connections opened ahead (not chosen)
        return per_host_limits(threshold, 1, idle_timeout=True, preconnect=True)
    return None


@dataclass
class Request:
    arm: str
    router_ms: float  # TTFT minus the stand-in's own time to its first write
    waited_for_slot: bool  # reached its stand-in only after a stream of its burst had ended
    served_by: str


async def _one(session: aiohttp.ClientSession, prompt: str) -> tuple[str, float]:
    body = {"model": "m", "prompt": prompt, "max_tokens": TOKENS, "stream": True}
    started = time.perf_counter()
    async with session.post("/v1/completions", json=body, headers={STICKY_HEADER: prompt}) as resp:
        ttft = 0.0
        async for _ in resp.content.iter_any():
            ttft = ttft or time.perf_counter() - started
        if resp.status != 200:
            raise SystemExit(f"{prompt}: HTTP {resp.status}")
        return resp.headers.get(ARM_HEADER, ""), ttft


def burst(router: Router, standins: dict[str, str], n: int, tag: str) -> list[Request]:
    """`n` streamed completions started at once; each matched to the stand-in log entry of its prompt."""

    async def run() -> list[tuple[str, float]]:
        async with aiohttp.ClientSession(router.url) as session:
            return list(await asyncio.gather(*(_one(session, f"{tag} {i}") for i in range(n))))

    answers = asyncio.run(run())
    logs = {e["body"]["prompt"]: (name, e) for name, url in standins.items() for e in server_log(url, 200)}
    mine = [logs[f"{tag} {i}"] for i in range(n)]
    first_end = min(e["sent"][-1] for _, e in mine)
    return [
        Request(arm, (ttft - (e["sent"][0] - e["arrived"])) * 1000, e["arrived"] > first_end, name)
        for (arm, ttft), (name, e) in zip(answers, mine, strict=True)
    ]


def summary(requests: list[Request]) -> str:
    def ms(rs: list[Request]) -> str:
        values = sorted(r.router_ms for r in rs)
        return f"router time median {statistics.median(values):.1f} ms, max {values[-1]:.1f} ms" if values else ""

    kept = [r for r in requests if r.arm == "speculative"]
    waited = [r for r in kept if r.waited_for_slot]
    at_once = [r for r in kept if not r.waited_for_slot]
    spilled = [r for r in requests if r.arm == "baseline"]
    where = dict(sorted(Counter(r.served_by for r in kept).items()))
    out = f"kept {len(kept)} (on {where})"
    if at_once:
        out += f", {len(at_once)} at once: {ms(at_once)}"
    if waited:
        out += f", {len(waited)} waited for a slot: {ms(waited)}"
    return out + f"; spilled {len(spilled)}" + (f": {ms(spilled)}" if spilled else "")


def connect_ms(router: Router) -> str:
    """Envoy's histogram of connection setup times to the arm (admin /stats: P<q>(interval,cumulative))."""
    with urllib.request.urlopen(router.admin_url + "/stats?filter=" + CAPPED + ".upstream_cx_connect_ms") as r:
        line = next((x for x in r.read().decode().splitlines() if x.startswith(f"cluster.{CAPPED}.")), "")
    quantiles = dict(part.split("(") for part in line.split(": ", 1)[-1].split() if "(" in part)
    cumulative = {q: float(v.rstrip(")").split(",")[1]) for q, v in quantiles.items()}
    if not cumulative:
        return "connection setup to the arm: not recorded"
    return f"connection setup to the arm: P50 {cumulative['P50']:.1f} ms, max {cumulative['P100']:.1f} ms"


def config(threshold: int, replicas: int) -> Any:
    data = default_config_dict()
    data["endpoint"] = {"weights": {"speculative": 100}, "spill_threshold": {"speculative": threshold}}
    data["scaling"] = {"enabled": False}
    for profile in data["profiles"]:
        if profile["name"] == "speculative":
            profile["replicas"] = replicas
    return parse_config(data)


@contextmanager
def arm(
    design: str, threshold: int, replicas: int, live: list[str], workdir: Path
) -> Iterator[tuple[Router, LoopbackDns, dict[str, str], int]]:
    """Envoy over two stand-in replicas of the arm on 127.0.0.2 and .3 (the DNS answer: `live`) and the baseline."""
    port = free_port()
    timing = {"ttft_ms": TTFT_MS, "step_ms": STEP_MS, "lifetime_s": 900, "keep_alive_s": VLLM_KEEP_ALIVE_S}
    with ExitStack() as stack:
        dns = stack.enter_context(LoopbackDns())
        base = stack.enter_context(stand_in("baseline", **timing))
        a = stack.enter_context(stand_in("replica-a", address=("127.0.0.2", port), **timing))
        b = stack.enter_context(stand_in("replica-b", address=("127.0.0.3", port), **timing))
        dns.records[REPLICAS_NAME] = live
        router = stack.enter_context(
            envoy_router(
                config(threshold, replicas),
                {"baseline": Upstream("127.0.0.1", base.port), "speculative": Upstream("127.0.0.1", base.port)},
                workdir,
                replicas={"speculative": Upstream(REPLICAS_NAME, port)},
                resolver=Resolver(Upstream("127.0.0.1", dns.port), refresh="0.2s"),
                edit=design_edit(design, threshold, replicas),
            )
        )
        yield router, dns, {"baseline": base.url, "replica-a": a.url, "replica-b": b.url}, port


def follow(router: Router, dns: LoopbackDns, live: list[str], port: int) -> None:
    dns.records[REPLICAS_NAME] = live
    want = {f"{ip}:{port}" for ip in live}
    deadline = time.monotonic() + 10
    while router.hosts(CAPPED) != want and time.monotonic() < deadline:
        time.sleep(0.05)


def spilled(router: Router) -> float:
    return sum(router.counter(name, CAPPED) for name in SPILL_METRICS)


def one_replica(design: str, t: int, bursts: int, idle_s: float, workdir: Path) -> None:
    with arm(design, t, 1, ["127.0.0.2"], workdir) as (router, _, standins, _):
        burst(router, standins, t, "warm-up")
        for k in (2, 4):
            requests = [r for i in range(bursts) for r in burst(router, standins, k * t, f"x{k} {i}")]
            print(f"{design:9s} | {k}T = {k * t} at once, {bursts} times: {summary(requests)}")
        before = spilled(router)
        for i in range(5):
            burst(router, standins, t, f"below {i}")
        print(
            f"{design:9s} | T = {t} at once, 5 times on open connections: spilled {spilled(router) - before:.0f} of {5 * t}"
        )
        time.sleep(idle_s)
        open_before = router.counter("envoy_cluster_upstream_cx_active", CAPPED)
        after_idle = burst(router, standins, t, "after idle")
        print(
            f"{design:9s} | T = {t} at once after {idle_s:.0f} s idle ({open_before:.0f} connections open): "
            f"{summary(after_idle)}"
        )
        print(f"{design:9s} | {connect_ms(router)}")


def new_replica(design: str, t: int, workdir: Path) -> None:
    with arm(design, t, 2, ["127.0.0.2"], workdir) as (router, dns, standins, port):
        burst(router, standins, t, "warm-up")
        print(
            f"{design:9s} | 2 configured, 1 up: 2T = {2 * t} at once: {summary(burst(router, standins, 2 * t, 'one'))}"
        )
        follow(router, dns, ["127.0.0.2", "127.0.0.3"], port)
        print(
            f"{design:9s} | 2 configured, the second just up: 2T = {2 * t} at once: "
            f"{summary(burst(router, standins, 2 * t, 'new'))}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threshold", type=int, default=2)
    parser.add_argument("--bursts", type=int, default=5, help="bursts of 2T and of 4T")
    parser.add_argument(
        "--idle-s", type=float, default=60.0, help="the pause before the last burst below the crossover"
    )
    parser.add_argument("--design", nargs="+", choices=["before", "pending-1", "after"], default=["before", "after"])
    args = parser.parse_args(argv)
    print(
        f"stand-ins: {TTFT_MS} ms to the first token, {TOKENS} tokens {STEP_MS} ms apart, keep-alive {VLLM_KEEP_ALIVE_S:.0f} s"
    )
    for design in args.design:
        with tempfile.TemporaryDirectory() as tmp:
            one_replica(design, args.threshold, args.bursts, args.idle_s, Path(tmp) / "one")
            new_replica(design, args.threshold, Path(tmp) / "two")


if __name__ == "__main__":
    main()
