"""Alarms on the serving side, from the Container Insights metrics the CloudWatch observability add-on publishes.

Metric names and dimensions: "Amazon EKS and Kubernetes Container Insights metrics" (CloudWatch User Guide):
cluster_failed_node_count (ClusterName) and service_number_of_running_pods (Service, Namespace, ClusterName).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from config.labels import INSTANCE
from config.schema import DeploymentConfig
from stacks import container_insights as ci


def _insights(name: str, dimensions: dict[str, str], statistic: str, *, minutes: int) -> cw.Metric:
    """A Container Insights metric, as the add-on publishes it (namespace and dimension names: stacks/container_insights)."""
    return cw.Metric(
        namespace=ci.NAMESPACE,
        metric_name=name,
        dimensions_map=dimensions,
        statistic=statistic,
        period=Duration.minutes(minutes),
    )


class ServingAlarms(Construct):
    """A node with a failing condition (5 minutes), and, per serving profile, no running pod behind its Service
    (15 minutes; no data counts as none running, since a Service without pods reports nothing)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig) -> None:
        super().__init__(scope, construct_id)
        prefix, cluster_name, namespace = config.name, config.cluster_name, config.namespace
        services, topic_arn = [p.name for p in config.profiles], config.observability.alarm_topic_arn
        self.alarms: list[cw.Alarm] = [
            cw.Alarm(
                self,
                "FailedNodes",
                alarm_name=f"{prefix}-failed-nodes",
                alarm_description=(
                    f"A node of {cluster_name} has had a failing condition for 5 minutes (kubectl get nodes; "
                    "kubectl describe node NAME). On the Trainium2 node this stops both services."
                ),
                metric=_insights(ci.FAILED_NODES, {ci.CLUSTER_NAME: cluster_name}, "Maximum", minutes=1),
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                threshold=0,
                evaluation_periods=5,
                treat_missing_data=cw.TreatMissingData.MISSING,
            )
        ]
        for service in services:
            self.alarms.append(
                cw.Alarm(
                    self,
                    f"NoRunningPod-{service}",
                    alarm_name=f"{prefix}-{service}-not-serving",
                    alarm_description=(
                        f"No running pod behind Service {namespace}/{service} for 15 minutes. Expected while "
                        f"`make build PROFILE={service}` runs or before its artifact exists; otherwise see "
                        f"kubectl -n {namespace} describe pods -l {INSTANCE}={service}."
                    ),
                    metric=_insights(
                        ci.RUNNING_PODS,
                        {ci.SERVICE: service, ci.K8S_NAMESPACE: namespace, ci.CLUSTER_NAME: cluster_name},
                        "Minimum",
                        minutes=5,
                    ),
                    comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
                    threshold=1,
                    evaluation_periods=3,
                    treat_missing_data=cw.TreatMissingData.BREACHING,
                )
            )
        if topic_arn:
            action = cw_actions.SnsAction(sns.Topic.from_topic_arn(self, "Topic", topic_arn))
            for alarm in self.alarms:
                alarm.add_alarm_action(action)
                alarm.add_ok_action(action)
