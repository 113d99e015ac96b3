"""The live dashboard's viewer: Grafana from its community Helm chart at a pinned version, on the system nodes, with
the managed Prometheus workspace (SigV4 through a Pod Identity role that may only read it) and the benchmark's
CloudWatch namespace as data sources, and the dashboard charts/live_dashboard.py builds, provisioned read-only.

Reached only with `kubectl port-forward` (ClusterIP, no login page: anonymous viewers only). A default-deny ingress
NetworkPolicy in its namespace, installed by the same release, closes it to every pod and VPC address; port-forward
connects from inside the pod's network namespace and the kubelet's probes come from the pod's own node, which
Kubernetes always admits. The data sources sign as a role that reads the one workspace and CloudWatch metrics in the
deployment's region only. Who can reach it and what
they can read, why this viewer and what it costs: docs/dashboard.md.
"""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from charts.live_dashboard import (
    CLOUDWATCH_TYPE,
    CLOUDWATCH_UID,
    PROMETHEUS_TYPE,
    PROMETHEUS_UID,
    live_dashboard,
)
from config.catalogue import GRAFANA_NAMESPACE, NODE_ROLE_LABEL
from config.schema import DeploymentConfig
from config.versions import CHARTS, GRAFANA, GRAFANA_AMP_PLUGIN_ID, PLUGINS
from stacks.constructs.pinned_chart import ChartRelease, SignedChart, SignedChartPrerequisites
from stacks.nag import acknowledge

# The chart comes from the version map (config/versions.py: grafana-community/helm-charts grafana 12.11.1, Grafana
# 13.2.0, at 864f7794); the values below are checked against that commit's values.yaml
# (tests/charts/fixtures/grafana_12_11_1.json).
GRAFANA_CHART = CHARTS[GRAFANA]
AMP_PLUGIN = (
    f"{GRAFANA_AMP_PLUGIN_ID}@{PLUGINS[GRAFANA_AMP_PLUGIN_ID].version}"  # id@version, as the chart's `plugins` takes it
)

GRAFANA_RELEASE = "grafana"
GRAFANA_SERVICE_ACCOUNT = "grafana"
GRAFANA_CHART_RELEASE = ChartRelease(
    GRAFANA_CHART, GRAFANA_RELEASE, GRAFANA_NAMESPACE, create_namespace=True, service_account=GRAFANA_SERVICE_ACCOUNT
)
DASHBOARD_FOLDER = "trn-specdec"
# What the AMP data source calls (AMP user guide, "Set up Grafana open source ... for use with Amazon Managed Service
# for Prometheus": aps:QueryMetrics, aps:GetMetricMetadata, aps:GetSeries, aps:GetLabels), on this workspace only.
QUERY_ACTIONS = ("aps:QueryMetrics", "aps:GetMetricMetadata", "aps:GetSeries", "aps:GetLabels")
# What Grafana's CloudWatch data source needs to read metrics (grafana.com docs, CloudWatch data source, "IAM
# policies"). The Service Authorization Reference (Amazon CloudWatch) lists for GetMetricData and ListMetrics only an
# optional `dataset` resource and the keys aws:ResourceTag and cloudwatch:HasAccessGrant, and for
# DescribeAlarmsForMetric no resource and no key: none of them takes cloudwatch:namespace (PutMetricData's key), so the
# namespaces cannot be limited in IAM. What can be: the region, by the global key aws:RequestedRegion.
CLOUDWATCH_ACTIONS = ("cloudwatch:GetMetricData", "cloudwatch:ListMetrics", "cloudwatch:DescribeAlarmsForMetric")
PORT_FORWARD = f"kubectl -n {GRAFANA_NAMESPACE} port-forward svc/{GRAFANA_RELEASE} 3000:80"
DENY_INGRESS = "default-deny-ingress"


def network_policies() -> list[dict[str, Any]]:
    """Every pod of the namespace selected, no ingress rule: no pod of any namespace and no address in the VPC may
    connect. `kubectl port-forward` still works (the runtime connects from inside the pod's network namespace), and
    so do the kubelet's probes (Kubernetes docs, "Network Policies": traffic to and from the node where a Pod is
    running is always allowed).
    Installed by the chart's `extraObjects`, so Helm creates it with the release and before the Deployment (Helm's
    install order puts NetworkPolicy before workloads)."""
    return [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": DENY_INGRESS, "namespace": GRAFANA_NAMESPACE},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
        }
    ]


