"""AWS calls end within a known time with each attempt shown (real loopback endpoints that never answer or
refuse), and a command asks HeadBucket once (a real S3 API on loopback, moto server)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from config import aws
from config.exit_codes import CommandError
from model_build.store import TransferSettings, make_s3_client
from tests.silent_endpoint import SHOWN, attempts_shown, refused_port, silent_server


def test_the_shipped_bound_is_under_a_minute():
    assert aws.ATTEMPTS == 3
    assert aws.SILENT_BOUND_S == 3 * 15.0 + 3.0 <= 60
    config = make_s3_client("us-east-2", TransferSettings()).meta.config
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
            aws.check_bucket(aws.client("s3", "us-east-2", stream=out), "bucket-x")
    assert attempts_shown(out.getvalue()) == SHOWN


def test_a_missing_bucket_is_an_environment_error(aws_env):
    with pytest.raises(CommandError, match="bucket no-such-bucket-here does not exist") as err:
        aws.check_bucket(aws.client("s3", "us-east-2"), "no-such-bucket-here")
    assert err.value.code == 2


def test_bench_upload_to_a_silent_endpoint_fails_with_each_attempt_shown(silent_aws, tmp_path: Path, capsys):
    from bench.__main__ import upload

    results = tmp_path / "results.json"
    results.write_text("{}")
    with pytest.raises(CommandError, match=r"uploading .*results.json to s3://b/k: AWS did not answer .*3 attempts"):
        upload(results, "s3://b/k", "us-east-2")
    assert attempts_shown(capsys.readouterr().err) == SHOWN
