"""How every pod we render may run: container securityContexts (two kinds) and the namespace's NetworkPolicies.

Every container: no privilege escalation, every Linux capability dropped, the runtime's default seccomp
profile, never privileged. Beyond that, two kinds:

- `non_root()`: the verify-artifact init check (stdlib Python reading the read-only mount) and the benchmark
  Job (a stock Python image; its packages go to a scratch directory): a fixed non-root user and a read-only
  root file system, with writable emptyDirs only where they write.
- `image_user()`: vLLM, the model-build Job and the checkpoint-staging Job run the Neuron Deep Learning
  Container images as they ship, as root with a writable root file system: vLLM, torch, neuronx-cc and the
  Neuron runtime write caches and logs under the home directory and /tmp, NxDI traces into its work
  directory, and the Jobs may pip-install into the image. Root there is needed for the DLC's own file
  ownership, not for the devices: the Neuron DRA driver hands the claimed /dev/neuron* nodes to the
  container, and no Neuron sample asks for privileged mode or added capabilities.

The NetworkPolicies make the namespace closed by default: no pod accepts connections, except the vLLM pods
on their API ports from the endpoint's Envoy and the benchmark Job (by their labels, in this namespace), the vLLM
pods' metrics-only sidecar port from the VPC (the managed scraper, charts/autoscaling.py, charts/metrics_proxy.py)
and the endpoint's own ports (charts/endpoint.py). Traffic
from the node itself (kubelet probes, `kubectl port-forward`) is not subject to them (the VPC CNI's policy
agent always allows the node's IP).
"""

from __future__ import annotations

from cdk8s_plus_34 import k8s

from config.labels import VLLM_POD_LABELS

# Any uid the images do not use (65532 is distroless's "nonroot"); emptyDirs are writable by every user.
NON_ROOT_UID = 65532


def _base(**extra: object) -> k8s.SecurityContext:
    return k8s.SecurityContext(
        allow_privilege_escalation=False,
        privileged=False,
        capabilities=k8s.Capabilities(drop=["ALL"]),
        seccomp_profile=k8s.SeccompProfile(type="RuntimeDefault"),
        **extra,  # type: ignore[arg-type]
    )


def non_root() -> k8s.SecurityContext:
    """A fixed non-root user and a read-only root file system (writes go to emptyDirs)."""
    return _base(
        run_as_non_root=True,
        run_as_user=NON_ROOT_UID,
        run_as_group=NON_ROOT_UID,
        read_only_root_filesystem=True,
    )


def image_user() -> k8s.SecurityContext:
    """The Neuron images' own user (root) and a writable root, with no capability and no escalation."""
    return _base(read_only_root_filesystem=False)


def network_policies(ports: list[int], callers: list[dict[str, str]]) -> list[tuple[str, k8s.NetworkPolicySpec]]:
    """(name, spec): deny all ingress in the namespace; allow the vLLM pods' `ports` (their inference API) only from
    this namespace's pods that carry one of the `callers` label sets (the endpoint's Envoy and the benchmark Job)."""
    deny = k8s.NetworkPolicySpec(pod_selector=k8s.LabelSelector(), policy_types=["Ingress"])
    allow = k8s.NetworkPolicySpec(
        pod_selector=k8s.LabelSelector(match_labels=VLLM_POD_LABELS),
        policy_types=["Ingress"],
        ingress=[
            k8s.NetworkPolicyIngressRule(
                # A podSelector without a namespaceSelector: pods of this namespace only, and only these.
                from_=[k8s.NetworkPolicyPeer(pod_selector=k8s.LabelSelector(match_labels=c)) for c in callers],
                ports=[
                    k8s.NetworkPolicyPort(port=k8s.IntOrString.from_number(p), protocol="TCP")
                    for p in sorted(set(ports))
                ],
            )
        ],
    )
    return [("default-deny-ingress", deny), ("vllm-from-callers", allow)]
