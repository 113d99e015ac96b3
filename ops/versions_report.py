"""make versions: what the version map pins per Kubernetes version (EKS add-ons, Helm charts, images, the Grafana
plugin, the serving stacks' images), each with where its version was read; with AWS credentials also what EKS offers
now for each add-on and Kubernetes version (DescribeAddonVersions: its default build and its newest) beside the pin.

Read-only: it changes nothing, and without credentials it says so in one line after the offline part and exits 0.
Updates themselves arrive as pull requests from Renovate (renovate.json); `make preflight` is the check that the
config's own Kubernetes version is offered every pinned add-on build (docs/decisions.md, Versions).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from cloud import aws
from config import load_config
from config.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CommandError
from config.profiles import Image
from config.schema import ConfigError
from config.versions import ADDONS, CHARTS, CLUSTER_AUTOSCALER_IMAGES, CLUSTER_AUTOSCALER_REPOSITORY, IMAGES, PLUGINS
from serving_stacks import STACKS

NO_CREDENTIALS = (
    "no AWS credentials found, so what EKS offers now is not shown; with credentials (aws configure, aws sso login or "
    "AWS_PROFILE) make versions also asks DescribeAddonVersions"
)


def pinned_lines(config_version: str | None = None) -> list[str]:
    """The map, per Kubernetes version, then what is the same for every version; each pin with its source."""
    lines = []
    for k8s, addons in ADDONS.items():
        mark = " (this config's)" if k8s == config_version else ""
        lines.append(f"Kubernetes {k8s}{mark}:")
        lines += [f"  add-on  {name} {pin.version}  [{pin.source}]" for name, pin in addons.items()]
        ca = CLUSTER_AUTOSCALER_IMAGES[k8s]
        lines.append(f"  image   {CLUSTER_AUTOSCALER_REPOSITORY}:{ca.version}  [{ca.source}]")
    lines.append("Every Kubernetes version:")
    lines += [f"  chart   {c.chart} {c.version} from {c.repository}  [{c.source}]" for c in CHARTS.values()]
    lines += [f"  image   {pin.version}  [{pin.source}]" for pin in IMAGES.values()]
    lines += [f"  plugin  {name} {pin.version}  [{pin.source}]" for name, pin in PLUGINS.items()]
    repository = Image.model_fields["repository"].default
    lines += [f"  serving {repository}:{s.IMAGE_TAG}  [the {s.NAME} stack's catalogue]" for s in STACKS]
    return lines


@dataclass(frozen=True)
class Offer:
    """What DescribeAddonVersions lists for one add-on and Kubernetes version."""

    versions: tuple[str, ...]
    default: str | None

    @property
    def newest(self) -> str | None:
        return max(self.versions, key=version_key, default=None)


def version_key(version: str) -> tuple[int, ...]:
    """v1.21.1-eksbuild.8 -> (1, 21, 1, 8): numbers compared as numbers (eksbuild.10 is newer than eksbuild.9)."""
    return tuple(int(n) for n in re.findall(r"\d+", version))


def offer(eks: Any, addon: str, k8s: str) -> Offer:
    versions, default = [], None
    for page in eks.get_paginator("describe_addon_versions").paginate(addonName=addon, kubernetesVersion=k8s):
        for found in page["addons"]:
            for v in found["addonVersions"]:
                versions.append(v["addonVersion"])
                if any(c.get("clusterVersion") == k8s and c.get("defaultVersion") for c in v["compatibilities"]):
                    default = v["addonVersion"]
    return Offer(tuple(versions), default)


def offered_lines(eks: Any, region: str, addons: Mapping[str, Mapping[str, Any]] = ADDONS) -> list[str]:
    """Each pinned add-on beside EKS's default and newest build for its Kubernetes version (raises botocore's errors)."""
    lines = [f"What EKS offers now (DescribeAddonVersions, {region}):"]
    for k8s, pins in addons.items():
        lines.append(f"Kubernetes {k8s}:")
        for name, pin in pins.items():
            found = offer(eks, name, k8s)
            lines.append(f"  {name} pinned {pin.version}: {_beside(pin.version, found)}")
    return lines


def _beside(pinned: str, found: Offer) -> str:
    if not found.versions:
        return "EKS offers no build of it for this version"
    said = f"EKS default {found.default or 'none'}, newest {found.newest}"
    if pinned not in found.versions:
        return f"{said}; the pin is NOT OFFERED (make preflight fails on it)"
    if found.newest and version_key(found.newest) > version_key(pinned):
        return f"{said}; a newer build is offered"
    return f"{said}; the pin is the newest"


def _print(lines: Iterable[str], out: TextIO) -> None:
    for line in lines:
        print(line, file=out, flush=True)


def main(argv: list[str] | None = None, *, eks: Any = None, stream: TextIO | None = None) -> int:
    out = stream or sys.stdout
    parser = argparse.ArgumentParser(prog="python -m ops.versions_report", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=None, help="deployment config: its region and Kubernetes version")
    parser.add_argument("--region", default=None, help="ask EKS in this region (default: the config's)")
    parser.add_argument("--offline", action="store_true", help="the map only; ask AWS nothing")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return EXIT_USAGE
    _print(pinned_lines(config.kubernetes_version), out)
    if args.offline:
        return EXIT_OK
    region = args.region or config.region
    from botocore.exceptions import NoCredentialsError

    try:
        _print(offered_lines(eks or aws.client("eks", region, stream=sys.stderr), region), out)
    except NoCredentialsError:
        print(NO_CREDENTIALS, file=out)
        return EXIT_OK
    except CommandError as err:  # the AWS environment (profile, config file, endpoint): cloud/aws.py
        print(f"versions: {err}; the map above is complete", file=sys.stderr)
        return EXIT_USAGE
    except aws.errors() as err:
        print(f"versions: {aws.failure('EKS DescribeAddonVersions', err, 'run make versions again')}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
