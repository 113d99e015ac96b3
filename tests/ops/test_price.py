"""ops/price.py against botocore's Stubber: every request and answer is validated against botocore's service model
(GetProducts, DescribeCapacityBlockOfferings), so the filters we send and the shapes we read are AWS's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.stub import Stubber

from cloud import aws
from ops.price import PRICING_REGION, PriceUnknown, capacity_block_price, on_demand_filters, on_demand_price


def product(*dimensions: tuple[str, str]) -> str:
    """A Price List product (FormatVersion aws_v1) with on-demand price dimensions of (unit, USD)."""
    return json.dumps(
        {
            "product": {"attributes": {"instanceType": "trn2.48xlarge", "regionCode": "us-east-2"}},
            "terms": {
                "OnDemand": {
                    "SKU.JRTCKXETXF": {
                        "priceDimensions": {
                            f"SKU.JRTCKXETXF.6YS6EN2CT{i}": {"unit": unit, "pricePerUnit": {"USD": usd}}
                            for i, (unit, usd) in enumerate(dimensions)
                        }
                    }
                }
            },
        }
    )


def answered(price_list: list[str]) -> Any:
    client = aws.client("pricing", PRICING_REGION)
    stubber = Stubber(client)
    stubber.add_response(
        "get_products",
        {"FormatVersion": "aws_v1", "PriceList": price_list},
        {
            "ServiceCode": "AmazonEC2",
            "Filters": on_demand_filters("trn2.48xlarge", "us-east-2"),
            "FormatVersion": "aws_v1",
        },
    )
    stubber.activate()
    return client, stubber


def test_the_filters_are_the_documented_ones_for_one_linux_on_demand_price():
    fields = {f["Field"]: f["Value"] for f in on_demand_filters("trn2.48xlarge", "us-east-2")}
    assert fields == {
        "instanceType": "trn2.48xlarge",
        "regionCode": "us-east-2",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }


def test_one_hourly_dimension_is_the_price():
    client, stubber = answered([product(("Hrs", "44.7000000000"))])
    price = on_demand_price(client, "trn2.48xlarge", "us-east-2")
    stubber.assert_no_pending_responses()
    assert price.usd_per_hour == 44.7 and "Price List API" in price.source


def test_of_several_dimensions_only_the_billed_hourly_one_counts():
    client, _ = answered([product(("Hrs", "0.0000000000"), ("Quantity", "3.5"), ("Hrs", "44.7000000000"))])
    assert on_demand_price(client, "trn2.48xlarge", "us-east-2").usd_per_hour == 44.7


@pytest.mark.parametrize(
    ("price_list", "said"),
    [
        ([], "has no product for trn2.48xlarge on demand in us-east-2; set trn2_nodes.hourly_price_usd"),
        ([product(("Hrs", "0.0000000000"))], "has 1 products without an hourly USD price"),
        ([product(("Hrs", "44.7")), product(("Hrs", "51.2"))], "several hourly prices for trn2.48xlarge in us-east-2"),
    ],
)
def test_no_single_price_is_a_sentence_naming_what_to_set(price_list, said):
    client, _ = answered(price_list)
    with pytest.raises(PriceUnknown, match=said.replace("(", r"\(")):
        on_demand_price(client, "trn2.48xlarge", "us-east-2")


def test_a_capacity_block_price_is_the_cheapest_offering_per_node_hour():
    ec2 = aws.client("ec2", "us-east-2")
    stubber = Stubber(ec2)
    offer = {
        "InstanceType": "trn2.48xlarge",
        "InstanceCount": 1,
        "CapacityBlockDurationHours": 24,
        "CurrencyCode": "USD",
    }
    stubber.add_response(
        "describe_capacity_block_offerings",
        {
            "CapacityBlockOfferings": [
                {**offer, "CapacityBlockOfferingId": "cbr-1", "UpfrontFee": "960.00"},
                {**offer, "CapacityBlockOfferingId": "cbr-2", "UpfrontFee": "840.00"},
            ]
        },
        {"InstanceType": "trn2.48xlarge", "InstanceCount": 1, "CapacityDurationHours": 24},
    )
    stubber.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": []})
    stubber.activate()
    price = capacity_block_price(ec2, "trn2.48xlarge", 1, 24)
    assert price.usd_per_hour == 35.0 and "not necessarily what you paid" in price.source
    with pytest.raises(PriceUnknown, match=r"offers no Capacity Block of 1 x trn2\.48xlarge for 24 h"):
        capacity_block_price(ec2, "trn2.48xlarge", 1, 24)
