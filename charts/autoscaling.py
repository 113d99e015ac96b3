"""Queue-depth autoscaling of the vLLM services: one KEDA ScaledObject per profile, the TriggerAuthentication that
lets KEDA query the managed Prometheus workspace, and what the managed scraper needs inside the cluster (its network
path to the vLLM pods; AMP grants its Kubernetes access itself).

Each ScaledObject makes KEDA run an HPA (autoscaling/v2) on the profile's Deployment with the metric
the sum of its stack's requests-waiting gauge (LiveMetrics, serving_stacks/contract.py: vllm:num_requests_waiting on
both pinned stacks) as an AverageValue target, i.e. requests waiting per replica. Its numbers come from the `scaling`
section of the config (config/scaling.py); the behaviour is replayed in tests/charts/test_autoscaling.py.
"""

from __future__ import annotations

from typing import Any

import cdk8s
from cdk8s_plus_34 import k8s
from constructs import Construct

from config.labels import VLLM_POD_LABELS
from config.metrics import NAMESPACE_LABEL, PROFILE_LABEL
from config.ports import METRICS_SIDECAR_PORT
from config.profiles import ServingProfile
from config.scaling import WarmWindow, max_replicas, min_replicas, running_threshold, waiting_threshold
from config.schema import DeploymentConfig

KEDA_API_VERSION = "keda.sh/v1alpha1"
TRIGGER_AUTHENTICATION = "keda-managed-prometheus"
WAITING_TRIGGER = "requests-waiting"
RUNNING_TRIGGER = "requests-running"
WARM_TRIGGER = "warm"


def series_selector(namespace: str, profile: str) -> str:
    """The label matchers of one profile's vLLM series in the workspace (the labels the scrape writes), for every
    PromQL query of them: KEDA's, the live dashboard's and the alert rules'. Its pods' Kubernetes selector is
    config.labels.vllm_selector."""
    return f'{{{NAMESPACE_LABEL}="{namespace}",{PROFILE_LABEL}="{profile}"}}'


def waiting_query(namespace: str, profile: ServingProfile) -> str:
    """Requests waiting summed over the profile's pods (its stack's gauge); the HPA divides by replicas (AverageValue)."""
    return f"sum({profile.live_metrics.requests_waiting}{series_selector(namespace, profile.name)})"


def running_query(namespace: str, profile: ServingProfile) -> str:
    """Requests in the profile's batches summed over its pods (its stack's gauge); the HPA divides by replicas."""
    return f"sum({profile.live_metrics.requests_running}{series_selector(namespace, profile.name)})"


def serving_replicas_query(namespace: str, profile: str) -> str:
    """Replicas whose /metrics answered the last scrape."""
    return f"count(up{series_selector(namespace, profile)} == 1)"


def _trigger(config: DeploymentConfig, name: str, query: str, threshold: int, query_url: str) -> dict[str, Any]:
    return {
        "type": "prometheus",
        "name": name,
        "metricType": "AverageValue",
        "metadata": {
            "serverAddress": query_url,
            "query": query,
            "threshold": str(threshold),
            # Active from one request (values are whole requests); KEDA uses it only between 0 and 1 replicas.
            "activationThreshold": "0",
            "awsRegion": config.region,
        },
        "authenticationRef": {"name": TRIGGER_AUTHENTICATION},
    }


def scaled_object(config: DeploymentConfig, profile: ServingProfile, query_url: str) -> dict[str, Any]:
    """Two triggers, as llm-d scales on queue and running requests; the HPA takes the larger proposal. Waiting
    requests above the threshold per replica add replicas; running requests at a full compiled batch per replica
    hold them (waiting alone drops to 0 once the new replica serves, and would take it away again)."""
    s = config.scaling
    ns = config.namespace
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": profile.name},
        "pollingInterval": s.polling_interval_seconds,
        "minReplicaCount": min_replicas(profile),
        "maxReplicaCount": max_replicas(config, profile),
        "advanced": {
            "horizontalPodAutoscalerConfig": {
                "behavior": {
                    # No window on the way up, but at most one new replica per scale-up period (>= time-to-Ready).
                    "scaleUp": {
                        "stabilizationWindowSeconds": 0,
                        "selectPolicy": "Max",
                        "policies": [{"type": "Pods", "value": 1, "periodSeconds": s.scale_up_period_seconds}],
                    },
                    "scaleDown": {
                        "stabilizationWindowSeconds": s.scale_down_stabilization_seconds,
                        "selectPolicy": "Max",
                        "policies": [{"type": "Pods", "value": 1, "periodSeconds": s.scale_down_period_seconds}],
                    },
                }
            }
        },
        "triggers": [
            _trigger(config, WAITING_TRIGGER, waiting_query(ns, profile), waiting_threshold(s, profile), query_url),
            _trigger(config, RUNNING_TRIGGER, running_query(ns, profile), running_threshold(profile), query_url),
            *(warm_trigger(i, w) for i, w in enumerate(s.warm_schedule)),
        ],
    }