def cloudwatch_statement(region: str) -> iam.PolicyStatement:
    """Read CloudWatch metrics in the deployment's region only (Resource "*": see CLOUDWATCH_ACTIONS)."""
    return iam.PolicyStatement(
        actions=list(CLOUDWATCH_ACTIONS),
        resources=["*"],
        conditions={"StringEquals": {"aws:RequestedRegion": region}},
    )


def datasources(query_url: str, region: str) -> dict[str, Any]:
    """Grafana's provisioning file for the two data sources, with the uids the dashboard's panels name."""
    return {
        "apiVersion": 1,
        "datasources": [
            {
                "name": "Managed Prometheus",
                "uid": PROMETHEUS_UID,
                "type": PROMETHEUS_TYPE,
                "access": "proxy",
                "url": query_url,
                "isDefault": True,
                "editable": False,
                # "AWS SDK Default": the SDK's chain finds the Pod Identity credentials.
                "jsonData": {
                    "httpMethod": "POST",
                    "sigV4Auth": True,
                    "sigV4AuthType": "default",
                    "sigV4Region": region,
                },
            },
            {
                "name": "CloudWatch",
                "uid": CLOUDWATCH_UID,
                "type": CLOUDWATCH_TYPE,
                "access": "proxy",
                "editable": False,
                "jsonData": {"authType": "default", "defaultRegion": region},
            },
        ],
    }


def grafana_values(config: DeploymentConfig, query_url: str, region: str) -> dict[str, Any]:
    """The chart's values: one replica on the system nodes, no disk (everything it shows is provisioned)."""
    dashboard = live_dashboard(config)
    return {
        "nodeSelector": {NODE_ROLE_LABEL: "system"},
        "serviceAccount": {"create": True, "name": GRAFANA_SERVICE_ACCOUNT},
        "persistence": {"enabled": False},
        "plugins": [AMP_PLUGIN],
        "grafana.ini": {
            "analytics": {"check_for_updates": False, "reporting_enabled": False},
            "auth.anonymous": {"enabled": True, "org_role": "Viewer"},
            # Only the SDK's default chain (Pod Identity): no keys can be typed into a data source, and no data source
            # may assume another role with them (Grafana's [aws] assume_role_enabled, true by default).
            "aws": {"allowed_auth_providers": "default", "assume_role_enabled": False},
        },
        "datasources": {"datasources.yaml": datasources(query_url, region)},
        "dashboardProviders": {
            "dashboardproviders.yaml": {
                "apiVersion": 1,
                "providers": [
                    {
                        "name": DASHBOARD_FOLDER,
                        "orgId": 1,
                        "folder": DASHBOARD_FOLDER,
                        "type": "file",
                        "disableDeletion": True,
                        "editable": False,
                        "options": {"path": f"/var/lib/grafana/dashboards/{DASHBOARD_FOLDER}"},
                    }
                ],
            }
        },
        "dashboards": {DASHBOARD_FOLDER: {"serving": {"json": json.dumps(dashboard, sort_keys=True)}}},
        "extraObjects": network_policies(),
    }


class Grafana(SignedChart):
    """Grafana's chart, signing its queries as its own Pod Identity role."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        query_url: str,
        workspace_arn: str,
        config: DeploymentConfig,
        after: SignedChartPrerequisites,
    ) -> None:
        region = Stack.of(scope).region
        super().__init__(
            scope,
            construct_id,
            cluster=cluster,
            release=GRAFANA_CHART_RELEASE,
            role="Grafana: read the serving metrics workspace and this region's CloudWatch metrics, nothing else",
            statements=[
                iam.PolicyStatement(actions=list(QUERY_ACTIONS), resources=[workspace_arn]),
                cloudwatch_statement(region),
            ],
            values=grafana_values(config, query_url, region),
            after=after,
        )
        acknowledge(
            self.identity.role,
            "IAM5",
            "CloudWatch's GetMetricData, ListMetrics and DescribeAlarmsForMetric take no resource ARN for metrics "
            "(Service Authorization Reference, Amazon CloudWatch); the statement is limited to this region by "
            "aws:RequestedRegion and reads metrics, writes none.",
            ("[Resource::*]",),
        )
