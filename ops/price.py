"""The trn2 node's hourly price as AWS publishes it, for reports when `trn2_nodes.hourly_price_usd` is not set (the
config's value always wins).

On demand: the Price List Query API (`pricing` GetProducts, service code AmazonEC2), whose endpoints are in us-east-1,
eu-central-1 and ap-south-1 only, filtered the way AWS documents for one Linux on-demand instance price: instance
type, region code, operating system Linux, tenancy Shared, no pre-installed software, capacity status Used (AWS Price
List user guide, "Using the AWS Price List Query API"). Each product is a JSON string whose `terms.OnDemand` holds
price dimensions with a unit and a USD price per unit.

Capacity Block: no API reports what a bought block cost; DescribeCapacityBlockOfferings shows what a block of the same
type, size and length costs now (`UpfrontFee` for the whole block), so the effective hourly price per node is
UpfrontFee / hours / instances, stated as an offering's price, not the one paid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

PRICING_REGION = "us-east-1"  # the Price List Query API's endpoint nearest the default region
HOURLY_UNITS = ("Hrs", "Hours")


class PriceUnknown(Exception):
    """AWS gave no single price for this node: the sentence says why and what to set instead."""


@dataclass(frozen=True)
class NodePrice:
    usd_per_hour: float
    source: str  # where it was read, for the line that shows it


def on_demand_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    terms = {
        "instanceType": instance_type,
        "regionCode": region,
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }
    return [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in terms.items()]


def on_demand_price(pricing: Any, instance_type: str, region: str) -> NodePrice:
    """The one on-demand Linux hourly USD price of `instance_type` in `region`, or PriceUnknown."""
    fix = f"set trn2_nodes.hourly_price_usd from the EC2 pricing page for {instance_type} in {region}"
    prices: set[float] = set()
    products = 0
    pages = pricing.get_paginator("get_products").paginate(
        ServiceCode="AmazonEC2", Filters=on_demand_filters(instance_type, region), FormatVersion="aws_v1"
    )
    for page in pages:
        for text in page["PriceList"]:
            products += 1
            prices |= _hourly_usd(json.loads(text))
    if not prices:
        what = f"{products} products without an hourly USD price" if products else "no product"
        raise PriceUnknown(f"the Price List API has {what} for {instance_type} on demand in {region}; {fix}")
    if len(prices) > 1:
        listed = ", ".join(f"${p:g}" for p in sorted(prices))
        raise PriceUnknown(
            f"the Price List API has several hourly prices for {instance_type} in {region} ({listed}); {fix}"
        )
    (price,) = prices
    return NodePrice(price, f"on demand in {region}, AWS Price List API")


def _hourly_usd(product: dict[str, Any]) -> set[float]:
    """The positive USD prices per hour of a product's on-demand terms (a dimension in another unit, or of 0, as
    for a range that is not billed, is not an hourly price)."""
    out: set[float] = set()
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if dimension.get("unit") in HOURLY_UNITS and usd is not None and float(usd) > 0:
                out.add(float(usd))
    return out


def capacity_block_price(ec2: Any, instance_type: str, instances: int, hours: int) -> NodePrice:
    """The lowest current offering of a block like the node group's, as USD per node-hour, or PriceUnknown."""
    offers = ec2.describe_capacity_block_offerings(
        InstanceType=instance_type, InstanceCount=instances, CapacityDurationHours=hours
    )["CapacityBlockOfferings"]
    usd = [o for o in offers if o.get("CurrencyCode", "USD") == "USD" and o.get("UpfrontFee")]
    if not usd:
        raise PriceUnknown(
            f"EC2 offers no Capacity Block of {instances} x {instance_type} for {hours} h now, so no price can be read; "
            "set trn2_nodes.hourly_price_usd to your block's upfront fee / hours / instances"
        )
    best = min(float(o["UpfrontFee"]) / o["CapacityBlockDurationHours"] / o["InstanceCount"] for o in usd)
    return NodePrice(
        best, f"a current Capacity Block offering ({instances} x {hours} h), not necessarily what you paid"
    )


def price_of(config: Any, ec2: Any, pricing: Any) -> NodePrice:
    """The node group's price through the given clients: on demand, or a current offering like its Capacity Block
    (its size, and its length from the reservation's dates). PriceUnknown, or botocore's error, when AWS gives none."""
    t = config.trn2_nodes
    if t.capacity_type == "CAPACITY_BLOCK":
        (block,) = ec2.describe_capacity_reservations(CapacityReservationIds=[t.capacity_reservation_id])[
            "CapacityReservations"
        ]
        hours = round((block["EndDate"] - block["StartDate"]).total_seconds() / 3600)
        return capacity_block_price(ec2, t.instance_type, block["TotalInstanceCount"], hours)
    return on_demand_price(pricing, t.instance_type, config.region)


def node_price(config: Any, stream: Any = None) -> NodePrice:
    """price_of() through bounded clients made here (`make bench`); PriceUnknown with the reason when AWS gives none
    or does not answer."""
    from cloud import aws

    try:
        ec2 = aws.client("ec2", config.region, stream=stream)
        return price_of(config, ec2, aws.client("pricing", PRICING_REGION, stream=stream))
    except aws.errors() as err:
        raise PriceUnknown(f"AWS did not give the node's price ({aws.error_code(err) or type(err).__name__})") from None
