"""How the Cluster Autoscaler adds and removes trn2 nodes, derived from the config (docs/elastic-capacity.md).

KEDA adds a replica on queue depth; a replica that does not fit stays Pending; the Cluster Autoscaler sees the
Pending pod at its next scan and raises the node group's desired size, never above max_size (the ceiling). When KEDA
removes a replica, its node becomes unneeded; the autoscaler removes it only after it has been unneeded for longer
than getting that capacity back would take (node Ready + replica time-to-Ready), never below min_size (the floor).

Cluster Autoscaler facts used here, at the pinned versions (stacks/constructs/cluster_autoscaler.py): scan every 10 s
(`--scan-interval` default, FAQ "What are the parameters to CA?"); it respects the Auto Scaling group's minimum and
maximum and only changes the desired size (cloudprovider/aws/README.md, "Auto-Discovery Setup"); it does not remove a
node that runs a pod annotated `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"` (FAQ, "What types of pods
can prevent CA from removing a node?"), which every vLLM pod carries, so only a node without a serving replica goes.

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

from typing import Any

SCAN_INTERVAL_SECONDS = 10  # CA's --scan-interval default at 1.34.5 and 1.35.2 (FAQ parameter table)
MAX_NODE_PROVISION_DEFAULT_SECONDS = 900  # CA's --max-node-provision-time default (15m0s)
SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"


def capacity_back_seconds(config: Any) -> int:
    """Seconds from a scale-up to a Ready replica on a new node: node Ready, then the replica's time-to-Ready."""
    return int(config.trn2_nodes.node_ready_seconds + config.scaling.time_to_ready_seconds)


def scale_down_unneeded_seconds(config: Any) -> int:
    """A node is removed only after it has been unneeded longer than getting its capacity back would take: a trough
    shorter than that keeps the node, so the next peak does not wait a whole node boot plus load."""
    return capacity_back_seconds(config) + SCAN_INTERVAL_SECONDS


def scale_down_delay_after_add_seconds(config: Any) -> int:
    """No scale-down evaluation while a replica that a scale-up was for is still loading."""
    return int(config.scaling.time_to_ready_seconds)


def node_overdue_seconds(config: Any) -> int:
    """Twice the expected node Ready: a node a scale-up asked for that is not Ready by then is not coming."""
    return 2 * int(config.trn2_nodes.node_ready_seconds)


def max_node_provision_seconds(config: Any) -> int:
    """How long CA waits for a launched node to register before it gives up on it: until the node is overdue,
    never below CA's own 15 minutes."""
    return max(MAX_NODE_PROVISION_DEFAULT_SECONDS, node_overdue_seconds(config))


def duration(seconds: int) -> str:
    """Go's time.ParseDuration form, as CA's duration flags take it."""
    return f"{seconds}s"
