"""The endpoint's vocabulary: the headers a caller sends and reads and the spill metric (one owner).

The endpoint chart renders them into the router's config, bench sends the override header, the docs and the
dashboard read the metric. Leaf module: imports nothing of ours.
"""

from __future__ import annotations

OVERRIDE_HEADER = "x-trn-specdec-variant"  # `<profile>`: this request goes to that arm, whatever the weights say
ARM_HEADER = "x-trn-specdec-arm"  # on every proxied response: the profile that served it
STICKY_HEADER = "x-session-id"  # default session header: one value always lands on the same arm
# Envoy's Prometheus name for requests the capped cluster of a speculative arm refused (they went to the baseline);
# the cluster label is `<profile>-capped`.
SPILL_METRIC = "envoy_cluster_upstream_rq_active_overflow"
CAPPED_SUFFIX = "-capped"
