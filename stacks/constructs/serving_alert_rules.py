"""Alerts on the live store: Prometheus alerting rules in the managed workspace (AWS::APS::RuleGroupsNamespace),
evaluated by AMP on the same series KEDA scales on. With observability.alarm_topic_arn they reach that SNS topic
through the workspace's alert manager (stacks/constructs/managed_prometheus.py).

- Demand above the trn2 ceiling: pods the scheduler cannot place for longer than the Cluster Autoscaler takes to
  bring a node (2 x trn2_nodes.node_ready_seconds), so no node is coming: the group is at max_size or the scale-up
  failed (the kube-scheduler's `scheduler_pending_pods{queue="unschedulable"}`, cluster-wide).
- Per profile, a scale-up that brought no Ready replica: a pod whose /metrics has not answered for 2 x
  scaling.time_to_ready_seconds (vLLM serves /metrics once its engine is up; `up` is the scraper's own series).
- Per profile, its queue above the scale-up threshold while it runs its maximum replicas, for 10 minutes.
- Per spilling arm, more than SPILL_SHARE of its requests spilled to the baseline for 15 minutes: speculation is not
  serving its sessions (the arm's threshold is below its load).
- Per speculative profile with `decoding.tuned_acceptance_rate`, the live acceptance below it for 15 minutes: only
  where the profile's stack reports acceptance (LiveMetrics.acceptance; the config refuses the field elsewhere).
The last two read the queries the live dashboard shows (charts/live_dashboard.py). Every rule reads only series the
profile's own stack serves (`ServingProfile.live_metrics`) or the scraper writes (`up`).
"""

from __future__ import annotations

from typing import Any

import yaml
from aws_cdk import CfnTag
from aws_cdk import aws_aps as aps
from constructs import Construct

from charts.autoscaling import series_selector, serving_replicas_query, waiting_query
from charts.live_dashboard import acceptance_query, spill_share_query, spilling_arms
from config import node_scaling
from config.labels import PROFILE as PROFILE_POD_LABEL
from config.profiles import DraftSpeculation
from config.scaling import max_replicas, waiting_threshold
from config.schema import DeploymentConfig

SATURATED_FOR = "10m"
DRIFT_FOR = "15m"
# A quarter of an arm's requests going to the baseline for 15 minutes: its sessions are mostly not speculated.
SPILL_SHARE = 0.25


def pending_for(config: DeploymentConfig) -> str:
    """Longer than a scale-up takes to bring a node: a Pending pod after that has no node coming."""
    return node_scaling.duration(node_scaling.node_overdue_seconds(config))


def not_ready_for(config: DeploymentConfig) -> str:
    return node_scaling.duration(2 * config.scaling.time_to_ready_seconds)


