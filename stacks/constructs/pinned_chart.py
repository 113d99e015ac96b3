"""One way to install a Helm chart from the version map, so every chart the project deploys waits the same way, and
one shape for a chart whose pods call AWS as their own Pod Identity role (KEDA, Cluster Autoscaler, Grafana)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from config.versions import ChartPin
from stacks.constructs.pod_identity_role import PodIdentityRole


@dataclass(frozen=True)
class ChartRelease:
    """A pinned chart as one release: its name, its namespace (Helm creates it, or it is already there) and, for a
    chart whose pods call AWS, the service account they run as."""

    pin: ChartPin
    name: str
    namespace: str
    create_namespace: bool
    service_account: str = ""


def pinned_chart(
    scope: Construct,
    *,
    cluster: eks.ICluster,
    release: ChartRelease,
    values: dict[str, Any],
    after: Sequence[Construct] = (),
) -> eks.HelmChart:
    """The chart as construct "Chart" under scope, installed after everything in `after`; CloudFormation waits up to
    10 minutes for it."""
    chart = eks.HelmChart(
        scope,
        "Chart",
        cluster=cluster,
        chart=release.pin.chart,
        repository=release.pin.repository,
        version=release.pin.version,
        release=release.name,
        namespace=release.namespace,
        create_namespace=release.create_namespace,
        values=values,
        wait=True,
        timeout=Duration.minutes(10),
    )
    chart.node.add_dependency(*after)
    return chart


@dataclass(frozen=True)
class SignedChartPrerequisites:
    """What a signed chart installs after, besides its own Pod Identity association: the system nodes its pods are
    scheduled on, and the Pod Identity agent add-on that hands them their role's credentials."""

    system_nodes: eks.Nodegroup
    pod_identity_agent: eks.Addon


class SignedChart(Construct):
    """A pinned chart whose pods sign their AWS calls as the release's service account: construct "Identity" (a
    Pod Identity role allowed `statements` only, described by `role`) and construct "Chart", installed after the
    association because Pod Identity injects credentials only into pods created once it exists, and after `after`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        release: ChartRelease,
        role: str,
        statements: Sequence[iam.PolicyStatement],
        values: dict[str, Any],
        after: SignedChartPrerequisites,
    ) -> None:
        super().__init__(scope, construct_id)
        self.identity = PodIdentityRole(
            self,
            "Identity",
            cluster=cluster,
            namespace=release.namespace,
            service_account=release.service_account,
            description=role,
        )
        for statement in statements:
            self.identity.role.add_to_policy(statement)
        self.values = values
        self.chart = pinned_chart(
            self,
            cluster=cluster,
            release=release,
            values=values,
            after=[self.identity.association, after.system_nodes, after.pod_identity_agent],
        )
