"""make preflight against the nearest real thing: moto's server on loopback where moto implements the call (STS, EC2
offerings and network objects, IAM, S3, CloudFormation, AMP, Service Quotas' VPC quotas), botocore's Stubber where it
does not (EKS versions, EC2 Capacity Reservations and quotas, the SSM public parameter): the Stubber checks every
request and response against botocore's own service model. Hugging Face: a real HTTP server on loopback."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.stub import Stubber

from cloud import aws as config_aws
from config import DeploymentConfig, parse_config
from config.exit_codes import EXIT_USAGE
from config.versions import ADDONS
from ops import preflight
from ops.preflight import FAIL, OK, SKIPPED, Failed, Preflight, Skipped
from tests.conftest import MOTO_ACCOUNT, ROOT, default_config_dict
from tests.silent_endpoint import silent_server

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
REGION = "us-east-2"


def config_with(**trn2: Any) -> DeploymentConfig:
    data = default_config_dict()
    data["admin_principal_arn"] = f"arn:aws:iam::{MOTO_ACCOUNT}:role/deployer"
    data["trn2_nodes"].update(trn2)
    return parse_config(data)


def capacity_block_config(**extra: Any) -> DeploymentConfig:
    """A one-instance block whose ceiling is its size (a block cannot grow past its reservation)."""
    return config_with(
        **{
            "capacity_type": "CAPACITY_BLOCK",
            "capacity_reservation_id": "cr-0123456789abcdef0",
            "availability_zone": "us-east-2b",
            "capacity_block_instances": 1,
            "max_size": 1,
            **extra,
        }
    )


def make(config: DeploymentConfig, **stubbed: Any) -> Preflight:
    """Bounded clients (cloud/aws.py) on the moto endpoint, with `stubbed` services replaced."""
    clients = {**preflight.clients(REGION, sys.stderr), **stubbed}  # the command's own clients, some replaced
    checker = Preflight(config, clients, sts=config_aws.client("sts", REGION), now=NOW, offline=True)
    checker.account = MOTO_ACCOUNT
    return checker


@pytest.fixture
def stub() -> Iterator[Any]:
    """stub(service) -> (client, Stubber): a bounded client whose answers the test gives; all must be used."""
    stubbers: list[Stubber] = []

    def make_stub(service: str) -> tuple[Any, Stubber]:
        client = config_aws.s3_client(REGION, None) if service == "s3" else config_aws.client(service, REGION)
        stubber = Stubber(client)
        stubber.activate()
        stubbers.append(stubber)
        return client, stubber

    yield make_stub
    for stubber in stubbers:
        stubber.assert_no_pending_responses()
        stubber.deactivate()


def quota(service: str, code: str, name: str, value: float) -> dict[str, Any]:
    return {"Quota": {"ServiceCode": service, "QuotaCode": code, "QuotaName": name, "Value": value}}


@contextmanager
def loopback_http(answer: Callable[[str], tuple[int, str, bytes]]) -> Iterator[str]:
    """A loopback HTTP server answering every GET and POST with answer(path) = (status, content type, body); yields
    its URL (port 0: nothing can take it between choosing and binding)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            status, content_type, body = answer(self.path)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# --- credentials -------------------------------------------------------------------------------------------


def test_identity_names_the_account_and_region(aws_env):
    checker = make(config_with())
    assert checker.identity().startswith(f"account {MOTO_ACCOUNT}, region us-east-2, as arn:aws:")


