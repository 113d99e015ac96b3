"""The S3 gateway endpoint's policy, read from the synthesized Cluster template: the models bucket with exactly what
the workloads' roles do there, AWS's and the registries' buckets read-only, CloudFormation's response bucket
write-only, and nothing else in the region."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from stacks.constructs.s3_gateway_endpoint import MODELS_BUCKET_ACTIONS, read_only_buckets, registry_k8s_io_bucket
from tests.conftest import EXAMPLE_ACCOUNT
from tests.iam_check import allowed, resolve, statements_by_service_account


def _resolved(statements: list[dict[str, Any]], region: str) -> list[dict[str, Any]]:
    """Statements with their resources as plain ARNs (the account is the example one)."""
    out = copy.deepcopy(statements)
    for s in out:
        resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
        s["Resource"] = [resolve(r, EXAMPLE_ACCOUNT, region) for r in resources]
    return out


def _endpoint_statements(synth) -> list[dict[str, Any]]:
    (endpoint,) = synth.resources("Cluster", "AWS::EC2::VPCEndpoint").values()
    assert endpoint["Properties"]["VpcEndpointType"] == "Gateway"
    return _resolved(endpoint["Properties"]["PolicyDocument"]["Statement"], synth.config.region)


def _bucket(synth) -> str:
    return synth.config.models_bucket_name(EXAMPLE_ACCOUNT)


def test_the_endpoint_lets_through_everything_the_workloads_do_in_the_models_bucket_and_no_more(synth):
    """Every S3 action a Workloads role is allowed on the bucket (serving, build, stage, bench: Mountpoint reads with
    the serving roles), on the very ARNs it is allowed on, passes the endpoint; the endpoint allows no action there
    that no role has."""
    endpoint = _endpoint_statements(synth)
    bucket_arn = f"arn:aws:s3:::{_bucket(synth)}"
    used: set[str] = set()
    for account, statements in statements_by_service_account(synth).items():
        for s in _resolved(statements, synth.config.region):
            if s["Effect"] != "Allow":
                continue
            actions = [s["Action"]] if isinstance(s["Action"], str) else s["Action"]
            for arn in (r.replace("*", "x") for r in s["Resource"] if r.startswith(bucket_arn)):
                for action in (a for a in actions if a.startswith("s3:")):
                    used.add(action)
                    assert allowed(endpoint, action, arn), (account, action, arn)
    assert used == set(MODELS_BUCKET_ACTIONS)
    assert not allowed(endpoint, "s3:DeleteObject", f"{bucket_arn}/artifacts/x")
    assert not allowed(endpoint, "s3:PutBucketPolicy", bucket_arn)


def test_the_endpoint_refuses_every_other_bucket_of_the_region(synth):
    endpoint = _endpoint_statements(synth)
    region = synth.config.region
    for bucket in (
        f"trn-specdec-other-{EXAMPLE_ACCOUNT}-{region}",  # another bucket of the same account
        _bucket(synth).replace("models", "model"),
        "someone-elses-bucket",
    ):
        for action, arn in (
            ("s3:GetObject", f"arn:aws:s3:::{bucket}/k"),
            ("s3:PutObject", f"arn:aws:s3:::{bucket}/k"),
            ("s3:ListBucket", f"arn:aws:s3:::{bucket}"),
        ):
            assert not allowed(endpoint, action, arn), (action, arn)


def test_the_buckets_the_nodes_pull_from_are_read_only_and_cloudformations_is_write_only(synth):
    endpoint = _endpoint_statements(synth)
    region = synth.config.region
    named = [
        f"prod-{region}-starport-layer-bucket",  # ECR layers: the EKS add-ons' images
        f"al2023-repos-{region}-de612dc2",  # dnf on the nodes
        f"prod-registry-k8s-io-{region}",  # the Cluster Autoscaler's image
        "docker-images-prod",  # Envoy's and Grafana's images
    ]
    for bucket in named:
        assert allowed(endpoint, "s3:GetObject", f"arn:aws:s3:::{bucket}/a/layer"), bucket
        for action in ("s3:PutObject", "s3:DeleteObject", "s3:ListBucket"):
            assert not allowed(endpoint, action, f"arn:aws:s3:::{bucket}/a/layer"), (bucket, action)
            assert not allowed(endpoint, action, f"arn:aws:s3:::{bucket}"), (bucket, action)
    response = f"arn:aws:s3:::cloudformation-custom-resource-response-{region.replace('-', '')}/stack/request"
    assert allowed(endpoint, "s3:PutObject", response)
    assert not allowed(endpoint, "s3:GetObject", response)
    # Nothing for every bucket, no action wildcard, and only the statements above.
    for s in endpoint:
        assert s["Effect"] == "Allow" and "Condition" not in s
        actions = [s["Action"]] if isinstance(s["Action"], str) else s["Action"]
        assert not any(a in ("*", "s3:*") for a in actions) and "arn:aws:s3:::*" not in s["Resource"], s


def test_cloudformations_response_bucket_is_needed_because_custom_resources_answer_from_the_vpc(synth):
    """The kubectl provider's functions run in the private subnets: their answers to CloudFormation (a presigned PUT
    to its response bucket in this region) take the endpoint."""
    functions = synth.resources("Cluster", "AWS::Lambda::Function").values()
    in_vpc = [f["Properties"]["Description"] for f in functions if "VpcConfig" in f["Properties"]]
    assert any("resource provider framework - onEvent" in d for d in in_vpc), in_vpc


@pytest.mark.parametrize(
    ("region", "bucket"),
    [
        ("us-east-2", "prod-registry-k8s-io-us-east-2"),
        ("eu-west-2", "767373bbdcb8270361b96548387bf2a9ad0d48758c35-eu-west-2"),
        ("ap-east-2", None),  # served from ap-east-1: over the NAT gateway, not this endpoint
    ],
)
def test_registry_k8s_io_is_read_from_the_bucket_archeio_redirects_this_region_to(region, bucket):
    assert registry_k8s_io_bucket(region) == bucket
    assert (bucket in read_only_buckets(region)) is (bucket is not None)