def scaled_object_name(config: DeploymentConfig, profile: ServingProfile) -> str | None:
    """The name of the profile's ScaledObject, or None when none is rendered (scaling off, or the profile switched
    off with replicas 0). ops/out_of_service.py asks this to know who owns the profile's replica count."""
    if not config.scaling.enabled or profile.replicas == 0:
        return None
    return profile.name


def warm_trigger(index: int, window: WarmWindow) -> dict[str, Any]:
    """KEDA's cron scaler (metadata timezone, start, end, desiredReplicas): the HPA takes the largest proposal, so
    the profile runs at least `replicas` while the window is open and the queue triggers still add more."""
    return {
        "type": "cron",
        "name": f"{WARM_TRIGGER}-{index}",
        "metadata": {
            "timezone": window.timezone,
            "start": window.start,
            "end": window.end,
            "desiredReplicas": str(window.replicas),
        },
    }


def keda_object(scope: Construct, kind: str, *, name: str, namespace: str) -> cdk8s.ApiObject:
    """A KEDA custom resource (no typed bindings; its schema is checked in tests against the pinned CRDs)."""
    return cdk8s.ApiObject(
        scope,
        f"{kind}-{name}",
        api_version=KEDA_API_VERSION,
        kind=kind,
        metadata=cdk8s.ApiObjectMetadata(name=name, namespace=namespace),
    )


class AutoscalingChart(cdk8s.Chart):
    def __init__(self, scope: Construct, chart_id: str, *, config: DeploymentConfig, query_url: str) -> None:
        super().__init__(scope, chart_id, disable_resource_name_hashes=True)
        ns = config.namespace
        ScraperAccess(self, "Scraper", config=config)
        if not config.scaling.enabled:
            return
        keda_object(self, "TriggerAuthentication", name=TRIGGER_AUTHENTICATION, namespace=ns).add_json_patch(
            cdk8s.JsonPatch.add("/spec", {"podIdentity": {"provider": "aws", "identityOwner": "keda"}})
        )
        for profile in config.profiles:
            name = scaled_object_name(config, profile)
            if name is None:
                continue  # switched off in the config: nothing to scale
            keda_object(self, "ScaledObject", name=name, namespace=ns).add_json_patch(
                cdk8s.JsonPatch.add("/spec", scaled_object(config, profile, query_url))
            )


class ScraperAccess(Construct):
    """What the managed scraper needs inside the cluster: only the network path to the pods it scrapes.

    No RBAC: the cluster authenticates with access entries (authentication mode API,
    stacks/constructs/eks_cluster.py), and for that mode AMP creates the scraper's access entry and its access policy
    itself when the scraper is created (AMP user guide, "Configuring your Amazon EKS cluster":
    https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html). That policy is AMP's, not ours
    and not least privilege: get/list/watch on nodes, pods, services, endpoints, ingresses and configmaps in every
    namespace, /metrics, and the control plane's kcm/ksh metrics. The ClusterRole bound to `aps-collector-user` that
    the guide gives is for clusters that map principals with the `aws-auth` ConfigMap; in API mode nothing maps the
    scraper to that user, so such RBAC would grant nothing."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig) -> None:
        super().__init__(scope, construct_id)
        # The scraper's network interfaces live in the VPC's private subnets, not in a pod: the namespace's
        # default-deny policy (charts/pod_security.py) would drop its scrapes. It is admitted from the VPC to the
        # metrics-only sidecar's port, never to vLLM's own port, which serves the unauthenticated /v1 API too.
        k8s.KubeNetworkPolicy(
            self,
            "NetworkPolicy",
            metadata=k8s.ObjectMeta(name="vllm-metrics-from-vpc", namespace=config.namespace),
            spec=k8s.NetworkPolicySpec(
                pod_selector=k8s.LabelSelector(match_labels=VLLM_POD_LABELS),
                policy_types=["Ingress"],
                ingress=[
                    k8s.NetworkPolicyIngressRule(
                        from_=[k8s.NetworkPolicyPeer(ip_block=k8s.IpBlock(cidr=config.network.vpc_cidr))],
                        ports=[
                            k8s.NetworkPolicyPort(
                                port=k8s.IntOrString.from_number(METRICS_SIDECAR_PORT), protocol="TCP"
                            )
                        ],
                    )
                ],
            ),
        )


def render_autoscaling(config: DeploymentConfig, query_url: str) -> list[dict[str, Any]]:
    """The scraper's access, and with `scaling.enabled` KEDA's objects. `query_url`: the workspace's query root."""
    app = cdk8s.App()
    return AutoscalingChart(app, "autoscaling", config=config, query_url=query_url).to_json()
