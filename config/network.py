"""The `network` section: the VPC, its availability zones and NAT gateways, and who reaches the Kubernetes API."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import Field, StringConstraints, field_validator, model_validator

from config.catalogue import PRIVATE_SUBNET_PREFIX, PUBLIC_SUBNET_PREFIX, smallest_vpc_prefix
from config.section import Section


def ipv4_network(text: str, *, prefixes: range = range(0, 33)) -> str:
    """An IPv4 network in canonical form: no host bits (10.64.1.7/16 would silently become another VPC)."""
    try:
        net = ipaddress.IPv4Network(text, strict=False)
    except ValueError:
        raise ValueError(f"{text!r} is not an IPv4 network; write it like 10.64.0.0/16") from None
    if "/" not in text:
        raise ValueError(f"{text!r} has no prefix length; write it like {net.network_address}/32")
    if str(net) != text:
        raise ValueError(f"{text!r} has host bits set; the network is {net}, write that")
    if net.prefixlen not in prefixes:
        raise ValueError(f"{text!r} has prefix /{net.prefixlen}; use /{prefixes.start} to /{prefixes.stop - 1}")
    return text


class NetworkConfig(Section):
    vpc_cidr: str = Field(
        default="10.64.0.0/16",
        description="IPv4 network of the VPC, /16 to /18: each zone takes a public /24 and a private /20 "
        "(3 zones fit a /18, 4 to 6 zones a /17).",
    )
    availability_zones: list[Annotated[str, StringConstraints(pattern=r"^[a-z]{2}(-[a-z]+)+-\d[a-z]$")]] = Field(
        default_factory=lambda: ["us-east-2a", "us-east-2b", "us-east-2c"], min_length=2, max_length=6
    )
    nat_gateways: int = Field(default=1, ge=1, le=6)
    api_public_cidrs: list[str] = Field(
        default_factory=list,
        max_length=40,
        description="IPv4 networks allowed to reach the Kubernetes API over the internet; empty (the default) "
        "means the endpoint is private, reachable only from inside the VPC.",
    )

    @field_validator("vpc_cidr")
    @classmethod
    def _vpc_network(cls, cidr: str) -> str:
        ipv4_network(cidr)
        prefix, longest = int(cidr.split("/")[1]), smallest_vpc_prefix(2)
        if prefix < 16:
            raise ValueError(f"{cidr!r} has prefix /{prefix}, larger than a VPC may be (/16); use /16 to /{longest}")
        if prefix > longest:
            raise ValueError(
                f"{cidr!r} has prefix /{prefix}, too small for the subnets (each availability zone takes a public "
                f"/{PUBLIC_SUBNET_PREFIX} and a private /{PRIVATE_SUBNET_PREFIX}); use /16 to /{longest}"
            )
        return cidr

    @field_validator("availability_zones")
    @classmethod
    def _distinct_zones(cls, zones: list[str]) -> list[str]:
        for zone in sorted({z for z in zones if zones.count(z) > 1}):
            raise ValueError(f"{zone!r} is listed twice; list each availability zone once")
        return zones

    @field_validator("api_public_cidrs")
    @classmethod
    def _public_networks(cls, cidrs: list[str]) -> list[str]:
        for i, cidr in enumerate(cidrs):
            try:
                ipv4_network(cidr)
            except ValueError as err:
                raise ValueError(f"[{i}] {err}") from None
        return cidrs

    @model_validator(mode="after")
    def _vpc_holds_the_subnets(self) -> NetworkConfig:
        prefix = int(self.vpc_cidr.split("/")[1])
        needed = smallest_vpc_prefix(len(self.availability_zones))
        if prefix > needed:
            raise ValueError(
                f"vpc_cidr={self.vpc_cidr!r} is too small for {len(self.availability_zones)} availability "
                f"zones, each with a public /{PUBLIC_SUBNET_PREFIX} and a private /{PRIVATE_SUBNET_PREFIX} subnet; "
                f"use a /{needed} or larger (e.g. {ipaddress.IPv4Network(self.vpc_cidr).supernet(new_prefix=needed)})"
            )
        return self
