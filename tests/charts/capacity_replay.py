"""Replicas and trn2 nodes together: the HPA replay (tests/charts/hpa_replay.py) of each rendered ScaledObject, plus a
node model of the Cluster Autoscaler as its docs describe it, over a load trace.

Node model (config/node_scaling.py has the sources): every SCAN_INTERVAL_SECONDS CA looks for Pending replicas and
raises the group's desired size by the nodes they need, never above max_size; a node is Ready node_ready_seconds
after it was asked for; a Pending replica binds to the first Ready node with free devices (the scheduler places no
pod on a node that is not Ready) and is Ready time_to_ready after that, once it has loaded: a replica counts as
Ready only on a Ready node and after its load, the floor's too (those that do not fit the floor's nodes wait like
any). KEDA's HPA removes Pending replicas first, then the newest (ReplicaSet's deletion order); a node without a
replica (vLLM pods are safe-to-evict "false", so CA never moves one) is removed once it has been unneeded for
scale-down-unneeded-time, not within scale-down-delay-after-add of the last scale-up, never below min_size. A node
is billed from the request to its removal.

The load: `clients(t)` concurrent requests per profile (closed loop, as in the HPA replay); a Ready replica runs up
to its compiled batch and the rest wait. Each HPA sync reads the load as the managed scraper saw it at its last
scrape (the HPA replay's ScrapeLag, on the rendered scrape interval). Tokens: running sequences x `tokens_per_second` per sequence. Queue time:
Little's law, waiting / (running / request_seconds).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from config import node_scaling
from tests.charts.hpa_replay import SYNC_SECONDS, Hpa, ScrapeLag, scrape_interval

TICK_SECONDS = 5
METRICS = {"requests-waiting": "waiting", "requests-running": "running"}


@dataclass
class Node:
    asked: int
    ready_at: int
    unneeded_since: int | None = None


@dataclass
class Replica:
    profile: str
    created: int
    node: Node | None = None
    ready_at: int | None = None  # set when it starts on a Ready node: then plus its load time

    def ready(self, now: int) -> bool:
        return self.ready_at is not None and self.ready_at <= now


@dataclass
class Sample:
    """The fleet at the end of one tick: node and replica counts, Ready replicas and waiting requests per profile,
    the worst queue time."""

    time: int
    nodes: int
    replicas: dict[str, int]
    ready: dict[str, int]
    waiting: dict[str, int]
    queue_seconds: float


@dataclass
class CapacityReplay:
    """One deployment: each profile's ScaledObject spec, its devices per replica and batch, and the node group."""

    specs: dict[str, dict[str, Any]]
    devices: dict[str, int]
    batch: dict[str, int]
    devices_per_node: int
    min_nodes: int
    max_nodes: int
    node_ready_seconds: int
    time_to_ready: int
    unneeded_seconds: int
    delay_after_add_seconds: int
    scrapes: ScrapeLag
    nodes: list[Node] = field(default_factory=list)
    replicas: list[Replica] = field(default_factory=list)
    node_seconds: int = 0
    tokens: float = 0.0
    last_scale_up: int = -(10**9)
    history: list[Sample] = field(default_factory=list)

    @classmethod
    def from_config(cls, config: Any, specs: dict[str, dict[str, Any]]) -> CapacityReplay:
        t = config.trn2_nodes
        return cls(
            specs=specs,
            devices={p.name: p.placement.devices for p in config.profiles},
            batch={p.name: p.max_num_seqs for p in config.profiles},
            devices_per_node=t.instance.devices,
            min_nodes=t.min_size,
            max_nodes=t.max_size,
            node_ready_seconds=t.node_ready_seconds,
            time_to_ready=config.scaling.time_to_ready_seconds,
            unneeded_seconds=node_scaling.scale_down_unneeded_seconds(config),
            delay_after_add_seconds=node_scaling.scale_down_delay_after_add_seconds(config),
            scrapes=ScrapeLag(scrape_interval(config)),
        )

    def _free(self, node: Node) -> int:
        return self.devices_per_node - sum(self.devices[r.profile] for r in self.replicas if r.node is node)

    def _bind(self, now: int) -> None:
        for r in self.replicas:
            if r.node is not None:
                continue
            node = next((n for n in self.nodes if n.ready_at <= now and self._free(n) >= self.devices[r.profile]), None)
            if node is not None:
                r.node, r.ready_at = node, now + self.time_to_ready

    def _scan(self, now: int) -> None:
        pending = [r for r in self.replicas if r.node is None]
        if pending:
            booting = [n for n in self.nodes if n.ready_at > now]
            room = sum(self.devices_per_node for _ in booting)
            needed = sum(self.devices[r.profile] for r in pending) - room
            add = min(max(0, math.ceil(needed / self.devices_per_node)), self.max_nodes - len(self.nodes))
            for _ in range(add):
                self.nodes.append(Node(asked=now, ready_at=now + self.node_ready_seconds))
            if add:
                self.last_scale_up = now
        for n in self.nodes:
            empty = n.ready_at <= now and all(r.node is not n for r in self.replicas)
            n.unneeded_since = (n.unneeded_since if n.unneeded_since is not None else now) if empty else None
        if now - self.last_scale_up < self.delay_after_add_seconds:
            return
        for n in sorted(self.nodes, key=lambda n: n.asked, reverse=True):
            unneeded = n.unneeded_since is not None and now - n.unneeded_since >= self.unneeded_seconds
            if unneeded and len(self.nodes) > self.min_nodes:
                self.nodes.remove(n)

    def _resize(self, profile: str, new: int, now: int) -> None:
        mine = [r for r in self.replicas if r.profile == profile]
        if new > len(mine):
            self.replicas += [Replica(profile, now) for _ in range(new - len(mine))]
        elif new < len(mine):
            # Pending first, then the newest: ReplicaSet's deletion order.
            order = sorted(mine, key=lambda r: (r.node is not None, -r.created))
            for r in order[: len(mine) - new]:
                self.replicas.remove(r)

    def run(
        self,
        clients: Callable[[int], int],
        *,
        seconds: int,
        tokens_per_second: float,
        request_seconds: float,
    ) -> list[Sample]:
        hpas = {name: Hpa.from_scaled_object(spec) for name, spec in self.specs.items()}
        for name, hpa in hpas.items():
            self._resize(name, hpa.min_replicas, 0)
        self.nodes = [Node(asked=-self.node_ready_seconds, ready_at=0) for _ in range(self.min_nodes)]
        self._bind(0)
        for r in self.replicas:
            if r.node is not None:
                r.ready_at = 0  # the floor's replicas that fit its nodes are serving when the trace starts
        seen: dict[int, dict[str, dict[str, int]]] = {}  # tick -> profile -> the load as a scrape then saw it
        for now in range(0, seconds + 1, TICK_SECONDS):
            self._bind(now)
            ready = {n: sum(1 for r in self.replicas if r.profile == n and r.ready(now)) for n in hpas}
            running = {n: min(clients(now), ready[n] * self.batch[n]) for n in hpas}
            waiting = {n: clients(now) - running[n] for n in hpas}
            seen[now] = {n: {"waiting": waiting[n], "running": running[n]} for n in hpas}
            if now % SYNC_SECONDS == 0:
                scraped = max(0, self.scrapes.last(now))  # before the trace: its start
                observed = seen[scraped - scraped % TICK_SECONDS]  # the load holds from one tick to the next
                for n, hpa in hpas.items():
                    current = sum(1 for r in self.replicas if r.profile == n)
                    metrics = {trigger: observed[n][kind] for trigger, kind in METRICS.items()}
                    self._resize(n, hpa.sync(now, current, metrics), now)
            if now % node_scaling.SCAN_INTERVAL_SECONDS == 0:
                self._scan(now)
            self.node_seconds += len(self.nodes) * TICK_SECONDS
            self.tokens += sum(running.values()) * tokens_per_second * TICK_SECONDS
            queue = (
                max((waiting[n] * request_seconds / running[n] if running[n] else math.inf) for n in hpas)
                if any(waiting.values())
                else 0.0
            )
            self.history.append(
                Sample(
                    now,
                    len(self.nodes),
                    {n: sum(1 for r in self.replicas if r.profile == n) for n in hpas},
                    ready,
                    waiting,
                    queue,
                )
            )
        return self.history