def alert_rules(config: DeploymentConfig) -> dict[str, Any]:
    """The rules file (Prometheus rule-file syntax) for the workspace."""
    ns = config.namespace
    rules: list[dict[str, Any]] = [
        {
            "alert": "ReplicasPendingAboveTrn2Capacity",
            "expr": 'max(scheduler_pending_pods{queue="unschedulable"}) > 0',
            "for": pending_for(config),
            "labels": {"severity": "warning", "deployment": config.name},
            "annotations": {
                "summary": f"Pods of {config.cluster_name} have been unschedulable for {pending_for(config)}, longer "
                "than the Cluster Autoscaler takes to add a node",
                "description": f"Demand above the trn2 ceiling (trn2_nodes.max_size={config.trn2_nodes.max_size}) "
                f"or a failed scale-up: kubectl -n {ns} get pods --field-selector=status.phase=Pending; kubectl -n "
                "kube-system logs deploy/cluster-autoscaler; raise trn2_nodes.max_size or lower scaling.max_replicas.",
            },
        }
    ]
    for p in config.profiles:
        if p.replicas == 0 or not config.scaling.enabled:
            continue
        threshold, cap = waiting_threshold(config.scaling, p), max_replicas(config, p)
        replicas = serving_replicas_query(ns, p.name)
        rules.append(
            {
                "alert": f"ScaleUpWithoutReadyReplica-{p.name}",
                "expr": f"count(up{series_selector(ns, p.name)} == 0) > 0",
                "for": not_ready_for(config),
                "labels": {"severity": "warning", "deployment": config.name, "profile": p.name},
                "annotations": {
                    "summary": f"{p.name}: a replica has not served /metrics for {not_ready_for(config)}, twice "
                    "its time-to-Ready",
                    "description": f"kubectl -n {ns} get pods -l {PROFILE_POD_LABEL}={p.name}; make "
                    "coldstart-report shows where its start-up stopped; raise scaling.time_to_ready_seconds if "
                    "the cold-start report measures more.",
                },
            }
        )
        rules.append(
            {
                "alert": f"QueueAboveThresholdAtMaxReplicas-{p.name}",
                "expr": f"({waiting_query(ns, p)} / {replicas}) > {threshold} and {replicas} >= {cap}",
                "for": SATURATED_FOR,
                "labels": {"severity": "warning", "deployment": config.name, "profile": p.name},
                "annotations": {
                    "summary": f"{p.name}: more than {threshold} requests waiting per replica at its maximum of "
                    f"{cap} replicas for {SATURATED_FOR}",
                    "description": "The profile cannot grow within its share of the trn2 devices; add nodes, "
                    "shift the share (scaling.max_replicas) or shed load.",
                },
            }
        )
    rules += drift_rules(config)
    return {"groups": [{"name": f"{config.name}-serving", "rules": rules}]}


def drift_rules(config: DeploymentConfig) -> list[dict[str, Any]]:
    """Spill above SPILL_SHARE per spilling arm; acceptance below the tuned rate per profile that states one."""
    ns, baseline = config.namespace, config.baseline_profile.name
    out: list[dict[str, Any]] = [
        {
            "alert": f"SpillAboveShare-{name}",
            "expr": f"{spill_share_query(ns, name)} > {SPILL_SHARE}",
            "for": DRIFT_FOR,
            "labels": {"severity": "warning", "deployment": config.name, "profile": name},
            "annotations": {
                "summary": f"{name}: more than {SPILL_SHARE:.0%} of its requests spilled to {baseline} for {DRIFT_FOR}",
                "description": "Speculation is not serving this arm's sessions: its load is above the spill threshold "
                "(endpoint.spill_threshold or the sweep's crossover). Add replicas, lower its weight, or re-run "
                "`make bench-sweep` if the traffic changed (docs/dashboard.md).",
            },
        }
        for name in spilling_arms(config)
    ]
    for p in config.profiles:
        d, counters = p.decoding, p.live_metrics.acceptance
        if not isinstance(d, DraftSpeculation) or d.tuned_acceptance_rate is None or p.replicas == 0:
            continue
        if counters is None:  # the stack reports no acceptance (config/rules.py refuses the tuned rate there)
            continue
        out.append(
            {
                "alert": f"AcceptanceBelowTuned-{p.name}",
                "expr": f"{acceptance_query(ns, p.name, counters)} < {d.tuned_acceptance_rate}",
                "for": DRIFT_FOR,
                "labels": {"severity": "warning", "deployment": config.name, "profile": p.name},
                "annotations": {
                    "summary": f"{p.name}: draft acceptance below the tuned {d.tuned_acceptance_rate:.0%} for "
                    f"{DRIFT_FOR}",
                    "description": "The draft or the traffic drifted from what k was tuned on: re-run `bench tune` on "
                    "a fresh benchmark and pick k again (docs/sweep.md).",
                },
            }
        )
    return out


class ServingAlertRules(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig, workspace_arn: str) -> None:
        super().__init__(scope, construct_id)
        self.rules = alert_rules(config)
        self.namespace = aps.CfnRuleGroupsNamespace(
            self,
            "Rules",
            name=f"{config.name}-serving",
            workspace=workspace_arn,
            data=yaml.safe_dump(self.rules, sort_keys=False),
            tags=[CfnTag(key=k, value=v) for k, v in sorted(config.tags.items())],
        )
