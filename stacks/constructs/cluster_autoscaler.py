"""The Cluster Autoscaler, from its Helm chart at a pinned version per Kubernetes minor, with a Pod Identity role that
may change only this cluster's node groups (docs/elastic-capacity.md)."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from config import node_scaling
from config.catalogue import NODE_ROLE_LABEL
from config.schema import DeploymentConfig
from config.versions import CHARTS, CLUSTER_AUTOSCALER, CLUSTER_AUTOSCALER_REPOSITORY, for_kubernetes
from stacks.constructs.pinned_chart import ChartRelease, SignedChart, SignedChartPrerequisites
from stacks.nag import acknowledge

# --enable-dynamic-resource-allocation defaults to false in 1.34 (config/flags/flags.go:227 at 1.34.5) and is locked to
# true from 1.35 (flags.go:231, a false value is fatal at :302, at 1.35.2; flags.go:236 and :310 at 1.36.1): pass it
# where it is needed. The chart and the image of each Kubernetes minor come from the version map (config/versions.py).
DRA_FLAG_NEEDED: dict[str, bool] = {"1.34": True, "1.35": False, "1.36": False}

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "cluster-autoscaler"
RELEASE = "cluster-autoscaler"
CHART_RELEASE = ChartRelease(
    CHARTS[CLUSTER_AUTOSCALER], RELEASE, NAMESPACE, create_namespace=False, service_account=SERVICE_ACCOUNT
)
# Tags EKS puts on every managed node group's Auto Scaling group for CA's auto-discovery (EKS user guide, "Simplify
# node lifecycle with managed node groups": nodes are "automatically tagged for auto-discovery by the Kubernetes
# Cluster Autoscaler"): k8s.io/cluster-autoscaler/enabled=true and k8s.io/cluster-autoscaler/<cluster>=owned.
ENABLED_TAG = "k8s.io/cluster-autoscaler/enabled"
# Read-only calls CA makes with auto-discovery (cloudprovider/aws/README.md, "Full Cluster Autoscaler Features
# Policy"); they take no resource-level permission, so Resource is "*".
DESCRIBE_ACTIONS = (
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
    "eks:DescribeNodegroup",
)
# The only calls that change capacity; allowed only on groups carrying both discovery tags of this cluster.
SCALING_ACTIONS = ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup")


def cluster_tag(cluster_name: str) -> str:
    return f"k8s.io/cluster-autoscaler/{cluster_name}"


def extra_args(config: DeploymentConfig) -> dict[str, str]:
    """CA flags beyond what the chart renders itself (--cloud-provider, --namespace, --node-group-auto-discovery).

    Expander least-waste and no balancing of similar groups: a pending vLLM pod fits only a Trainium2 group (taint,
    DRA claim), and balancing would spread replicas over groups that CA calls similar although their AMI (and so
    their Neuron driver) may differ; least-waste picks the group that leaves the fewest devices idle.
    """
    args = {
        "expander": "least-waste",
        "balance-similar-node-groups": "false",
        "scan-interval": node_scaling.duration(node_scaling.SCAN_INTERVAL_SECONDS),
        "scale-down-unneeded-time": node_scaling.duration(node_scaling.scale_down_unneeded_seconds(config)),
        "scale-down-delay-after-add": node_scaling.duration(node_scaling.scale_down_delay_after_add_seconds(config)),
        "max-node-provision-time": node_scaling.duration(node_scaling.max_node_provision_seconds(config)),
    }
    if DRA_FLAG_NEEDED[config.kubernetes_version]:
        args["enable-dynamic-resource-allocation"] = "true"
    return args


def scaling_policy(cluster_name: str, region: str) -> iam.PolicyStatement:
    """SetDesiredCapacity / TerminateInstanceInAutoScalingGroup only on Auto Scaling groups that EKS tagged as this
    cluster's (Auto Scaling supports aws:ResourceTag on these actions: Service Authorization Reference, Amazon EC2
    Auto Scaling), in this deployment's region only: a deployment of the same name in another region has the same
    tags (the global key aws:RequestedRegion)."""
    return iam.PolicyStatement(
        actions=list(SCALING_ACTIONS),
        resources=["*"],
        conditions={
            "StringEquals": {
                f"aws:ResourceTag/{ENABLED_TAG}": "true",
                f"aws:ResourceTag/{cluster_tag(cluster_name)}": "owned",
                "aws:RequestedRegion": region,
            }
        },
    )


class ClusterAutoscaler(SignedChart):
    """Cluster Autoscaler on the system nodes, discovering this cluster's managed node groups by their tags.

    It changes only the desired size of a group, between the group's min_size (the floor) and max_size (the
    ceiling).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        config: DeploymentConfig,
        after: SignedChartPrerequisites,
    ) -> None:
        image = for_kubernetes(config.kubernetes_version).cluster_autoscaler_image
        region = Stack.of(scope).region
        super().__init__(
            scope,
            construct_id,
            cluster=cluster,
            release=CHART_RELEASE,
            role="Cluster Autoscaler: change the desired size of this cluster's node groups only",
            statements=[
                iam.PolicyStatement(actions=list(DESCRIBE_ACTIONS), resources=["*"]),
                scaling_policy(config.cluster_name, region),
            ],
            values={
                "cloudProvider": "aws",
                "awsRegion": region,
                "autoDiscovery": {
                    "clusterName": config.cluster_name,
                    "tags": [ENABLED_TAG, cluster_tag(config.cluster_name)],
                },
                "fullnameOverride": RELEASE,
                "image": {"repository": CLUSTER_AUTOSCALER_REPOSITORY, "tag": image.version},
                "rbac": {"serviceAccount": {"create": True, "name": SERVICE_ACCOUNT}},
                "nodeSelector": {NODE_ROLE_LABEL: "system"},
                "extraArgs": extra_args(config),
            },
            after=after,
        )
        acknowledge(
            self.identity.role,
            "IAM5",
            "Auto Scaling and EC2 Describe* calls and eks:DescribeNodegroup are what CA's auto-discovery needs "
            "(read-only); SetDesiredCapacity/TerminateInstanceInAutoScalingGroup apply to '*' only under a condition "
            "on this cluster's node-group tags and this region (the ASG names are chosen by EKS, unknown at synth).",
            ("[Resource::*]",),
        )
