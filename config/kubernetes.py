"""The Kubernetes versions this project deploys, with the kubectl Lambda layer each one needs.

DRA needs resource.k8s.io/v1, so 1.34 is the floor; each version needs its kubectl layer package
(PyPI aws-cdk.lambda-layer-kubectl-vNN) pinned in requirements.lock. EKS 1.34 leaves standard support on
2026-12-02. The config schema accepts exactly these versions and the cluster stack picks the layer here.

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

# version -> (module, class) of its kubectl layer
KUBECTL_LAYERS: dict[str, tuple[str, str]] = {
    "1.34": ("aws_cdk.lambda_layer_kubectl_v34", "KubectlV34Layer"),
    "1.35": ("aws_cdk.lambda_layer_kubectl_v35", "KubectlV35Layer"),
}
SUPPORTED_KUBERNETES_VERSIONS = tuple(KUBECTL_LAYERS)
DEFAULT_KUBERNETES_VERSION = "1.35"
DRA_MINIMUM_VERSION = (1, 34)  # resource.k8s.io/v1
