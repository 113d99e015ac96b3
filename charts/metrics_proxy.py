"""A metrics-only door into each vLLM pod, so the inference API need not be open to the VPC.

vLLM serves its unauthenticated OpenAI API and its Prometheus `/metrics` on one port: 0.29.0 mounts `/metrics` on the
API's own FastAPI app (vllm/entrypoints/serve/instrumentator/metrics.py, `attach_router`: `Mount("/metrics", ...)`
appended to `app.routes`) and has no flag for a separate metrics port; 0.9.1 does the same (vllm/entrypoints/openai/
api_server.py, `mount_metrics`). The managed scraper reaches pods from network interfaces in the private subnets, the
same subnets the VPC CNI takes pod addresses from, so no ipBlock tells it from a pod of another namespace. Hence this
sidecar: the pinned Envoy (charts/endpoint.py's image) listening on METRICS_SIDECAR_PORT (config/ports.py), forwarding
a GET of exactly the stack's metrics path to vLLM on 127.0.0.1 and answering 404 to everything else. The
NetworkPolicies then open that port to the VPC and vLLM's own port only to the endpoint and the benchmark
(charts/pod_security.py). Loopback traffic inside the pod is not subject to NetworkPolicy.
"""

from __future__ import annotations

from typing import Any

import yaml
from cdk8s_plus_34 import k8s

from charts.endpoint import ENVOY_IMAGE
from charts.envoy_bootstrap import ROUTER
from charts.pod_security import non_root
from config.ports import METRICS_SIDECAR_PORT

METRICS_PORT_NAME = "metrics"  # the scrape job keeps only this container port (stacks/constructs/managed_prometheus)
_HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"


def metrics_proxy_bootstrap(*, vllm_port: int, metrics_path: str, port: int = METRICS_SIDECAR_PORT) -> dict[str, Any]:
    """Envoy's static config: `path` is an exact match on the path without its query string (Envoy route API,
    RouteMatch.path), so `/metrics/../v1/...` or `/v1/...` never reach vLLM; other methods and paths get 404."""
    get_only = [{"name": ":method", "string_match": {"exact": "GET"}}]
    routes = [
        {"match": {"path": metrics_path, "headers": get_only}, "route": {"cluster": "vllm", "timeout": "10s"}},
        {"match": {"prefix": "/"}, "direct_response": {"status": 404}},
    ]
    hcm = {
        "@type": _HCM,
        "stat_prefix": "metrics",
        "route_config": {"virtual_hosts": [{"name": "metrics", "domains": ["*"], "routes": routes}]},
        "http_filters": [ROUTER],
    }
    address = {"socket_address": {"address": "127.0.0.1", "port_value": vllm_port}}
    return {
        "static_resources": {
            "listeners": [
                {
                    "name": "metrics",
                    "address": {"socket_address": {"address": "0.0.0.0", "port_value": port}},
                    "filter_chains": [
                        {"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]}
                    ],
                }
            ],
            "clusters": [
                {
                    "name": "vllm",
                    "type": "STATIC",
                    "connect_timeout": "1s",
                    "load_assignment": {
                        "cluster_name": "vllm",
                        "endpoints": [{"lb_endpoints": [{"endpoint": {"address": address}}]}],
                    },
                }
            ],
        }
    }


def metrics_proxy_container(*, vllm_port: int, metrics_path: str) -> k8s.Container:
    """The sidecar; its config travels on the command line (`--config-yaml`), so there is no ConfigMap to keep."""
    config = yaml.safe_dump(metrics_proxy_bootstrap(vllm_port=vllm_port, metrics_path=metrics_path), sort_keys=False)
    return k8s.Container(
        name="metrics-proxy",
        image=ENVOY_IMAGE,
        command=["envoy"],
        args=["--config-yaml", config, "--concurrency", "1", "--log-level", "warning"],
        ports=[k8s.ContainerPort(name=METRICS_PORT_NAME, container_port=METRICS_SIDECAR_PORT)],
        security_context=non_root(),
        resources=k8s.ResourceRequirements(
            requests={"cpu": k8s.Quantity.from_string("50m"), "memory": k8s.Quantity.from_string("64Mi")},
            limits={"cpu": k8s.Quantity.from_string("500m"), "memory": k8s.Quantity.from_string("128Mi")},
        ),
    )
