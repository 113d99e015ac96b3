"""Observability: the benchmark dashboard (metrics from the benchmark Job and `bench run --cloudwatch`), the
serving alarms (Container Insights metrics from the CloudWatch observability add-on) and the alert rules on the
live vLLM series in the managed Prometheus workspace (the Cluster stack owns the workspace and its scraper)."""

from __future__ import annotations

from aws_cdk import Stack
from constructs import Construct

from config.cost import hourly_cost_usd
from config.prompt_suite import DEFAULT_CASES
from config.schema import DeploymentConfig
from stacks.constructs.benchmark_dashboard import BenchmarkDashboard
from stacks.constructs.serving_alarms import ServingAlarms
from stacks.constructs.serving_alert_rules import ServingAlertRules


class ObservabilityStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: DeploymentConfig, metrics_workspace_arn: str, **kwargs
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        price = config.trn2_nodes.hourly_price_usd
        per_node = config.trn2_nodes.instance.devices
        hourly = (
            {p.name: hourly_cost_usd(price, config.profile_devices(p), per_node) for p in config.profiles}
            if price is not None
            else None
        )
        self.dashboard = BenchmarkDashboard(
            self,
            "Benchmark",
            dashboard_name=f"{config.name}-benchmark",
            namespace=config.observability.metrics_namespace,
            cluster_name=config.cluster_name,
            k8s_namespace=config.namespace,
            baseline=config.baseline_profile.name,
            variants=[p.name for p in config.profiles],
            test_cases=[(c.name, c.kind) for c in DEFAULT_CASES],
            hourly_cost_usd=hourly,
        )
        self.alarms = ServingAlarms(self, "Alarms", config=config)
        self.alert_rules = ServingAlertRules(self, "AlertRules", config=config, workspace_arn=metrics_workspace_arn)
