"""The endpoint's vocabulary: the headers a caller sends and reads and the spill metric (one owner); its ports are
config/ports.py's.

The endpoint chart renders them into the router's config, bench sends the override header, the docs and the
dashboard read the metric. Leaf module: imports nothing of ours.
"""

from __future__ import annotations

OVERRIDE_HEADER = "x-trn-specdec-variant"  # `<profile>`: this request goes to that arm, whatever the weights say
ARM_HEADER = "x-trn-specdec-arm"  # on every proxied response: the profile that served it
STICKY_HEADER = "x-session-id"  # default session header: one value always lands on the same arm
# Envoy's Prometheus counters of requests the capped cluster of a speculative arm refused, which then went to the
# baseline: their sum, labelled envoy_cluster_name="<profile>-capped", is how much spilled. With the cap on requests
# (max_requests, charts/envoy_bootstrap.py cap) a refusal is an active overflow: the arm full when the request got a
# connection (Envoy 1.40 counts it there); a pending overflow is a burst larger than the cap arriving while its
# connections open. Both are in the sum.
SPILL_METRICS = ("envoy_cluster_upstream_rq_active_overflow", "envoy_cluster_upstream_rq_pending_overflow")
CAPPED_SUFFIX = "-capped"

# The router pod's own ports besides endpoint.port are in config/ports.py, with every other port of our pods.
# Envoy's admin handler for Prometheus text (Envoy docs, "Administration interface": GET /stats/prometheus): the one
# path the router's metrics listener routes (charts/endpoint.py) and the managed scraper asks for
# (stacks/constructs/managed_prometheus.py).
METRICS_PATH = "/stats/prometheus"
# Envoy's circuit-breaker thresholds (the max_requests the spill threshold times the replicas becomes) are
# google.protobuf.UInt32Value (envoyproxy/envoy@01c2c1fa
# api/envoy/config/cluster/v3/circuit_breaker.proto, CircuitBreakers.Thresholds.max_requests): the config refuses
# a larger spill threshold, and the cap (threshold x replicas) is rendered at most this.
ENVOY_THRESHOLD_MAX = 2**32 - 1
