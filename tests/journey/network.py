"""The cluster's network on this machine's loopback: addresses, Service DNS and kube-proxy.

- Addresses: the world takes 127.K.0.0/16 for one random K, so two journeys (or the router tests' 127.0.0.2/3) never
  share an address: 127.K.0.1 the AWS and Hugging Face stand-ins, 127.K.1.n the Services' ClusterIPs, 127.K.2.n and up
  the pods' own addresses (each pod's servers bind its address, its loopback is mapped onto it: images.py).
- DNS: one server (tests/router_harness.py LoopbackDns) answering `<service>.<namespace>.svc.cluster.local` with the
  Service's ClusterIP, or for a headless Service (clusterIP: None) one A record per Ready pod, as CoreDNS's kubernetes
  plugin answers (kubernetes.io, "DNS for Services and Pods"); the pods' resolvers ask it (images.py).
- kube-proxy: each Service port listens on its ClusterIP and forwards every connection to one Ready pod behind the
  Service (round robin), on the targetPort (a name resolves through the pod's containerPorts). No Ready pod: the
  connection is closed at once, as a ClusterIP without endpoints refuses.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.journey.kubectl import pipe
from tests.router_harness import LoopbackDns

Endpoints = Callable[[], list[tuple[str, int]]]  # the Ready (pod address, port) pairs behind one Service port


@dataclass
class Addresses:
    block: int = field(default_factory=lambda: random.randrange(16, 250))
    _services: itertools.count = field(default_factory=lambda: itertools.count(1))
    _pods: itertools.count = field(default_factory=lambda: itertools.count(0))

    @property
    def host(self) -> str:
        return f"127.{self.block}.0.1"

    def service(self) -> str:
        return f"127.{self.block}.1.{next(self._services)}"

    def pod(self) -> str:
        n = next(self._pods)
        return f"127.{self.block}.{2 + n // 250}.{1 + n % 250}"


class KubeProxy:
    """TCP forwarding from (ClusterIP, port) to the Service's Ready pods, on an asyncio loop in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._servers: dict[tuple[str, int], asyncio.base_events.Server] = {}
        self._turn = itertools.count()
        self._thread = threading.Thread(target=self.loop.run_forever, name="kube-proxy", daemon=True)
        self._thread.start()

    def listen(self, address: str, port: int, endpoints: Endpoints) -> None:
        if (address, port) in self._servers:
            return

        async def start() -> asyncio.base_events.Server:
            return await asyncio.start_server(
                lambda r, w: self._forward(r, w, endpoints), address, port, reuse_address=True
            )

        self._servers[(address, port)] = asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, endpoints: Endpoints) -> None:
        ready = endpoints()
        if not ready:
            writer.close()
            return
        host, port = ready[next(self._turn) % len(ready)]
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def close(self) -> None:
        async def stop() -> None:
            for server in self._servers.values():
                server.close()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)


class ClusterDns(LoopbackDns):
    """LoopbackDns with the cluster's names; `records` is replaced whole by the world as Services and pods change."""

    def set(self, records: dict[str, list[str]]) -> None:
        self.records = records
