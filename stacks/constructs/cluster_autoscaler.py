"""The Cluster Autoscaler, from its Helm chart at a pinned version per Kubernetes minor, with a Pod Identity role that
may change only this cluster's node groups (docs/elastic-capacity.md)."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from config import node_scaling
from config.catalogue import NODE_ROLE_LABEL
from config.schema import DeploymentConfig
from stacks.constructs.pod_identity_role import PodIdentityRole
from stacks.nag import acknowledge

# ---- Pinned versions (to move into the version map, config/versions.py) ----------------------------------------
# Chart `cluster-autoscaler` from https://kubernetes.github.io/autoscaler, tag cluster-autoscaler-chart-9.59.0
# (kubernetes/autoscaler@5a0b98e4, cluster-autoscaler/charts/cluster-autoscaler/Chart.yaml: appVersion 1.35.0). It is
# the first chart line whose ClusterRole lets CA read resource.k8s.io resourceslices/deviceclasses/resourceclaims
# (added in 9.54.0; 9.53.0, the last with appVersion 1.34.x, has none, and DRA needs them), so both Kubernetes minors
# use it and the image is set to the CA release of the cluster's minor, as CA's README asks (one CA minor per
# Kubernetes minor). Images: tags cluster-autoscaler-1.34.5 (@cb2123ed) and cluster-autoscaler-1.35.2 (@2d425888).
CLUSTER_AUTOSCALER_CHART_REPOSITORY = "https://kubernetes.github.io/autoscaler"
CLUSTER_AUTOSCALER_CHART_NAME = "cluster-autoscaler"
CLUSTER_AUTOSCALER_CHART_VERSION = "9.59.0"
CLUSTER_AUTOSCALER_IMAGE_REPOSITORY = "registry.k8s.io/autoscaling/cluster-autoscaler"


@dataclass(frozen=True)
class CaRelease:
    image_tag: str
    # --enable-dynamic-resource-allocation defaults to false in 1.34 (config/flags/flags.go:227 at 1.34.5) and is
    # locked to true from 1.35 (flags.go:231, a false value is fatal at :302, at 1.35.2): pass it where it is needed.
    dra_flag_needed: bool


CLUSTER_AUTOSCALER_RELEASES: dict[str, CaRelease] = {
    "1.34": CaRelease(image_tag="v1.34.5", dra_flag_needed=True),
    "1.35": CaRelease(image_tag="v1.35.2", dra_flag_needed=False),
}
# -----------------------------------------------------------------------------------------------------------------

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "cluster-autoscaler"
RELEASE = "cluster-autoscaler"
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
    release = CLUSTER_AUTOSCALER_RELEASES[config.kubernetes_version]
    args = {
        "expander": "least-waste",
        "balance-similar-node-groups": "false",
        "scan-interval": node_scaling.duration(node_scaling.SCAN_INTERVAL_SECONDS),
        "scale-down-unneeded-time": node_scaling.duration(node_scaling.scale_down_unneeded_seconds(config)),
        "scale-down-delay-after-add": node_scaling.duration(node_scaling.scale_down_delay_after_add_seconds(config)),
        "max-node-provision-time": node_scaling.duration(node_scaling.max_node_provision_seconds(config)),
    }
    if release.dra_flag_needed:
        args["enable-dynamic-resource-allocation"] = "true"
    return args


def scaling_policy(cluster_name: str) -> iam.PolicyStatement:
    """SetDesiredCapacity / TerminateInstanceInAutoScalingGroup only on Auto Scaling groups that EKS tagged as this
    cluster's (Auto Scaling supports aws:ResourceTag on these actions: Service Authorization Reference, Amazon EC2
    Auto Scaling)."""
    return iam.PolicyStatement(
        actions=list(SCALING_ACTIONS),
        resources=["*"],
        conditions={
            "StringEquals": {
                f"aws:ResourceTag/{ENABLED_TAG}": "true",
                f"aws:ResourceTag/{cluster_tag(cluster_name)}": "owned",
            }
        },
    )


class ClusterAutoscaler(Construct):
    """Cluster Autoscaler on the system nodes, discovering this cluster's managed node groups by their tags.

    It changes only the desired size of a group, between the group's min_size (the floor) and max_size (the
    ceiling); the Pod Identity association exists before the chart installs, because credentials are injected when
    the pod is created.
    """

    def __init__(self, scope: Construct, construct_id: str, *, cluster: eks.ICluster, config: DeploymentConfig) -> None:
        super().__init__(scope, construct_id)
        release = CLUSTER_AUTOSCALER_RELEASES[config.kubernetes_version]
        self.identity = PodIdentityRole(
            self,
            "Identity",
            cluster=cluster,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            description="Cluster Autoscaler: change the desired size of this cluster's node groups only",
        )
        self.identity.role.add_to_policy(iam.PolicyStatement(actions=list(DESCRIBE_ACTIONS), resources=["*"]))
        self.identity.role.add_to_policy(scaling_policy(config.cluster_name))
        acknowledge(
            self.identity.role,
            "IAM5",
            "Auto Scaling and EC2 Describe* calls and eks:DescribeNodegroup are what CA's auto-discovery needs "
            "(read-only); SetDesiredCapacity/TerminateInstanceInAutoScalingGroup apply to '*' only under a condition "
            "on this cluster's node-group tags (the ASG names are chosen by EKS, unknown at synth).",
            ("[Resource::*]",),
        )
        self.values = {
            "cloudProvider": "aws",
            "awsRegion": Stack.of(self).region,
            "autoDiscovery": {
                "clusterName": config.cluster_name,
                "tags": [ENABLED_TAG, cluster_tag(config.cluster_name)],
            },
            "fullnameOverride": RELEASE,
            "image": {"repository": CLUSTER_AUTOSCALER_IMAGE_REPOSITORY, "tag": release.image_tag},
            "rbac": {"serviceAccount": {"create": True, "name": SERVICE_ACCOUNT}},
            "nodeSelector": {NODE_ROLE_LABEL: "system"},
            "extraArgs": extra_args(config),
        }
        self.chart = eks.HelmChart(
            self,
            "Chart",
            cluster=cluster,
            chart=CLUSTER_AUTOSCALER_CHART_NAME,
            repository=CLUSTER_AUTOSCALER_CHART_REPOSITORY,
            version=CLUSTER_AUTOSCALER_CHART_VERSION,
            release=RELEASE,
            namespace=NAMESPACE,
            create_namespace=False,
            values=self.values,
            wait=True,
            timeout=Duration.minutes(10),
        )
        self.chart.node.add_dependency(self.identity.association)
