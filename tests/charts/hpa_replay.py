"""A replay of the Kubernetes HorizontalPodAutoscaler (autoscaling/v2) as documented and implemented, fed with the
numbers of a rendered KEDA ScaledObject (KEDA hands its behavior and triggers to the HPA it creates).

Followed: Kubernetes docs "Horizontal Pod Autoscaling" (algorithm, tolerance 0.1, stabilization windows, scaling
policies, defaults) and pkg/controller/podautoscaler/horizontal.go (stabilizeRecommendationWithBehaviors,
convertDesiredReplicasWithBehaviorRate, calculateScaleUpLimitWithScalingRules, calculateScaleDownLimitWithBehaviors,
getReplicasChangePerPeriod) and replica_calculator.go (GetExternalPerPodMetricReplicas for AverageValue targets).
Several metrics: the largest proposal wins.

The workload: `clients` closed-loop requests; a Ready replica runs up to `batch` of them and the rest wait; a new
replica is Ready `time_to_ready` seconds after the HPA adds it. The HPA syncs every 15 s (kube-controller-manager's
--horizontal-pod-autoscaler-sync-period default) and asks KEDA, which queries the workspace each time; the workspace
holds what the managed scraper saw at its last scrape (ScrapeLag, which the capacity replay shares).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SYNC_SECONDS = 15
TOLERANCE = 0.1
# Defaults the API server fills in when a behavior field is left out (autoscaling/v2 HPAScalingRules).
DEFAULT_SCALE_UP = {
    "stabilizationWindowSeconds": 0,
    "selectPolicy": "Max",
    "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15},
    ],
}
DEFAULT_SCALE_DOWN = {
    "stabilizationWindowSeconds": 300,
    "selectPolicy": "Max",
    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
}


@dataclass(frozen=True)
class ScrapeLag:
    """When the workload a sync reads was seen: the managed scraper scrapes every `interval` seconds (the rendered
    scraper configuration's; 30 s at least: AMP user guide, "Using an AWS managed collector") and the workspace holds
    its last scrape. `phase`: where in each interval the scrape falls; by default interval - 1, just before a change
    (the worst case), so a change is seen one interval late."""

    interval: int
    phase: int | None = None

    def last(self, now: int) -> int:
        """The time of the last scrape at or before `now`: what a sync at `now` reads."""
        phase = self.interval - 1 if self.phase is None else self.phase
        return now - (now - phase) % self.interval


def scrape_interval(config: Any) -> int:
    """The global scrape interval of the scraper configuration this config renders, in whole seconds."""
    import yaml

    from stacks.constructs.managed_prometheus import scrape_configuration, serving_scrape_jobs

    text = yaml.safe_load(scrape_configuration(serving_scrape_jobs(config)))["global"]["scrape_interval"]
    assert text.endswith("s") and text[:-1].isdigit(), text
    return int(text[:-1])


@dataclass
class Hpa:
    min_replicas: int
    max_replicas: int
    scale_up: dict[str, Any]
    scale_down: dict[str, Any]
    targets: dict[str, float]  # trigger name -> AverageValue target
    recommendations: list[tuple[int, int]] = field(default_factory=list)  # (time, unstabilized desired)
    up_events: list[tuple[int, int]] = field(default_factory=list)  # (time, replicas added)
    down_events: list[tuple[int, int]] = field(default_factory=list)

    @classmethod
    def from_scaled_object(cls, spec: dict[str, Any]) -> Hpa:
        behavior = spec.get("advanced", {}).get("horizontalPodAutoscalerConfig", {}).get("behavior", {})
        return cls(
            min_replicas=spec["minReplicaCount"],
            max_replicas=spec["maxReplicaCount"],
            scale_up={**DEFAULT_SCALE_UP, **behavior.get("scaleUp", {})},
            scale_down={**DEFAULT_SCALE_DOWN, **behavior.get("scaleDown", {})},
            targets={t["name"]: float(t["metadata"]["threshold"]) for t in spec["triggers"]},
        )

    def proposal(self, current: int, metrics: dict[str, float]) -> int:
        """GetExternalPerPodMetricReplicas per metric; the largest wins."""
        proposals = []
        for name, target in self.targets.items():
            usage = metrics[name]
            ratio = usage / (target * current)
            proposals.append(current if abs(1.0 - ratio) <= TOLERANCE else math.ceil(usage / target))
        return max(proposals)

    @staticmethod
    def _changed_within(events: list[tuple[int, int]], now: int, period: int) -> int:
        return sum(change for when, change in events if when > now - period)

    def _stabilize(self, now: int, current: int, desired: int) -> int:
        up, down = desired, desired
        up_cutoff = now - self.scale_up["stabilizationWindowSeconds"]
        down_cutoff = now - self.scale_down["stabilizationWindowSeconds"]
        for when, rec in self.recommendations:
            if when > up_cutoff:
                up = min(up, rec)
            if when > down_cutoff:
                down = max(down, rec)
        self.recommendations.append((now, desired))
        return min(max(current, up), down)

    def _limit(self, now: int, current: int, desired: int) -> int:
        if desired > current:
            pick, result = (min, math.inf) if self.scale_up["selectPolicy"] == "Min" else (max, -math.inf)
            for policy in self.scale_up["policies"]:
                start = (
                    current
                    - self._changed_within(self.up_events, now, policy["periodSeconds"])
                    + self._changed_within(self.down_events, now, policy["periodSeconds"])
                )
                grown = (
                    start + policy["value"]
                    if policy["type"] == "Pods"
                    else math.ceil(start * (1 + policy["value"] / 100))
                )
                result = pick(result, grown)
            return min(desired, max(int(result), current), self.max_replicas)
        if desired < current:
            pick, result = (max, -math.inf) if self.scale_down["selectPolicy"] == "Min" else (min, math.inf)
            for policy in self.scale_down["policies"]:
                start = (
                    current
                    + self._changed_within(self.down_events, now, policy["periodSeconds"])
                    - self._changed_within(self.up_events, now, policy["periodSeconds"])
                )
                shrunk = (
                    start - policy["value"]
                    if policy["type"] == "Pods"
                    else math.floor(start * (1 - policy["value"] / 100))
                )
                result = pick(result, shrunk)
            return max(desired, min(int(result), current), self.min_replicas)
        return desired

    def sync(self, now: int, current: int, metrics: dict[str, float]) -> int:
        desired = self._limit(now, current, self._stabilize(now, current, self.proposal(current, metrics)))
        if desired > current:
            self.up_events.append((now, desired - current))
        elif desired < current:
            self.down_events.append((now, current - desired))
        return desired


def replay(
    spec: dict[str, Any],
    *,
    clients: Callable[[int], int],
    batch: int,
    time_to_ready: int,
    seconds: int,
    metric_of: dict[str, str],
    scrape_interval: int,
    scrape_phase: int | None = None,
) -> list[tuple[int, int, int]]:
    """(time, replicas, ready replicas) at every sync. `metric_of`: trigger name -> "waiting" or "running".
    `scrape_interval`: the rendered scraper configuration's; `scrape_phase`: when in each interval the scrape falls."""
    hpa = Hpa.from_scaled_object(spec)
    replicas = hpa.min_replicas
    ready_at = [-time_to_ready] * replicas  # the starting replicas are Ready
    lag = ScrapeLag(scrape_interval, scrape_phase)
    history = []
    for now in range(0, seconds + 1, SYNC_SECONDS):
        ready = sum(1 for t in ready_at if t <= now)
        scraped = lag.last(now)
        ready_then = sum(1 for t in ready_at if t <= scraped)
        running = min(clients(scraped), ready_then * batch)
        observed = {"waiting": clients(scraped) - running, "running": running}
        new = hpa.sync(now, replicas, {name: observed[kind] for name, kind in metric_of.items()})
        if new > replicas:
            ready_at += [now + time_to_ready] * (new - replicas)
        elif new < replicas:
            ready_at = sorted(ready_at)[:new]  # the HPA removes replicas; the oldest keep serving
        replicas = new
        history.append((now, replicas, ready))
    return history
