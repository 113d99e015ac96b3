"""Every port our pods listen on, by the pod that holds it (one owner): the charts render these numbers, the config
rules check each port the config sets against the fixed ports of its own pod (two listeners in one pod cannot bind
one port, and Kubernetes schedules such a pod all the same), and tests/config/test_ports.py walks the rendered pods
so that a port hard-coded anywhere else fails.

The ports the config sets: a profile's `port` (vLLM's API, health and /metrics in its vLLM pod, and the compile's
vLLM in its build Job) and `endpoint.port` (the router's API). vLLM's own helper ports (torch.distributed, ZMQ) are
whatever the kernel gives a bind to port 0 unless VLLM_PORT is set, which no stack sets (vLLM 0.9.1
vllm/utils.py `_get_open_port`, 0.29.0 vllm/utils/network_utils.py `_get_open_port`). The stage, build and bench
Jobs listen on no fixed port.

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

DEFAULT_API_PORT = 8000  # a profile's and the endpoint's `port` when the config names none

# Each vLLM pod, beside vLLM on the profile's port: the metrics-only sidecar (charts/metrics_proxy.py) the managed
# scraper reads.
METRICS_SIDECAR_PORT = 9400
VLLM_POD_PORTS = {METRICS_SIDECAR_PORT: "metrics sidecar (charts/metrics_proxy.py, what the managed scraper reads)"}

# The endpoint's router pod, beside Envoy's API listener on endpoint.port (charts/envoy_bootstrap.py).
ENDPOINT_ADMIN_PORT = 9901  # 127.0.0.1 only: the admin API can stop Envoy
ENDPOINT_METRICS_PORT = 9902  # config/endpoint.py METRICS_PATH only, proxied to the admin API
# 127.0.0.1, ENDPOINT_GATE_PORT + i for the i-th spilling arm: the hop whose circuit breaker is the threshold
ENDPOINT_GATE_PORT = 9910


def endpoint_pod_ports(spilling_arms: int) -> dict[int, str]:
    """The router pod's fixed ports with `spilling_arms` gates, each by what listens there."""
    own = {ENDPOINT_ADMIN_PORT: "admin", ENDPOINT_METRICS_PORT: "metrics"}
    return own | {ENDPOINT_GATE_PORT + i: "spill gate" for i in range(spilling_arms)}
