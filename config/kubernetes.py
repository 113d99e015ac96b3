"""The Kubernetes versions this project deploys, with the kubectl Lambda layer each one needs.

DRA needs resource.k8s.io/v1, so 1.34 is the floor; each version needs its kubectl layer package
(PyPI aws-cdk.lambda-layer-kubectl-vNN, pinned in pyproject.toml and requirements.lock; aws-cdk-lib 2.275.0 knows
KubernetesVersion.V1_36) and its pins in config/versions.py. EKS 1.34 leaves standard support on 2026-12-02.
1.35 stays the default until `make preflight` has confirmed the 1.36 add-on builds the map could not read at an AWS
page (config/versions.py says which). The config schema accepts exactly these versions and the cluster stack picks
the layer here.

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

# version -> (module, class) of its kubectl layer
KUBECTL_LAYERS: dict[str, tuple[str, str]] = {
    "1.34": ("aws_cdk.lambda_layer_kubectl_v34", "KubectlV34Layer"),
    "1.35": ("aws_cdk.lambda_layer_kubectl_v35", "KubectlV35Layer"),
    "1.36": ("aws_cdk.lambda_layer_kubectl_v36", "KubectlV36Layer"),
}
SUPPORTED_KUBERNETES_VERSIONS = tuple(KUBECTL_LAYERS)
DEFAULT_KUBERNETES_VERSION = "1.35"
DRA_MINIMUM_VERSION = (1, 34)  # resource.k8s.io/v1
