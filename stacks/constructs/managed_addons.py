"""The EKS-managed add-ons, each at the version the map pins for the cluster's Kubernetes version (config/versions.py;
`make preflight` asks EKS whether it is offered), installed once the system nodes are there."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from config.schema import DeploymentConfig
from config.versions import (
    ADDONS,
    CLOUDWATCH_OBSERVABILITY,
    COREDNS,
    KUBE_PROXY,
    MOUNTPOINT_S3_CSI,
    POD_IDENTITY_AGENT,
    VPC_CNI,
)
from stacks.constructs.part import Part
from stacks.constructs.pod_identity_role import PodIdentityRole
from stacks.nag import acknowledge, managed_policy

CLOUDWATCH_SERVICE_ACCOUNT = ("amazon-cloudwatch", "cloudwatch-agent")
# Each add-on with its configuration values, in the order they are created.
ADDON_VALUES: dict[str, dict[str, Any] | None] = {
    # Enforce Kubernetes NetworkPolicies (the workloads namespace ships some); off by default on EKS.
    VPC_CNI: {"enableNetworkPolicy": "true"},
    KUBE_PROXY: None,
    COREDNS: None,
    POD_IDENTITY_AGENT: None,
    # Its node DaemonSet must also run on the tainted Trainium2 nodes that mount the bucket.
    MOUNTPOINT_S3_CSI: {"node": {"tolerateAllTaints": True}},
    CLOUDWATCH_OBSERVABILITY: None,
}


class ManagedAddons(Part):
    """The add-ons by name; the CloudWatch agent gets its own Pod Identity role.

    No driver-level role for the Mountpoint CSI driver: every volume we render uses `authenticationSource: pod`, so S3
    access comes from each workload's own Pod Identity role and a driver role would only widen what a future
    PersistentVolume could read.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        system_nodes: eks.Nodegroup,
        config: DeploymentConfig,
    ) -> None:
        super().__init__(scope, construct_id)
        pins = ADDONS[config.kubernetes_version]
        self.by_name: dict[str, eks.Addon] = {}
        for name, values in ADDON_VALUES.items():
            addon = eks.Addon(
                self,
                "Addon-" + name,
                cluster=cluster,
                addon_name=name,
                addon_version=pins[name].version,
                configuration_values=values,
                preserve_on_delete=False,
            )
            addon.node.add_dependency(system_nodes)
            self.by_name[name] = addon
        cloudwatch_agent = PodIdentityRole(
            self,
            "CloudWatchAgentIdentity",
            cluster=cluster,
            namespace=CLOUDWATCH_SERVICE_ACCOUNT[0],
            service_account=CLOUDWATCH_SERVICE_ACCOUNT[1],
            description="CloudWatch agent: Container Insights metrics and logs",
        )
        cloudwatch_agent.role.add_managed_policy(
            iam.ManagedPolicy.from_aws_managed_policy_name("CloudWatchAgentServerPolicy")
        )
        self.by_name[CLOUDWATCH_OBSERVABILITY].node.add_dependency(cloudwatch_agent.association)
        acknowledge(
            cloudwatch_agent.role,
            "IAM4",
            "CloudWatchAgentServerPolicy is the AWS-maintained least-privilege policy the CloudWatch "
            "observability add-on documents (PutMetricData, PutLogEvents, describe calls); not a FullAccess policy.",
            (managed_policy("CloudWatchAgentServerPolicy"),),
        )
        cloudwatch_agent.association.node.add_dependency(self.pod_identity_agent)

    @property
    def pod_identity_agent(self) -> eks.Addon:
        """Gives pods their Pod Identity role's credentials."""
        return self.by_name[POD_IDENTITY_AGENT]

    @property
    def mountpoint_s3_csi_driver(self) -> eks.Addon:
        """Mounts the models bucket as a volume."""
        return self.by_name[MOUNTPOINT_S3_CSI]