def preflight_without_credentials(tmp_path, **setting: str) -> subprocess.CompletedProcess[str]:
    """`python -m ops.preflight --offline` with no AWS variable, config file, credentials file or instance metadata,
    but `setting`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    return subprocess.run(
        [sys.executable, "-m", "ops.preflight", "--offline"],
        cwd=ROOT,
        env=env | setting,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_without_credentials_one_sentence_and_the_usage_exit_code(tmp_path):
    done = preflight_without_credentials(tmp_path)
    assert done.returncode == EXIT_USAGE
    assert "Traceback" not in done.stdout + done.stderr
    first, *rest = done.stdout.splitlines()
    assert first.startswith("FAIL    credentials: no AWS credentials found") and "aws configure" in first
    assert all(line.startswith("skipped") for line in rest[:-1]) and len(rest) == len(make_names()) + 1


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        (
            {"AWS_PROFILE": "nope"},
            "preflight: AWS_PROFILE='nope' names no profile in the AWS config or credentials files",
        ),
        ({"AWS_CONFIG_FILE": "{bad}"}, "preflight: the AWS config file {bad} cannot be parsed"),
        ({"AWS_ENDPOINT_URL": "not-a-url"}, "preflight: AWS_ENDPOINT_URL='not-a-url' is not a usable endpoint URL"),
        ({"AWS_ENDPOINT_URL_EKS": "http://[::1"}, "preflight: AWS_ENDPOINT_URL_EKS='http://[::1' is not a usable"),
        ({"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE"}, "preflight: partial AWS credentials in env: AWS_SECRET_ACCESS_KEY is"),
    ],
)
def test_a_broken_aws_environment_is_one_line_naming_the_variable_or_file(tmp_path, setting, said):
    """botocore reads these while it makes a client, before any check runs: one line and exit 2, never a traceback."""
    bad = tmp_path / "config"
    bad.write_text("[default\nregion = us-east-2\n")
    done = preflight_without_credentials(tmp_path, **{k: v.format(bad=bad) for k, v in setting.items()})
    assert done.returncode == EXIT_USAGE, done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(said.format(bad=bad)), done.stderr


def make_names() -> list[str]:
    return [name for name, _ in Preflight(config_with(), {}, now=NOW).checks()]


def test_a_silent_endpoint_ends_at_the_deadline_with_a_sentence(silent_aws, monkeypatch):
    """The real run against an endpoint that accepts and never answers: at the deadline, a sentence, not a hang
    (perf/preflight_silent.py times the shipped 30 s deadline with the shipped timeouts)."""
    out = io.StringIO()
    monkeypatch.setattr(preflight, "DEADLINE_S", 0.5)
    code = preflight.main(["--offline"], stream=out)
    lines = out.getvalue().splitlines()
    assert code == EXIT_USAGE
    assert lines[0].startswith(
        "FAIL    credentials: no answer before the preflight's 0.5 s deadline; check the network"
    )


# --- capacity ----------------------------------------------------------------------------------------------


def test_trn_quota_below_what_the_node_group_needs_fails_naming_both(stub):
    sq, s = stub("service-quotas")
    s.add_response("get_service_quota", quota("ec2", "L-2C3B7624", "Running On-Demand Trn instances", 96.0))
    with pytest.raises(Failed, match=r"is 96 vCPUs, but trn2_nodes.max_size=2 x trn2.48xlarge \(192 vCPUs\) needs 384"):
        make(config_with(), **{"service-quotas": sq}).trn_quota()


def test_trn_quota_falls_back_to_the_default_and_passes(stub):
    sq, s = stub("service-quotas")
    s.add_client_error("get_service_quota", "NoSuchResourceException", http_status_code=404)
    s.add_response("get_aws_default_service_quota", quota("ec2", "L-2C3B7624", "Running On-Demand Trn instances", 384))
    assert (
        make(config_with(), **{"service-quotas": sq})
        .trn_quota()
        .startswith("Running On-Demand Trn instances quota 384")
    )


def test_a_quota_code_that_names_another_quota_is_a_sentence(stub):
    sq, s = stub("service-quotas")
    s.add_response("get_service_quota", quota("ec2", "L-2C3B7624", "Running On-Demand Inf instances", 999))
    with pytest.raises(Failed, match="names 'Running On-Demand Inf instances', not 'Running On-Demand Trn instances'"):
        make(config_with(), **{"service-quotas": sq}).trn_quota()


def test_trn_quota_does_not_apply_to_a_capacity_block():
    with pytest.raises(Skipped, match="Capacity Block cr-0123456789abcdef0"):
        make(capacity_block_config()).trn_quota()


def test_trn2_offered_in_the_configured_zone(aws_env):
    assert make(config_with()).trn_offered() == "trn2.48xlarge offered in us-east-2a"


def test_a_region_without_trn2_fails_naming_the_region(aws_env):
    """moto's offerings data (taken from EC2) has trn2.48xlarge in no zone of us-west-2."""
    data = default_config_dict()
    data["region"] = "us-west-2"
    data["network"]["availability_zones"] = ["us-west-2a", "us-west-2b", "us-west-2c"]
    checker = make(parse_config(data), ec2=config_aws.client("ec2", "us-west-2"))
    with pytest.raises(Failed, match=r"not offered in us-west-2a; no zone of us-west-2 offers it; choose a region"):
        checker.trn_offered()


