"""One way to install a Helm chart from the version map, so every chart the project deploys waits the same way."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from config.versions import ChartPin


def pinned_chart(
    scope: Construct,
    *,
    cluster: eks.ICluster,
    pin: ChartPin,
    release: str,
    namespace: str,
    create_namespace: bool,
    values: dict[str, Any],
    after: Construct | None = None,
) -> eks.HelmChart:
    """The chart as construct "Chart" under scope, installed after `after` (a Pod Identity association, whose
    credentials are injected only into pods created once it exists); CloudFormation waits up to 10 minutes for it."""
    chart = eks.HelmChart(
        scope,
        "Chart",
        cluster=cluster,
        chart=pin.chart,
        repository=pin.repository,
        version=pin.version,
        release=release,
        namespace=namespace,
        create_namespace=create_namespace,
        values=values,
        wait=True,
        timeout=Duration.minutes(10),
    )
    if after is not None:
        chart.node.add_dependency(after)
    return chart
