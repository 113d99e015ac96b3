"""What a variant costs: its share of the Trainium node price, and that price per output token.

One owner for the arithmetic that `bench` (report, console) and the dashboard's metric math both use. A service
pays for the Neuron devices it claims (all replicas), as a share of the devices on a node: two services of 8
devices on one 16-device trn2.48xlarge pay half the node-hour each. Cost per token then follows from the
throughput measured at the benchmark's load, so it is the cost at that load, not at saturation.

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

SECONDS_PER_HOUR = 3600
TOKENS_PER_MILLION = 1_000_000
NO_PRICE = "set trn2_nodes.hourly_price_usd to see cost"


def hourly_cost_usd(node_hourly_price_usd: float, devices_claimed: int, devices_per_node: int) -> float:
    """The node price times the share of its devices the service claims."""
    return node_hourly_price_usd * devices_claimed / devices_per_node


def per_million_tokens_factor(hourly_usd: float) -> float:
    """USD per 1M output tokens = factor / (output tokens per second): the dashboard's metric math constant."""
    return hourly_usd * TOKENS_PER_MILLION / SECONDS_PER_HOUR


def usd_per_million_tokens(hourly_usd: float, output_tok_s: float) -> float | None:
    return per_million_tokens_factor(hourly_usd) / output_tok_s if output_tok_s > 0 else None


def usd_per_request(hourly_usd: float, duration_s: float, requests: int) -> float | None:
    """The service's cost over a run divided by the requests it served in that time."""
    return hourly_usd * duration_s / SECONDS_PER_HOUR / requests if requests > 0 else None