def test_trn2_not_offered_in_the_zone_names_the_zones_that_offer_it(stub):
    ec2, s = stub("ec2")
    offers = [
        {"InstanceType": "trn2.48xlarge", "LocationType": "availability-zone", "Location": z}
        for z in ("us-east-2a", "us-east-2b")
    ]
    s.add_response(
        "describe_instance_type_offerings",
        {"InstanceTypeOfferings": offers},
        {"LocationType": "availability-zone", "Filters": [{"Name": "instance-type", "Values": ["trn2.48xlarge"]}]},
    )
    with pytest.raises(
        Failed, match=r"not offered in us-east-2c; it is offered in us-east-2a, us-east-2b; set trn2_nodes"
    ):
        make(config_with(availability_zone="us-east-2c"), ec2=ec2).trn_offered()


def block(**over: Any) -> dict[str, Any]:
    answer = {
        "CapacityReservationId": "cr-0123456789abcdef0",
        "InstanceType": "trn2.48xlarge",
        "AvailabilityZone": "us-east-2b",
        "TotalInstanceCount": 1,
        "State": "active",
        "StartDate": NOW - timedelta(hours=1),
        "EndDate": NOW + timedelta(days=2),
        "ReservationType": "capacity-block",
    }
    return {"CapacityReservations": [answer | over]}


def test_an_active_capacity_block_in_the_zone_passes(stub):
    ec2, s = stub("ec2")
    s.add_response("describe_capacity_reservations", block(), {"CapacityReservationIds": ["cr-0123456789abcdef0"]})
    assert (
        make(capacity_block_config(), ec2=ec2).capacity_block().startswith("Capacity Block cr-0123456789abcdef0 active")
    )


@pytest.mark.parametrize(
    ("answer", "sentence"),
    [
        (block(AvailabilityZone="us-east-2a"), "it is in us-east-2a, trn2_nodes.availability_zone is us-east-2b"),
        (block(EndDate=NOW + timedelta(minutes=30)), "it ends in 30 minutes"),
        (block(State="expired", EndDate=NOW - timedelta(hours=1)), "its state is 'expired'"),
        (block(InstanceType="trn2.3xlarge"), "it holds trn2.3xlarge"),
        (block(TotalInstanceCount=2), "it holds 2 instances, trn2_nodes.capacity_block_instances is 1: set it to 2"),
    ],
)
def test_a_capacity_block_that_cannot_run_the_node_fails_with_why(stub, answer, sentence):
    ec2, s = stub("ec2")
    s.add_response("describe_capacity_reservations", answer)
    with pytest.raises(Failed, match=sentence.replace("(", r"\(").replace("+", r"\+")):
        make(capacity_block_config(), ec2=ec2).capacity_block()


