"""make preflight: read-only checks of the account against the config, so that what would fail 25 minutes into `make
deploy` (a quota, a zone without trn2, an add-on version EKS does not offer, a bucket name taken) is one sentence now.

One line per check: `ok`, `FAIL` with what is wrong and the fix, or `skipped` with why. Every AWS call goes through
cloud/aws.py's bounded clients, and the checks after the identity run side by side under one deadline
(DEADLINE_S): against an endpoint that never answers, the preflight still ends, with a sentence, within it. Nothing
is created or changed. docs/preflight.md lists each check and its source.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from cloud import aws
from config import load_config
from config.exit_codes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CommandError
from config.neuron_ami import ami_driver, driver_text
from config.schema import ConfigError, DeploymentConfig
from config.versions import for_kubernetes
from ops.capacity_block import LAST_MINUTES
from ops.price import PRICING_REGION, PriceUnknown, price_of

# From the command's start (clients included), whatever the network does; with the interpreter's own start-up (1-2 s)
# the whole `make preflight` ends within 30 s (perf/preflight_silent.py measures it).
DEADLINE_S = 27.0
HF_TIMEOUT_S = 8.0  # one Hugging Face API request
HF_ENDPOINT = "https://huggingface.co"
SERVICES = ("ec2", "service-quotas", "eks", "ssm", "iam", "s3", "amp", "cloudformation")

# Service Quotas codes (the answer's QuotaName is checked, so a wrong code fails as a sentence, not silently).
TRN_QUOTA = ("ec2", "L-2C3B7624", "Running On-Demand Trn instances")
EIP_QUOTA = ("ec2", "L-0263D0A3", "EC2-VPC Elastic IPs")
VPC_QUOTA = ("vpc", "L-F678F1CE", "VPCs per Region")
NAT_QUOTA = ("vpc", "L-FE5A380F", "NAT gateways per Availability Zone")
# EKS publishes each optimized AMI as an SSM public parameter ("Retrieve recommended Amazon Linux AMI IDs", EKS user
# guide: ami-type amazon-linux-2023/x86_64/neuron; the recommended parameter's JSON has release_version).
NEURON_AMI_PARAMETER = (
    "/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/x86_64/neuron/recommended/release_version"
)
BAD_BLOCK_STATES = ("expired", "cancelled", "cancelling", "failed", "payment-failed", "unavailable", "unsupported")

OK, FAIL, SKIPPED, WAIT = "ok", "FAIL", "skipped", "wait"


@dataclass(frozen=True)
class Result:
    check: str
    status: str
    text: str

    def line(self) -> str:
        """One line, whatever a check or AWS put in the text (an answer's body never spills over several)."""
        return f"{self.status:<7} {self.check}: {' '.join(self.text.split())}"


class Failed(Exception):
    """A check found something that would break the deploy: the message is the sentence (what, and the fix)."""


class Wait(Exception):
    """Nothing is wrong, but the deploy cannot succeed yet (a Capacity Block bought and not yet usable): the message
    says what it is and from when; `make deploy` stops, as it would fail before then."""


class Skipped(Exception):
    """The check does not apply to this config, or was asked not to run: the message says why."""


def clients(region: str, stream: TextIO) -> dict[str, Any]:
    """The bounded clients (cloud/aws.py), made here in one thread: boto3's default session is not thread-safe."""
    made = {service: aws.client(service, region, stream=stream) for service in SERVICES if service != "s3"}
    made["pricing"] = aws.client("pricing", PRICING_REGION, stream=stream)  # the Price List API's own endpoint
    # The account is not known yet (STS answers inside the deadline): the bucket check names it on its one call.
    return {**made, "s3": aws.s3_client(region, None, stream=stream)}


class Preflight:
    """The checks, one method each; `run` calls them and returns one Result per check."""

    def __init__(
        self,
        config: DeploymentConfig,
        aws_clients: Mapping[str, Any],
        *,
        now: datetime,
        offline: bool = False,
        hf_endpoint: str = HF_ENDPOINT,
        sts: Any = None,
    ) -> None:
        self.config = config
        self.clients = aws_clients
        self.sts = sts
        self.now = now
        self.offline = offline
        self.hf_endpoint = hf_endpoint.rstrip("/")
        self.account = ""
        self.pins = for_kubernetes(config.kubernetes_version)

    def checks(self) -> list[tuple[str, Callable[[], str]]]:
        return [
            ("trn quota", self.trn_quota),
            ("trn2 offered", self.trn_offered),
            ("capacity block", self.capacity_block),
            ("kubernetes version", self.kubernetes_version),
            ("add-on versions", self.addon_versions),
            ("neuron AMI", self.neuron_ami),
            ("admin principal", self.admin_principal),
            ("models bucket", self.models_bucket),
            ("managed prometheus", self.managed_prometheus),
            ("network quotas", self.network_quotas),
            ("model revisions", self.model_revisions),
            ("node price", self.node_price),
        ]

    # --- identity: the gate --------------------------------------------------------------------------

    def identity(self) -> str:
        who = self.sts.get_caller_identity()
        self.account = who["Account"]
        return f"account {self.account}, region {self.config.region}, as {who['Arn']}"

    # --- capacity ------------------------------------------------------------------------------------

    def _quota(self, service: str, code: str, name: str) -> float:
        """The applied quota value (the default where the account never changed it), after checking that the code
        names the quota we mean."""
        sq = self.clients["service-quotas"]
        try:
            quota = sq.get_service_quota(ServiceCode=service, QuotaCode=code)["Quota"]
        except sq.exceptions.NoSuchResourceException:
            quota = sq.get_aws_default_service_quota(ServiceCode=service, QuotaCode=code)["Quota"]
        if quota.get("QuotaName", "").lower() != name.lower():
            raise Failed(
                f"Service Quotas code {service}/{code} names {quota.get('QuotaName')!r}, not {name!r}; the code in "
                "ops/preflight.py is out of date: find the quota by name in the Service Quotas console and fix it"
            )
        return float(quota["Value"])

    def trn_quota(self) -> str:
        t = self.config.trn2_nodes
        if t.capacity_type == "CAPACITY_BLOCK":
            raise Skipped(f"the node group runs in Capacity Block {t.capacity_reservation_id} (checked below)")
        needed = t.max_size * t.instance.vcpus
        value = self._quota(*TRN_QUOTA)
        _, code, name = TRN_QUOTA
        if value < needed:
            raise Failed(
                f"quota {name!r} in {self.config.region} is {value:g} vCPUs, but trn2_nodes.max_size={t.max_size} x "
                f"{t.instance_type} ({t.instance.vcpus} vCPUs) needs {needed}; request at least {needed} in the Service "
                f"Quotas console (Amazon EC2, {code}), or use a Capacity Block (trn2_nodes.capacity_type)"
            )
        return f"{name} quota {value:g} vCPUs >= {needed} the node group needs (other running Trn instances count too)"

    def trn_offered(self) -> str:
        t, zone = self.config.trn2_nodes, self.config.trn2_availability_zone
        pages = (
            self.clients["ec2"]
            .get_paginator("describe_instance_type_offerings")
            .paginate(
                LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": [t.instance_type]}]
            )
        )
        zones = sorted({o["Location"] for page in pages for o in page["InstanceTypeOfferings"]})
        if zone not in zones:
            where = f"it is offered in {', '.join(zones)}" if zones else f"no zone of {self.config.region} offers it"
            fix = (
                "set trn2_nodes.availability_zone to one of those (and list it in network.availability_zones)"
                if zones
                else "choose a region that offers it (config region)"
            )
            raise Failed(f"{t.instance_type} is not offered in {zone}; {where}; {fix}")
        return f"{t.instance_type} offered in {zone}"

    def capacity_block(self) -> str:
        t = self.config.trn2_nodes
        if t.capacity_type != "CAPACITY_BLOCK":
            raise Skipped("trn2_nodes.capacity_type is ON_DEMAND")
        ec2 = self.clients["ec2"]
        try:
            (block,) = ec2.describe_capacity_reservations(CapacityReservationIds=[t.capacity_reservation_id])[
                "CapacityReservations"
            ]
        except aws.errors() as err:
            if aws.error_code(err) not in (
                "InvalidCapacityReservationId.NotFound",
                "InvalidCapacityReservationId.Malformed",
            ):
                raise
            raise Failed(
                f"Capacity Block {t.capacity_reservation_id} does not exist in account {self.account}, region "
                f"{self.config.region}; check trn2_nodes.capacity_reservation_id and the config's region"
            ) from None
        name, state = t.capacity_reservation_id, block["State"]
        start, end = block.get("StartDate"), block["EndDate"]
        problems = _block_problems(self.config, block, self.now)
        if problems:
            raise Failed(f"Capacity Block {name}: " + "; ".join(problems))
        # EC2 user guide, "Capacity Blocks": payment-pending until the upfront fee is processed, then scheduled until
        # its start date, then active; no instance launches before it is active.
        usable = (
            f"from {start.isoformat()}, in {_minutes(start - self.now)} minutes" if start and start > self.now else ""
        )
        if state == "payment-pending":
            raise Wait(
                f"Capacity Block {name} is payment-pending: EC2 is processing its upfront fee (usually minutes); it is "
                f"usable {usable or 'once that clears'}: run make preflight again then"
            )
        if state == "scheduled" or usable:
            raise Wait(
                f"Capacity Block {name} is {state} in {block['AvailabilityZone']}, usable {usable or 'soon'}: no node "
                "can launch before then, so run make deploy after it starts"
            )
        return f"Capacity Block {name} {state} in {block['AvailabilityZone']} until {end.isoformat()}"

    def node_price(self) -> str:
        """The node's hourly price from AWS (ops/price.py), which reports use while the config sets none; a price AWS
        does not give is a skip with what to set, never a failure: it blocks nothing."""
        t = self.config.trn2_nodes
        if t.hourly_price_usd is not None:
            raise Skipped(f"trn2_nodes.hourly_price_usd={t.hourly_price_usd:g} is set in the config, and wins")
        try:
            price = price_of(self.config, self.clients["ec2"], self.clients["pricing"])
        except PriceUnknown as err:
            raise Skipped(str(err)) from None
        except aws.errors() as err:  # a price is for reports: nothing the deploy needs waits on it
            raise Skipped(
                f"no price from AWS ({aws.error_code(err) or type(err).__name__}); set trn2_nodes.hourly_price_usd to see cost"
            ) from None
        return (
            f"{t.instance_type}: ${price.usd_per_hour:,.2f} per node-hour ({price.source}); make bench and the sweep "
            "price tokens with it while trn2_nodes.hourly_price_usd is unset"
        )

    # --- versions ------------------------------------------------------------------------------------

    def kubernetes_version(self) -> str:
        version = self.config.kubernetes_version
        offered = self.clients["eks"].describe_cluster_versions(clusterVersions=[version], includeAll=True)
        found = [v for v in offered["clusterVersions"] if v["clusterVersion"] == version]
        if not found or found[0].get("versionStatus") == "UNSUPPORTED":
            raise Failed(
                f"EKS in {self.config.region} does not offer Kubernetes {version} for new clusters; set "
                "kubernetes_version to a version that `aws eks describe-cluster-versions` lists (config/kubernetes.py "
                "names the ones this project supports)"
            )
        v = found[0]
        status = v.get("versionStatus", v.get("status", "?"))
        end = v.get("endOfStandardSupportDate")
        until = f", standard support until {end.date().isoformat()}" if end else ""
        extra = " (extended support costs more per cluster-hour)" if status == "EXTENDED_SUPPORT" else ""
        return f"Kubernetes {version}: {status}{until}{extra}"

    def addon_versions(self) -> str:
        version = self.config.kubernetes_version
        paginator = self.clients["eks"].get_paginator("describe_addon_versions")
        missing = []
        for name, pin in self.pins.addons.items():
            offered, default = [], None
            for page in paginator.paginate(addonName=name, kubernetesVersion=version):
                for addon in page["addons"]:
                    for v in addon["addonVersions"]:
                        offered.append(v["addonVersion"])
                        if any(c.get("defaultVersion") for c in v.get("compatibilities", [])):
                            default = v["addonVersion"]
            if pin.version not in offered:
                newest = default or (offered[0] if offered else None)
                hint = f"EKS offers e.g. {newest}" if newest else "EKS offers no version of it"
                missing.append(f"{name} {pin.version} ({hint})")
        if missing:
            raise Failed(
                f"not offered for Kubernetes {version} in {self.config.region}: {'; '.join(missing)}; set an offered "
                f"version in config/versions.py ADDONS[{version!r}] with its source"
            )
        return f"all {len(self.pins.addons)} pinned add-on versions are offered for Kubernetes {version}"

    def neuron_ami(self) -> str:
        name = NEURON_AMI_PARAMETER.format(k8s=self.config.kubernetes_version)
        ssm = self.clients["ssm"]
        try:
            release = ssm.get_parameter(Name=name)["Parameter"]["Value"]
        except ssm.exceptions.ParameterNotFound:
            raise Failed(
                f"no EKS-optimized AL2023 Neuron AMI for Kubernetes {self.config.kubernetes_version} in "
                f"{self.config.region} (SSM public parameter {name} does not exist); choose another region or "
                "kubernetes_version"
            ) from None
        pinned = self.config.trn2_nodes.ami_release_version
        used = pinned or release
        driver = ami_driver(used.rsplit("-", 1)[-1])
        known = (
            f"Neuron driver {driver_text(driver)}"
            if driver
            else "its Neuron driver is not in config/neuron_ami.py: read its release notes (awslabs/amazon-eks-ami) "
            "and add a row"
        )
        if pinned and pinned != release:
            return f"pinned release {pinned} ({known}); the newest is {release}"
        return f"release {release} ({known})"

    # --- identity and names --------------------------------------------------------------------------

    def admin_principal(self) -> str:
        arn = self.config.admin_principal_arn
        if self.config.admin_is_placeholder:
            raise Failed(
                f"admin_principal_arn is the placeholder {arn}; set it to your IAM role or user ARN (make deploy "
                "refuses the placeholder)"
            )
        account, resource = arn.split(":")[4], arn.split(":", 5)[5]
        kind, name = resource.split("/")[0], resource.rsplit("/", 1)[-1]
        if account != self.account:
            raise Skipped(
                f"{arn} is in account {account}, the credentials are for {self.account}: not visible from here"
            )
        iam = self.clients["iam"]
        try:
            if kind == "role":
                iam.get_role(RoleName=name)
            else:
                iam.get_user(UserName=name)
        except iam.exceptions.NoSuchEntityException:
            raise Failed(
                f"admin_principal_arn {arn}: IAM {kind} {name} does not exist in account {account}; create it or set "
                "admin_principal_arn to an existing role or user (the EKS access entry needs it)"
            ) from None
        return f"IAM {kind} {name} exists"

    def models_bucket(self) -> str:
        bucket = self.config.models_bucket_name(self.account)
        try:
            self.clients["s3"].head_bucket(Bucket=bucket, ExpectedBucketOwner=self.account)
        except aws.errors() as err:
            status = aws.http_status(err)
            if status == 404:
                return f"{bucket} is free"
            if status == 403:
                raise Failed(
                    f"bucket name {bucket} is taken by another account, or yours denies these credentials (HeadBucket "
                    f"with ExpectedBucketOwner={self.account} answered 403); bucket names are global: change the "
                    "config's name, or use credentials that may read the bucket"
                ) from None
            raise
        stack = self.config.stack_names["models"]
        if not self._stack_exists(stack):
            raise Failed(
                f"bucket {bucket} exists in your account but stack {stack} does not own it (left by an earlier "
                "deployment with bucket.retain_on_delete?); CloudFormation cannot create it again: empty and delete it, "
                "or change the config's name"
            )
        return f"{bucket} exists and belongs to stack {stack}"

    def _stack_exists(self, name: str) -> bool:
        cfn = self.clients["cloudformation"]
        try:
            stacks = cfn.describe_stacks(StackName=name)["Stacks"]
        except aws.errors() as err:
            if aws.error_code(err) == "ValidationError":  # "Stack with id ... does not exist"
                return False
            raise
        return any(s["StackStatus"] != "DELETE_COMPLETE" for s in stacks)

    def managed_prometheus(self) -> str:
        import boto3

        region = self.config.region
        regions = boto3.session.Session().get_available_regions("amp")
        if region not in regions:
            raise Failed(
                f"Amazon Managed Service for Prometheus (the scaling metrics store) is not offered in {region} "
                f"(botocore's endpoint list); choose a region among: {', '.join(sorted(regions))}"
            )
        self.clients["amp"].list_workspaces(maxResults=1)
        return f"Amazon Managed Service for Prometheus answers in {region}"

    def network_quotas(self) -> str:
        ec2, net = self.clients["ec2"], self.config.network
        problems, seen = [], []
        vpcs = sum(len(p["Vpcs"]) for p in ec2.get_paginator("describe_vpcs").paginate())
        vpc_quota = self._quota(*VPC_QUOTA)
        if vpcs + 1 > vpc_quota:
            problems.append(f"{vpcs} VPCs of {vpc_quota:g} ({VPC_QUOTA[1]}) leave no room for one more")
        seen.append(f"VPCs {vpcs}+1/{vpc_quota:g}")
        addresses = len(ec2.describe_addresses()["Addresses"])
        eip_quota = self._quota(*EIP_QUOTA)
        if addresses + net.nat_gateways > eip_quota:
            problems.append(
                f"{addresses} Elastic IPs of {eip_quota:g} ({EIP_QUOTA[1]}) leave no room for "
                f"network.nat_gateways={net.nat_gateways}"
            )
        seen.append(f"Elastic IPs {addresses}+{net.nat_gateways}/{eip_quota:g}")
        nat_quota = self._quota(*NAT_QUOTA)
        pages = ec2.get_paginator("describe_nat_gateways").paginate(
            Filters=[{"Name": "state", "Values": ["pending", "available"]}]
        )
        subnets = [g["SubnetId"] for p in pages for g in p["NatGateways"]]
        zone_of = (
            {
                s["SubnetId"]: s["AvailabilityZone"]
                for s in ec2.describe_subnets(SubnetIds=sorted(set(subnets)))["Subnets"]
            }
            if subnets
            else {}
        )
        by_zone = Counter(zone_of[s] for s in subnets)
        # CDK puts the NAT gateways in the public subnets of the first nat_gateways zones.
        for zone in net.availability_zones[: net.nat_gateways]:
            if by_zone[zone] + 1 > nat_quota:
                problems.append(f"{zone} has {by_zone[zone]} NAT gateways of {nat_quota:g} ({NAT_QUOTA[1]})")
        seen.append(f"NAT gateways per zone quota {nat_quota:g}")
        if problems:
            raise Failed(
                "; ".join(problems) + "; delete unused ones or request an increase in the Service Quotas console"
            )
        return ", ".join(seen)

    # --- Hugging Face --------------------------------------------------------------------------------

    def model_revisions(self) -> str:
        if self.offline:
            raise Skipped("--offline (checked again when make stage downloads them)")
        token = os.environ.get("HF_TOKEN")
        problems = []
        keys = self.config.models_in_use()
        for key in keys:
            model = self.config.models[key]
            # huggingface_hub's model_info: GET {endpoint}/api/models/{repo_id}/revision/{revision}
            url = f"{self.hf_endpoint}/api/models/{model.hf_id}/revision/{urllib.parse.quote(model.revision, safe='')}"
            request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
            try:
                with urllib.request.urlopen(request, timeout=HF_TIMEOUT_S) as answer:
                    sha = json.loads(answer.read()).get("sha")
                if sha and sha != model.revision:
                    problems.append(f"models.{key}: {model.hf_id} answered revision {sha}, not {model.revision}")
            except urllib.error.HTTPError as err:
                if err.code == 404:
                    problems.append(
                        f"models.{key}: {model.hf_id} has no revision {model.revision} (404); pin a commit from the "
                        "model's history on Hugging Face"
                    )
                elif err.code in (401, 403):
                    problems.append(
                        f"models.{key}: {model.hf_id} is gated or private ({err.code}); accept its licence and set "
                        "HF_TOKEN (and the cluster's hf-token secret, README Day 2)"
                    )
                else:
                    problems.append(f"models.{key}: Hugging Face answered {err.code} for {model.hf_id}")
            except (urllib.error.URLError, TimeoutError, OSError) as err:
                reason = getattr(err, "reason", err)
                raise Failed(
                    f"Hugging Face ({self.hf_endpoint}) did not answer within {HF_TIMEOUT_S:g} s ({reason}); check the "
                    "network, or run with PREFLIGHT_ARGS=--offline to skip this check"
                ) from None
        if problems:
            raise Failed("; ".join(problems))
        return f"{len(keys)} pinned revisions exist on Hugging Face"

    # --- running them --------------------------------------------------------------------------------

    def run(self, deadline_s: float = DEADLINE_S, started: float | None = None) -> list[Result]:
        """The identity first (nothing else means anything without it), then every other check side by side; a
        check still waiting at the deadline (deadline_s after `started`, a time.monotonic()) is reported as such."""
        t_end = (time.monotonic() if started is None else started) + deadline_s
        (identity,) = _run_all([("credentials", self.identity)], t_end, deadline_s)
        if identity.status != OK:
            why = "no account to check against: fix the credentials first"
            return [identity, *(Result(name, SKIPPED, why) for name, _ in self.checks())]
        return [identity, *_run_all(self.checks(), t_end, deadline_s)]


def _block_problems(config: DeploymentConfig, block: Mapping[str, Any], now: datetime) -> list[str]:
    """Why a Capacity Block (as DescribeCapacityReservations returns it) cannot run the config's trn2 nodes."""
    t, problems = config.trn2_nodes, []
    state, end, count = block["State"], block["EndDate"], block["TotalInstanceCount"]
    if state in BAD_BLOCK_STATES:
        problems.append(f"its state is {state!r}: buy a new block and set trn2_nodes.capacity_reservation_id")
    if block["InstanceType"] != t.instance_type:
        problems.append(f"it holds {block['InstanceType']}, the config asks for {t.instance_type}")
    if block["AvailabilityZone"] != t.availability_zone:
        problems.append(
            f"it is in {block['AvailabilityZone']}, trn2_nodes.availability_zone is {t.availability_zone}: set it "
            "to the block's zone"
        )
    if t.capacity_block_instances is not None and count != t.capacity_block_instances:
        problems.append(
            f"it holds {count} instances, trn2_nodes.capacity_block_instances is {t.capacity_block_instances}: set it "
            f"to {count}"
        )
    if count < t.max_size:
        problems.append(f"it holds {count} instances, trn2_nodes.max_size is {t.max_size}: lower max_size")
    if end - now <= timedelta(minutes=LAST_MINUTES):
        left = "ended" if end <= now else f"ends in {_minutes(end - now)} minutes"
        problems.append(f"it {left} ({end.isoformat()}), and EC2 reclaims its nodes from 40 minutes before the end")
    if t.capacity_block_end is not None and t.capacity_block_end != end:
        problems.append(
            f"trn2_nodes.capacity_block_end is {t.capacity_block_end.isoformat()}: set it to {end.isoformat()}"
        )
    return problems


def _minutes(delta: timedelta) -> int:
    return int(delta.total_seconds() // 60)


def _outcome(name: str, check: Callable[[], str]) -> Result:
    """A check's Result: its text, its Failed/Skipped sentence, or an AWS error as a sentence."""
    try:
        return Result(name, OK, check())
    except Failed as err:
        return Result(name, FAIL, str(err))
    except Skipped as err:
        return Result(name, SKIPPED, str(err))
    except Wait as err:
        return Result(name, WAIT, str(err))
    except aws.errors() as err:
        return Result(name, FAIL, _aws_sentence(name, err))
    except _response_parser_error() as err:
        return Result(name, FAIL, f"the endpoint's answer is not AWS's ({_shown(err)}); {aws.NETWORK_FIX}")
    except Exception as err:  # a bug or an answer of a shape not foreseen: still one line, the others still run
        return Result(name, FAIL, f"the check itself failed ({type(err).__name__}: {err}); report it with this line")


def _aws_sentence(name: str, err: BaseException) -> str:
    from botocore.exceptions import NoCredentialsError, NoRegionError

    if isinstance(err, NoCredentialsError):
        return (
            "no AWS credentials found (environment, ~/.aws, SSO cache); run `aws configure` or `aws sso login`, or set "
            "AWS_PROFILE, then make preflight again"
        )
    if isinstance(err, NoRegionError):
        return "no AWS region; set region in the config"
    from botocore.exceptions import ClientError

    if isinstance(err, ClientError):
        error = err.response.get("Error", {})
        code, message = error.get("Code") or aws.http_status(err), _shown(error.get("Message", ""))
        what = f"AWS answered {code}" + (f": {message}" if message else "")
        if aws.error_code(err) in ("ExpiredToken", "ExpiredTokenException", "RequestExpired"):
            return f"the AWS credentials have expired ({what}); log in again (aws sso login, or new keys), then make preflight"
        return f"{name} check: {what}; fix that and run make preflight again"
    if aws.error_code(err) in ("ExpiredToken", "ExpiredTokenException", "RequestExpired"):
        return (
            f"the AWS credentials have expired ({err}); log in again (aws sso login, or new keys), then make preflight"
        )
    return str(aws.failure(f"{name} check", err, "fix that and run make preflight again"))


MESSAGE_MAX = 200  # characters of an AWS error message shown on a line


def _shown(err: object) -> str:
    """An error message fit for one line: a body (an HTML page of a proxy, raw bytes) is named, not shown."""
    text = " ".join(str(err).split())
    if "<html" in text.lower() or "<!doctype" in text.lower() or "b'" in text or 'b"' in text:
        return "a body that is not an AWS error, not shown"
    return text if len(text) <= MESSAGE_MAX else text[: MESSAGE_MAX - 3] + "..."


def _response_parser_error() -> type[Exception]:
    from botocore.parsers import ResponseParserError

    return ResponseParserError


def _run_all(checks: list[tuple[str, Callable[[], str]]], t_end: float, deadline_s: float) -> list[Result]:
    """Each check in a daemon thread; wait until all are done or the deadline passes. A thread still blocked in a
    socket read at the deadline is abandoned (daemon): the process ends without it."""
    results: dict[str, Result] = {}
    threads = []
    for name, check in checks:
        thread = threading.Thread(target=lambda n=name, c=check: results.__setitem__(n, _outcome(n, c)), daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join(max(0.0, t_end - time.monotonic()))
    late = f"no answer before the preflight's {deadline_s:g} s deadline; {aws.NETWORK_FIX}, then make preflight again"
    return [results.get(name) or Result(name, FAIL, late) for name, _ in checks]


def main(argv: list[str] | None = None, *, stream: TextIO | None = None) -> int:
    out = stream or sys.stdout
    parser = argparse.ArgumentParser(prog="python -m ops.preflight", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=None, help="deployment config file (default: config/default.yaml)")
    parser.add_argument("--offline", action="store_true", help="skip the Hugging Face revision check")
    parser.add_argument("--hf-endpoint", default=os.environ.get("HF_ENDPOINT", HF_ENDPOINT), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return EXIT_USAGE
    try:
        preflight = Preflight(
            config,
            clients(config.region, sys.stderr),
            sts=aws.client("sts", config.region, stream=sys.stderr),
            now=datetime.now(UTC),
            offline=args.offline or os.environ.get("HF_HUB_OFFLINE") == "1",
            hf_endpoint=args.hf_endpoint,
        )
        results = preflight.run(DEADLINE_S, started)
    except CommandError as err:  # the AWS environment (profile, config file, credentials, endpoint): cloud/aws.py
        print(f"preflight: {err}; nothing was checked", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("preflight: interrupted; nothing was changed, run make preflight again", file=sys.stderr)
        return EXIT_INTERRUPTED
    for result in results:
        print(result.line(), file=out, flush=True)
    failed = [r for r in results if r.status == FAIL]
    waiting = [r for r in results if r.status == WAIT]
    print(
        f"preflight: {len(results) - len(failed) - len(waiting)} of {len(results)} checks passed or skipped in "
        f"{time.monotonic() - started:.1f} s"
        + ("; fix each FAIL above before make deploy" if failed else "")
        + ("; make deploy once each wait above is over" if waiting else ""),
        file=out,
    )
    if results[0].status == FAIL:
        return EXIT_USAGE  # no usable credentials: the environment, not the account
    return EXIT_FAILED if failed or waiting else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
