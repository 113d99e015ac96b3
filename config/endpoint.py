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
# baseline: their sum, labelled envoy_cluster_name="<profile>-capped", is how much spilled. With the cap per replica
# (per-host connections, charts/envoy_bootstrap.py) a refusal is a pending overflow: every replica full and the waiting places
# (threshold x configured replicas) taken, or a burst larger than those arriving while connections open. Active
# overflow cannot happen with the limits rendered now (the cluster-wide max_requests is a million) and stays in the
# sum so that such a limit would be counted too.
SPILL_METRICS = ("envoy_cluster_upstream_rq_active_overflow", "envoy_cluster_upstream_rq_pending_overflow")
CAPPED_SUFFIX = "-capped"

# The router pod's own ports besides endpoint.port are in config/ports.py, with every other port of our pods.
# Envoy's admin handler for Prometheus text (Envoy docs, "Administration interface": GET /stats/prometheus): the one
# path the router's metrics listener routes (charts/endpoint.py) and the managed scraper asks for
# (stacks/constructs/managed_prometheus.py).
METRICS_PATH = "/stats/prometheus"
# Envoy's circuit-breaker thresholds (the per-host max_connections the spill threshold becomes) are
# google.protobuf.UInt32Value (envoyproxy/envoy@01c2c1fa
# api/envoy/config/cluster/v3/circuit_breaker.proto, CircuitBreakers.Thresholds.max_connections): a larger spill
# threshold renders a bootstrap Envoy refuses.
ENVOY_THRESHOLD_MAX = 2**32 - 1