@pytest.mark.parametrize(
    ("answer", "sentence"),
    [
        (
            block(State="scheduled", StartDate=NOW + timedelta(hours=3)),
            "is scheduled in us-east-2b, usable from 2026-11-26T15:00:00+00:00, in 180 minutes: no node can launch",
        ),
        (
            block(State="payment-pending", StartDate=NOW + timedelta(hours=3)),
            "is payment-pending: EC2 is processing its upfront fee (usually minutes); it is usable from "
            "2026-11-26T15:00:00+00:00, in 180 minutes",
        ),
        (
            block(State="payment-pending"),
            "is payment-pending: EC2 is processing its upfront fee (usually minutes); it is usable once that clears",
        ),
    ],
)
def test_a_capacity_block_bought_and_not_yet_usable_is_a_wait_not_a_failure(stub, answer, sentence):
    """A block just bought is not a reason to buy another: it says what it is and from when it can be used."""
    ec2, s = stub("ec2")
    s.add_response("describe_capacity_reservations", answer)
    with pytest.raises(preflight.Wait) as said:
        make(capacity_block_config(), ec2=ec2).capacity_block()
    assert sentence in str(said.value) and "buy" not in str(said.value)
    assert preflight._outcome("capacity block", lambda: make(capacity_block_config(), ec2=ec2).capacity_block())


def test_a_payment_failed_block_still_fails(stub):
    ec2, s = stub("ec2")
    s.add_response("describe_capacity_reservations", block(State="payment-failed"))
    with pytest.raises(Failed, match="its state is 'payment-failed': buy a new block"):
        make(capacity_block_config(), ec2=ec2).capacity_block()


def test_a_capacity_block_end_other_than_the_configs_fails(stub):
    ec2, s = stub("ec2")
    s.add_response("describe_capacity_reservations", block())
    config = capacity_block_config(capacity_block_end="2026-11-27T11:30:00Z")
    with pytest.raises(Failed, match="capacity_block_end is 2026-11-27T11:30:00"):
        make(config, ec2=ec2).capacity_block()


def test_an_unknown_capacity_block_is_a_sentence(stub):
    ec2, s = stub("ec2")
    s.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound", http_status_code=400)
    with pytest.raises(Failed, match="does not exist in account"):
        make(capacity_block_config(), ec2=ec2).capacity_block()


# --- versions ----------------------------------------------------------------------------------------------


def test_kubernetes_version_in_standard_support_passes(stub):
    eks, s = stub("eks")
    s.add_response(
        "describe_cluster_versions",
        {"clusterVersions": [{"clusterVersion": "1.35", "versionStatus": "STANDARD_SUPPORT"}]},
        {"clusterVersions": ["1.35"], "includeAll": True},
    )
    assert make(config_with(), eks=eks).kubernetes_version() == "Kubernetes 1.35: STANDARD_SUPPORT"


def test_kubernetes_version_not_offered_fails(stub):
    eks, s = stub("eks")
    s.add_response("describe_cluster_versions", {"clusterVersions": []})
    with pytest.raises(Failed, match=r"does not offer Kubernetes 1\.35"):
        make(config_with(), eks=eks).kubernetes_version()


def addon_answer(name: str, *versions: str) -> dict[str, Any]:
    return {
        "addons": [
            {
                "addonName": name,
                "addonVersions": [
                    {"addonVersion": v, "compatibilities": [{"clusterVersion": "1.35", "defaultVersion": i == 0}]}
                    for i, v in enumerate(versions)
                ],
            }
        ]
    }


def test_every_pinned_addon_offered_passes(stub):
    eks, s = stub("eks")
    for name, pin in ADDONS["1.35"].items():
        s.add_response("describe_addon_versions", addon_answer(name, "v9.9.9-eksbuild.1", pin.version))
    assert (
        make(config_with(), eks=eks).addon_versions() == "all 6 pinned add-on versions are offered for Kubernetes 1.35"
    )


