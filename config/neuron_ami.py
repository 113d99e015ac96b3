"""Which Neuron driver each EKS AL2023 Neuron AMI release ships, as far as it could be read here.

The serving images need a host driver at least as new as the one their SDK was released with (a driver
"remains backwards compatible with older versions of Neuron Runtime, but newer versions of the Runtime might
rely on the functionality that is only provided by a newer driver": aws-neuron-sdk neuron-runtime/
nrt-troubleshoot.rst). Release date -> `aws-neuronx-dkms` version, from awslabs/amazon-eks-ami CHANGELOG.md
(read at 81fec2e8, 2026-07-23; later releases were not readable). A release after the last row has an
unknown driver here: check its release notes on github.com/awslabs/amazon-eks-ami/releases and add a row. A release
ships one driver for every Kubernetes minor it builds (v20260714's 1.36 Neuron AMI has 2.29.0.0, as 1.34's and 1.35's).

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

# (first release date yyyymmdd, driver): a release uses the row with the latest date on or before its own.
AMI_NEURON_DRIVERS: tuple[tuple[str, tuple[int, int, int, int]], ...] = (
    ("20250920", (2, 24, 7, 0)),  # v20250920 - v20251217 (SDK 2.26's driver)
    ("20260107", (2, 25, 4, 0)),  # v20260107 - v20260224
    ("20260304", (2, 26, 5, 0)),
    ("20260318", (2, 26, 10, 0)),  # v20260318, v20260403
    ("20260409", (2, 27, 4, 0)),  # v20260409 - v20260505
    ("20260610", (2, 28, 0, 0)),  # v20260610, v20260618, v20260625
    ("20260714", (2, 29, 0, 0)),  # v20260714 (SDK 2.31's driver); the last release read
)
LAST_KNOWN_RELEASE = AMI_NEURON_DRIVERS[-1][0]


def ami_driver(release_date: str) -> tuple[int, int, int, int] | None:
    """The driver of the AMI released on release_date (yyyymmdd), or None when not known here."""
    if release_date > LAST_KNOWN_RELEASE or release_date < AMI_NEURON_DRIVERS[0][0]:
        return None
    return [driver for date, driver in AMI_NEURON_DRIVERS if date <= release_date][-1]


def driver_text(driver: tuple[int, ...]) -> str:
    return ".".join(map(str, driver))
