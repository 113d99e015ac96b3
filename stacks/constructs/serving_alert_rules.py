"""Alerts on the live store: Prometheus alerting rules in the managed workspace (AWS::APS::RuleGroupsNamespace),
evaluated by AMP on the same series KEDA scales on. With observability.alarm_topic_arn they reach that SNS topic
through the workspace's alert manager (stacks/constructs/managed_prometheus.py).

- Demand above the static trn2 capacity: pods the scheduler cannot place for 10 minutes (the kube-scheduler's
  `scheduler_pending_pods{queue="unschedulable"}`, cluster-wide: any unschedulable pod counts).
- Per profile, its queue above the scale-up threshold while it runs its maximum replicas, for 10 minutes.
"""

from __future__ import annotations

from typing import Any

import yaml
from aws_cdk import CfnTag
from aws_cdk import aws_aps as aps
from constructs import Construct

from charts.autoscaling import serving_replicas_query, waiting_query
from config.scaling import max_replicas, waiting_threshold
from config.schema import DeploymentConfig

PENDING_FOR = "10m"
SATURATED_FOR = "10m"


def alert_rules(config: DeploymentConfig) -> dict[str, Any]:
    """The rules file (Prometheus rule-file syntax) for the workspace."""
    ns = config.namespace
    rules: list[dict[str, Any]] = [
        {
            "alert": "ReplicasPendingAboveTrn2Capacity",
            "expr": 'max(scheduler_pending_pods{queue="unschedulable"}) > 0',
            "for": PENDING_FOR,
            "labels": {"severity": "warning", "deployment": config.name},
            "annotations": {
                "summary": f"Pods of {config.cluster_name} have been unschedulable for {PENDING_FOR}",
                "description": "Demand above the static trn2 capacity (or a system pod without room): "
                f"kubectl -n {ns} get pods --field-selector=status.phase=Pending; raise trn2_nodes sizes or lower "
                "scaling.max_replicas.",
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
                "alert": f"QueueAboveThresholdAtMaxReplicas-{p.name}",
                "expr": f"({waiting_query(ns, p.name)} / {replicas}) > {threshold} and {replicas} >= {cap}",
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
    return {"groups": [{"name": f"{config.name}-serving", "rules": rules}]}


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