def test_an_addon_version_not_offered_names_it_and_what_is(stub):
    eks, s = stub("eks")
    for name, pin in ADDONS["1.35"].items():
        offered = ("v1.14.9-eksbuild.1",) if name == "coredns" else (pin.version,)
        s.add_response("describe_addon_versions", addon_answer(name, *offered))
    pinned = ADDONS["1.35"]["coredns"].version
    with pytest.raises(Failed, match=f"coredns {pinned} \\(EKS offers e.g. v1.14.9-eksbuild.1\\)"):
        make(config_with(), eks=eks).addon_versions()


def test_the_neuron_ami_release_and_its_driver(stub):
    ssm, s = stub("ssm")
    name = "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/neuron/recommended/release_version"
    s.add_response("get_parameter", {"Parameter": {"Name": name, "Value": "1.35.6-20260714"}}, {"Name": name})
    assert make(config_with(), ssm=ssm).neuron_ami() == "release 1.35.6-20260714 (Neuron driver 2.29.0.0)"


def test_no_neuron_ami_for_the_version_fails(stub):
    ssm, s = stub("ssm")
    s.add_client_error("get_parameter", "ParameterNotFound", http_status_code=400)
    with pytest.raises(Failed, match=r"no EKS-optimized AL2023 Neuron AMI for Kubernetes 1\.35"):
        make(config_with(), ssm=ssm).neuron_ami()


# --- names -------------------------------------------------------------------------------------------------


def test_the_admin_role_exists(aws_env):
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }
    boto3.client("iam").create_role(RoleName="deployer", AssumeRolePolicyDocument=json.dumps(trust))
    assert make(config_with()).admin_principal() == "IAM role deployer exists"


def test_a_missing_admin_role_fails(aws_env):
    with pytest.raises(Failed, match="IAM role deployer does not exist"):
        make(config_with()).admin_principal()


def test_the_placeholder_admin_fails(aws_env):
    config = parse_config(default_config_dict())
    with pytest.raises(Failed, match="is the placeholder"):
        make(config).admin_principal()


def test_a_free_bucket_name_passes(aws_env):
    assert make(config_with()).models_bucket().endswith("is free")


def test_a_bucket_of_ours_without_its_stack_fails(aws_env):
    config = config_with()
    bucket = config.models_bucket_name(MOTO_ACCOUNT)
    boto3.client("s3").create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    with pytest.raises(Failed, match="stack TrnSpecdec-Models does not own it"):
        make(config).models_bucket()


def test_a_bucket_of_ours_with_its_stack_passes(aws_env):
    config = config_with()
    bucket = config.models_bucket_name(MOTO_ACCOUNT)
    boto3.client("s3").create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}
    boto3.client("cloudformation").create_stack(StackName="TrnSpecdec-Models", TemplateBody=json.dumps(template))
    assert make(config).models_bucket().endswith("belongs to stack TrnSpecdec-Models")


def test_a_bucket_name_taken_by_another_account_fails(stub):
    s3, s = stub("s3")
    s.add_client_error("head_bucket", "403", http_status_code=403)
    with pytest.raises(Failed, match="is taken by another account"):
        make(config_with(), s3=s3).models_bucket()


@pytest.mark.parametrize(
    ("status", "code"),
    [(400, "400"), (500, "500"), (503, "SlowDown")],  # a bad request, a server error, S3's throttle
    ids=["bad request", "server error", "throttled"],
)
def test_a_bucket_answer_other_than_404_is_not_a_free_name(stub, status, code):
    """Only HeadBucket's 404 says the name is free: any other error leaves it unknown, and the check fails with
    AWS's answer instead of letting the deploy find out."""
    s3, s = stub("s3")
    s.add_client_error("head_bucket", code, http_status_code=status)
    result = preflight._outcome("models bucket", make(config_with(), s3=s3).models_bucket)
    assert result.status == FAIL and "free" not in result.text, result
    assert f"AWS answered {code}" in result.text


def test_managed_prometheus_answers_in_the_region(aws_env):
    assert make(config_with()).managed_prometheus() == "Amazon Managed Service for Prometheus answers in us-east-2"


