"""AWS calls end within a known time with each attempt shown (real loopback endpoints that never answer or
refuse), and a command asks HeadBucket once (a real S3 API on loopback, moto server)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from cloud import aws
from config.bucket_layout import models_bucket_account
from config.exit_codes import CommandError
from model_build.store import TransferSettings, make_s3_client
from tests.conftest import EXAMPLE_ACCOUNT, MOTO_ACCOUNT
from tests.silent_endpoint import SHOWN, attempts_shown, refused_port, silent_server


def test_the_shipped_bound_is_under_a_minute():
    assert aws.ATTEMPTS == 3
    assert aws.SILENT_BOUND_S == 3 * 15.0 + 3.0 <= 60
    config = make_s3_client("us-east-2", TransferSettings(), EXAMPLE_ACCOUNT).meta.config
    assert (config.read_timeout, config.connect_timeout) == (aws.READ_S, aws.CONNECT_S)
    assert config.retries == {"mode": "standard", "total_max_attempts": aws.ATTEMPTS}


def test_sts_that_never_answers_is_a_sentence_with_each_attempt_shown(silent_aws, capsys):
    with pytest.raises(CommandError, match=r"cannot tell which AWS account to use \(Read timeout .*\); configure"):
        aws.caller_account("us-east-2", "configure credentials")
    assert attempts_shown(capsys.readouterr().err) == SHOWN


@pytest.mark.parametrize("endpoint", ["silent", "refused"])
def test_a_bucket_check_against_an_endpoint_that_does_not_answer_is_a_sentence_with_each_attempt_shown(
    endpoint, fast_aws, monkeypatch
):
    out = io.StringIO()
    with silent_server() as port:
        port = port if endpoint == "silent" else refused_port()
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        with pytest.raises(CommandError, match=r"HeadBucket bucket-x: AWS did not answer .*3 attempts.*NAT gateway"):
            aws.check_bucket(aws.s3_client("us-east-2", EXAMPLE_ACCOUNT, stream=out), "bucket-x")
    assert attempts_shown(out.getvalue()) == SHOWN


def test_a_missing_bucket_is_an_environment_error(aws_env):
    with pytest.raises(CommandError, match="bucket no-such-bucket-here does not exist") as err:
        aws.check_bucket(aws.s3_client("us-east-2", MOTO_ACCOUNT), "no-such-bucket-here")
    assert err.value.code == 2


def test_bench_upload_to_a_silent_endpoint_fails_with_each_attempt_shown(silent_aws, tmp_path: Path, capsys):
    from bench.commands.upload import upload

    results = tmp_path / "results.json"
    results.write_text("{}")
    url = f"s3://trn-specdec-models-{MOTO_ACCOUNT}-us-east-2/k"  # the owner is in the name: no STS call first
    with pytest.raises(CommandError, match=rf"uploading .*results.json to {url}: AWS did not answer .*3 attempts"):
        upload(results, url, "us-east-2")
    assert attempts_shown(capsys.readouterr().err) == SHOWN


def test_every_s3_call_of_the_client_names_the_expected_bucket_owner(aws_env):
    """The header S3 checks (x-amz-expected-bucket-owner) on each request, as botocore sends it. moto accepts any
    owner, so S3's 403 for another account's bucket is checked on AWS (docs/verify-on-aws.md)."""
    sent: list[tuple[str, str | None]] = []
    s3 = aws.s3_client("us-east-2", MOTO_ACCOUNT)
    s3.meta.events.register(
        "before-send.s3",
        lambda request, **_: sent.append(
            (request.url.split("?")[0], request.headers.get("x-amz-expected-bucket-owner"))
        ),
    )
    bucket = f"trn-specdec-models-{MOTO_ACCOUNT}-us-east-2"
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
    aws.check_bucket(s3, bucket)
    s3.put_object(Bucket=bucket, Key="results/r.json", Body=b"{}")
    s3.list_objects_v2(Bucket=bucket, Prefix="results/")
    s3.get_object(Bucket=bucket, Key="results/r.json")["Body"].read()
    owners = [owner.decode() if isinstance(owner, bytes) else owner for _, owner in sent]
    assert owners == [None, MOTO_ACCOUNT, MOTO_ACCOUNT, MOTO_ACCOUNT, MOTO_ACCOUNT]  # CreateBucket takes none


def test_an_s3_client_without_an_owner_is_refused():
    with pytest.raises(ValueError, match=r"cloud\.aws\.s3_client"):
        aws.client("s3", "us-east-2")


def test_the_owner_comes_from_the_models_bucket_name_else_from_sts(aws_env):
    named = f"trn-specdec-models-{EXAMPLE_ACCOUNT}-eu-west-1"  # the placeholder, not the credentials' (moto's) account
    assert aws.bucket_owner(named, "us-east-2", "fix") == EXAMPLE_ACCOUNT != MOTO_ACCOUNT
    assert aws.bucket_owner("my-own-bucket", "us-east-2", "fix") == MOTO_ACCOUNT  # the credentials' account
    assert models_bucket_account("trn-specdec-models-<account>-us-east-2") is None
    assert models_bucket_account("x-models-12345678901-us-east-2") is None  # 11 digits: not an account
