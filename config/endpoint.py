"""The endpoint's vocabulary: the headers a caller sends and reads and the spill metric (one owner).

The endpoint chart renders them into the router's config, bench sends the override header, the docs and the
dashboard read the metric. Leaf module: imports nothing of ours.
"""

from __future__ import annotations

OVERRIDE_HEADER = "x-trn-specdec-variant"  # `<profile>`: this request goes to that arm, whatever the weights say
ARM_HEADER = "x-trn-specdec-arm"  # on every proxied response: the profile that served it
STICKY_HEADER = "x-session-id"  # default session header: one value always lands on the same arm
# Envoy's Prometheus counters of requests the capped cluster of a speculative arm refused, which then went to the
# baseline: their sum, labelled envoy_cluster_name="<profile>-capped", is how much spilled. Refused while running
# (active) or while waiting for a new upstream connection (pending): both are the arm being full.
SPILL_METRICS = ("envoy_cluster_upstream_rq_active_overflow", "envoy_cluster_upstream_rq_pending_overflow")
CAPPED_SUFFIX = "-capped"