def test_a_region_without_managed_prometheus_fails(aws_env):
    checker = make(config_with())
    checker.config = checker.config.model_copy(update={"region": "mx-nowhere-9"})
    with pytest.raises(Failed, match="not offered in mx-nowhere-9"):
        checker.managed_prometheus()


def network_quotas(s: Stubber, eips: float, vpcs: float = 5) -> None:
    s.add_response("get_service_quota", quota("vpc", "L-F678F1CE", "VPCs per Region", vpcs))
    s.add_response("get_service_quota", quota("ec2", "L-0263D0A3", "EC2-VPC Elastic IPs", eips))
    s.add_response("get_service_quota", quota("vpc", "L-FE5A380F", "NAT gateways per Availability Zone", 5))


def test_network_quotas_with_room_pass(aws_env, stub):
    """Usage from moto's EC2 (its default VPC), quotas from the Stubber (moto's Service Quotas lacks EC2's)."""
    sq, s = stub("service-quotas")
    network_quotas(s, eips=5)
    assert make(config_with(), **{"service-quotas": sq}).network_quotas().startswith("VPCs 1+1/5, Elastic IPs 0+1/5")


def test_an_account_at_its_vpc_quota_fails_and_one_below_passes(aws_env, stub):
    """The deploy creates one VPC: moto's account has its default VPC, so a quota of 1 leaves no room, 2 does."""
    sq, s = stub("service-quotas")
    network_quotas(s, eips=5, vpcs=1)
    with pytest.raises(Failed, match=r"^1 VPCs of 1 \(L-F678F1CE\) leave no room for one more; delete unused"):
        make(config_with(), **{"service-quotas": sq}).network_quotas()
    sq, s = stub("service-quotas")
    network_quotas(s, eips=5, vpcs=2)
    assert make(config_with(), **{"service-quotas": sq}).network_quotas().startswith("VPCs 1+1/2, ")


def test_elastic_ips_used_up_fail(aws_env, stub):
    ec2 = boto3.client("ec2")
    for _ in range(5):
        ec2.allocate_address(Domain="vpc")
    sq, s = stub("service-quotas")
    network_quotas(s, eips=5)
    with pytest.raises(Failed, match=r"5 Elastic IPs of 5 \(L-0263D0A3\) leave no room for network.nat_gateways=1"):
        make(config_with(), **{"service-quotas": sq}).network_quotas()


# --- Hugging Face ------------------------------------------------------------------------------------------


@pytest.fixture
def hub(default_config: DeploymentConfig) -> Iterator[str]:
    """A loopback Hugging Face API that knows the default config's pinned revisions, and nothing else."""
    known = {f"/api/models/{m.hf_id}/revision/{m.revision}": m.revision for m in default_config.models.values()}

    def answer(path: str) -> tuple[int, str, bytes]:
        sha = known.get(path)
        return (
            (200 if sha else 404),
            "application/json",
            json.dumps({"sha": sha} if sha else {"error": "Revision Not Found"}).encode(),
        )

    with loopback_http(answer) as url:
        yield url


def revisions(config: DeploymentConfig, endpoint: str) -> str:
    return Preflight(config, {}, now=NOW, hf_endpoint=endpoint).model_revisions()


def test_pinned_revisions_that_exist_pass(hub):
    assert revisions(config_with(), hub) == "2 pinned revisions exist on Hugging Face"


def test_a_revision_that_does_not_exist_fails_naming_the_model(hub):
    data = default_config_dict()
    data["models"]["qwen3-1-7b"]["revision"] = "0" * 40
    with pytest.raises(Failed, match=f"models.qwen3-1-7b: Qwen/Qwen3-1.7B has no revision {'0' * 40} \\(404\\)"):
        revisions(parse_config(data), hub)


def test_a_hub_that_never_answers_fails_within_the_timeout(monkeypatch):
    monkeypatch.setattr(preflight, "HF_TIMEOUT_S", 0.5)
    with silent_server() as port, pytest.raises(Failed, match=r"did not answer within 0\.5 s"):
        revisions(config_with(), f"http://127.0.0.1:{port}")


