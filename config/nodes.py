"""The `system_nodes` and `trn2_nodes` sections: the two node groups, their sizes, disks, AMI and capacity."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AwareDatetime, Field, StringConstraints, field_validator

from config.catalogue import NEURON_INSTANCES, NeuronInstance
from config.section import Section


class SystemNodeGroup(Section):
    instance_type: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")] = Field(
        default="m7i.xlarge", description="An x86_64 type: system nodes run the AL2023 x86_64 AMI."
    )
    min_size: int = Field(default=2, ge=1, le=20)
    desired_size: int = Field(default=2, ge=1, le=20)
    max_size: int = Field(default=4, ge=1, le=20)
    disk_gib: int = Field(default=100, ge=20, le=2000)

    @field_validator("instance_type")
    @classmethod
    def _x86_64(cls, instance_type: str) -> str:
        """Graviton families carry a `g` after the generation (m7g, c6gn, t4g, x2gd, is4gen) or are a1."""
        family = instance_type.split(".")[0]
        match = re.fullmatch(r"[a-z]+\d+(?P<attributes>[a-z-]*)", family)
        if family == "a1" or (match and "g" in match["attributes"]):
            raise ValueError(
                f"{instance_type!r} is a Graviton (arm64) type, but the system nodes run "
                "the AL2023 x86_64 AMI; use an x86_64 type such as m7i.xlarge"
            )
        return instance_type


class Trn2NodeGroupConfig(Section):
    instance_type: str = "trn2.48xlarge"
    min_size: int = Field(default=1, ge=0, le=64)
    desired_size: int = Field(default=1, ge=0, le=64)
    max_size: int = Field(
        default=2,
        ge=1,
        le=64,
        description="The ceiling the Cluster Autoscaler may grow the group to (min_size is its floor); KEDA's "
        "maximum replicas are each profile's share of max_size nodes (docs/elastic-capacity.md).",
    )
    node_ready_seconds: int = Field(
        default=600,
        ge=60,
        le=3600,
        description="Seconds from a scale-up to a trn2 node that is Ready with its devices published (EC2 launch, "
        "boot, join, Neuron DRA ResourceSlices): an estimate until the cold-start report measures it. The Cluster "
        "Autoscaler's scale-down waits derive from it.",
    )
    capacity_block_instances: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="With CAPACITY_BLOCK: the instance count of the reservation (EC2 console). The node group "
        "cannot grow past it, so max_size may not exceed it.",
    )
    capacity_type: Literal["ON_DEMAND", "CAPACITY_BLOCK"] = "ON_DEMAND"
    capacity_reservation_id: Annotated[str, StringConstraints(pattern=r"^cr-[0-9a-f]{8,17}$")] | None = None
    availability_zone: str | None = Field(
        default=None, description="Pin the node group to one AZ (required for CAPACITY_BLOCK)."
    )
    capacity_block_end: AwareDatetime | None = Field(
        default=None,
        description="When the Capacity Block ends, with its time zone (the EC2 console shows it in UTC, e.g. "
        "2026-12-01T11:30:00Z). Set it with CAPACITY_BLOCK: the benchmark refuses to start in its last 45 minutes.",
    )
    disk_gib: int = Field(default=1024, ge=200, le=16000, description="Root volume, sized for compile scratch.")
    # gp3 ranges from the EC2 API (botocore 1.44's LaunchTemplateEbsBlockDeviceRequest): IOPS 3,000-80,000,
    # throughput 125-2,000 MiB/s. Above 3,000 IOPS and 125 MiB/s each unit is billed monthly (README, Costs).
    disk_iops: int = Field(
        default=16000, ge=3000, le=80000, description="Root volume gp3 IOPS: compile and staging write tens of GB."
    )
    disk_throughput_mibps: int = Field(default=1000, ge=125, le=2000, description="Root volume gp3 throughput, MiB/s.")
    hourly_price_usd: float | None = Field(
        default=None,
        gt=0,
        le=1000,
        description="What one node costs per hour in USD (your region's on-demand or Capacity Block rate): bench "
        "and the dashboard turn it into cost per 1M output tokens. None: no cost shown (README, Costs).",
    )
    ami_release_version: str | None = Field(
        default=None,
        description="EKS AMI release (<k8s x.y.z>-<yyyymmdd>); must be >= 1.34.2 for DRA (1.34.0/1.34.1 have a DRA bug).",
    )

    @field_validator("capacity_block_end", mode="before")
    @classmethod
    def _timestamp_text(cls, value: object) -> object:
        """YAML reads an unquoted timestamp as a datetime and a quoted one as text: take both, but not a number
        (lax parsing would read 1 as 1970-01-01T00:00:01Z)."""
        if not isinstance(value, str):
            return value
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a timestamp; write it like 2026-12-01T11:30:00Z") from None

    @field_validator("ami_release_version")
    @classmethod
    def _ami_release(cls, release: str | None) -> str | None:
        if release is None:
            return None
        match = re.fullmatch(r"(\d{1,2})\.(\d{1,3})\.(\d{1,3})-(\d{8})", release)
        if not match:
            raise ValueError(
                f"{release!r} is not an EKS AMI release like 1.35.0-20251120 (<kubernetes x.y.z>-<yyyymmdd>); "
                "copy one from the EKS AMI release notes or leave it null for the latest"
            )
        if tuple(int(g) for g in match.groups()[:3]) < (1, 34, 2):
            raise ValueError(f"{release!r} is older than 1.34.2; Neuron DRA needs AMI 1.34.2 or newer")
        return release

    @field_validator("instance_type")
    @classmethod
    def _neuron_instance(cls, instance_type: str) -> str:
        if instance_type.startswith("trn3"):
            raise ValueError(
                f"instance_type={instance_type!r} is a Trainium3 type; this project serves on Trainium2 only (use one "
                f"of {', '.join(NEURON_INSTANCES)}): Trainium3 comes as trn3 instances and UltraServers placed through "
                "the Neuron UltraServer Operator beside the DRA driver, and no serving stack here is checked on it yet "
                "(the plan: docs/trainium3.md)"
            )
        if instance_type not in NEURON_INSTANCES:
            raise ValueError(
                f"instance_type={instance_type!r} is not a Trainium2 instance; use one of {', '.join(NEURON_INSTANCES)}"
            )
        return instance_type

    @property
    def instance(self) -> NeuronInstance:
        return NEURON_INSTANCES[self.instance_type]