def test_offline_skips_the_revision_check():
    with pytest.raises(Skipped, match="--offline"):
        Preflight(config_with(), {}, now=NOW, offline=True).model_revisions()


# --- the whole run -----------------------------------------------------------------------------------------


def answer_by_operation(client: Any, event: str, answers: dict[str, Callable[[dict], dict]]) -> None:
    """Answers chosen by what a call asks, not by call order: checks run side by side on one client, so a Stubber's
    queue would hand one check another's answer under load. Each answer must fit botocore's model (a Stubber checks
    it first); `event` is the client's service id as botocore's events name it."""
    ok = AWSResponse(url="", status_code=200, headers={}, raw=None)
    for operation, answer in answers.items():
        client.meta.events.register(
            f"before-call.{event}.{operation}", lambda params, answer=answer, **_: (ok, answer(params))
        )


def validated(client: Any, operation: str, answer: dict) -> dict:
    Stubber(client).add_response(operation, answer)  # raises if the answer does not fit the model
    return answer


def test_the_run_gives_one_result_per_check(aws_env):
    """Every check through run(): moto where it can answer, answers by operation elsewhere; the placeholder admin is
    the one FAIL."""
    config = parse_config(default_config_dict())
    # The Kubernetes-version and add-on checks share one EKS client, the trn quota and network checks one Service
    # Quotas client: each answer goes by the operation and what it names.
    eks = config_aws.client("eks", REGION)
    versions = validated(
        eks,
        "describe_cluster_versions",
        {"clusterVersions": [{"clusterVersion": "1.35", "versionStatus": "STANDARD_SUPPORT"}]},
    )
    addons = {
        name: validated(eks, "describe_addon_versions", addon_answer(name, pin.version))
        for name, pin in ADDONS["1.35"].items()
    }
    answer_by_operation(
        eks,
        "eks",
        {
            "DescribeClusterVersions": lambda params: versions,
            "DescribeAddonVersions": lambda params: addons[params["query_string"]["addonName"]],
        },
    )
    ssm = config_aws.client("ssm", REGION)
    parameter = validated(ssm, "get_parameter", {"Parameter": {"Value": "1.35.6-20260714"}})
    answer_by_operation(ssm, "ssm", {"GetParameter": lambda params: parameter})
    sq = config_aws.client("service-quotas", REGION)
    answers = {
        code: validated(sq, "get_service_quota", quota(service, code, name, value))
        for service, code, name, value in [
            ("ec2", "L-2C3B7624", "Running On-Demand Trn instances", 384),
            ("vpc", "L-F678F1CE", "VPCs per Region", 5),
            ("ec2", "L-0263D0A3", "EC2-VPC Elastic IPs", 5),
            ("vpc", "L-FE5A380F", "NAT gateways per Availability Zone", 5),
        ]
    }
    answer_by_operation(
        sq, "service-quotas", {"GetServiceQuota": lambda params: answers[json.loads(params["body"])["QuotaCode"]]}
    )
    pricing = config_aws.client("pricing", "us-east-1")
    products = validated(pricing, "get_products", {"FormatVersion": "aws_v1", "PriceList": [price_product("44.7")]})
    answer_by_operation(pricing, "pricing", {"GetProducts": lambda params: products})
    checker = make(config, eks=eks, ssm=ssm, pricing=pricing, **{"service-quotas": sq})
    checker.offline = True
    # generous: moto builds its EC2 backend on the first call, seconds of CPU on a loaded machine; the deadline
    # itself is test_a_silent_endpoint_ends_at_the_deadline_with_a_sentence's
    results = checker.run(deadline_s=120)
    status = {r.check: r.status for r in results}
    assert status == {
        "credentials": OK,
        "trn quota": OK,
        "trn2 offered": OK,
        "capacity block": SKIPPED,
        "kubernetes version": OK,
        "add-on versions": OK,
        "neuron AMI": OK,
        "admin principal": FAIL,
        "models bucket": OK,
        "managed prometheus": OK,
        "network quotas": OK,
        "model revisions": SKIPPED,
        "node price": OK,
    }, [r.line() for r in results]
    assert results[-1].text.startswith("trn2.48xlarge: $44.70 per node-hour (on demand in us-east-2, AWS Price List")


PROXY_PAGE = b"<html>\n<head><title>{code}</title></head>\n<body>\n<h1>{code}</h1>\n<hr>nginx\n</body>\n</html>\n"


@pytest.mark.parametrize("status", [403, 502])
def test_a_page_instead_of_an_aws_answer_is_one_line_without_the_body(monkeypatch, status):
    """A proxy or load balancer in front of AWS answering HTML: each line names what happened in one line (a 502 is
    botocore's ClientError with the status, a 403 page fails its XML parser), never the page itself."""

    page = PROXY_PAGE.replace(b"{code}", str(status).encode())
    stack = contextlib.ExitStack()
    url = stack.enter_context(loopback_http(lambda path: (status, "text/html", page)))
    for var in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    out = io.StringIO()
    with stack:
        assert preflight.main(["--offline"], stream=out) == EXIT_USAGE
    first = out.getvalue().splitlines()[0]
    assert first.startswith("FAIL    credentials: "), first
    assert "<" not in first and "nginx" not in first and len(first) < 300, first
    assert ("AWS answered 502: Bad Gateway" if status == 502 else "the endpoint's answer is not AWS's") in first, first


def test_a_multi_line_aws_message_stays_on_one_line():
    line = preflight.Result("trn quota", FAIL, "AWS answered Throttling:\nRate exceeded\n  try later").line()
    assert line == "FAIL    trn quota: AWS answered Throttling: Rate exceeded try later"


def price_product(usd: str) -> str:
    return json.dumps(
        {"terms": {"OnDemand": {"T": {"priceDimensions": {"T.D": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}}}
    )


def test_the_node_price_in_the_config_wins_over_aws():
    with pytest.raises(Skipped, match=r"trn2_nodes\.hourly_price_usd=40 is set in the config, and wins"):
        make(config_with(hourly_price_usd=40.0)).node_price()


def test_no_price_from_aws_is_a_skip_with_what_to_set_never_a_failure(stub):
    pricing, s = stub("pricing")
    s.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": []})
    with pytest.raises(Skipped, match=r"has no product for trn2\.48xlarge on demand in us-east-2; set trn2_nodes"):
        make(config_with(), pricing=pricing).node_price()


def test_a_capacity_blocks_price_comes_from_an_offering_of_its_size_and_length(stub):
    ec2, s = stub("ec2")
    s.add_response("describe_capacity_reservations", block(StartDate=NOW, EndDate=NOW + timedelta(days=2)))
    s.add_response(
        "describe_capacity_block_offerings",
        {
            "CapacityBlockOfferings": [
                {
                    "CapacityBlockOfferingId": "cbr-1",
                    "InstanceType": "trn2.48xlarge",
                    "InstanceCount": 1,
                    "CapacityBlockDurationHours": 48,
                    "UpfrontFee": "1680.00",
                    "CurrencyCode": "USD",
                }
            ]
        },
        {"InstanceType": "trn2.48xlarge", "InstanceCount": 1, "CapacityDurationHours": 48},
    )
    said = make(capacity_block_config(), ec2=ec2).node_price()
    assert said.startswith("trn2.48xlarge: $35.00 per node-hour (a current Capacity Block offering (1 x 48 h)")


def test_a_price_aws_does_not_answer_is_a_skip_too(stub):
    pricing, s = stub("pricing")
    s.add_client_error("get_products", "InternalFailure", http_status_code=500)
    with pytest.raises(Skipped, match=r"no price from AWS \(InternalFailure\); set trn2_nodes\.hourly_price_usd"):
        make(config_with(), pricing=pricing).node_price()
