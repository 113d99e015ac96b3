"""AWS calls end within a known time with each attempt shown: real loopback endpoints that never answer or refuse."""

from __future__ import annotations

import io
import re

import pytest

from model_build import aws_clients
from model_build.aws_account import caller_account
from model_build.errors import BuildError
from model_build.transfer import S3Store, TransferSettings, make_s3_client
from tests.silent_endpoint import refused_port, silent_server


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped attempts, with the timeouts cut so a test waits a second, not SILENT_BOUND_S."""
    monkeypatch.setattr(aws_clients, "READ_S", 0.3)
    monkeypatch.setattr(aws_clients, "CONNECT_S", 0.3)


@pytest.fixture
def fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_the_shipped_bound_is_under_a_minute():
    assert aws_clients.ATTEMPTS == 3
    assert aws_clients.SILENT_BOUND_S == 3 * 15.0 + 3.0 <= 60
    config = make_s3_client("us-east-2", TransferSettings()).meta.config
    assert (config.read_timeout, config.connect_timeout) == (aws_clients.READ_S, aws_clients.CONNECT_S)
    assert config.retries == {"mode": "standard", "total_max_attempts": aws_clients.ATTEMPTS}


def _attempts(text: str) -> list[str]:
    return re.findall(r"attempt (\d)/3: \w+\); (retrying|giving up)", text)


@pytest.mark.parametrize("endpoint", ["silent", "refused"])
def test_an_upload_to_an_endpoint_that_does_not_answer_fails_with_each_attempt_shown(
    endpoint, fast, fake_credentials, monkeypatch, tmp_path
):
    (tmp_path / "weights.bin").write_bytes(b"x" * 1000)
    out = io.StringIO()
    with silent_server() as port:
        port = port if endpoint == "silent" else refused_port()
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        settings = TransferSettings(concurrency=1)
        store = S3Store(make_s3_client("us-east-2", settings, out), "bucket-x", settings, stream=out)
        with pytest.raises(
            BuildError, match=r"S3 did not answer for s3://bucket-x/a/ .*3 attempts.*Nothing was published"
        ):
            store.upload_tree("a/", tmp_path, ["weights.bin"])
    assert _attempts(out.getvalue()) == [("1", "retrying"), ("2", "retrying"), ("3", "giving up")]


def test_sts_that_never_answers_is_a_sentence_with_each_attempt_shown(fast, fake_credentials, monkeypatch, capsys):
    with silent_server() as port:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        with pytest.raises(BuildError, match=r"cannot tell which AWS account to use \(Read timeout .*\); configure"):
            caller_account("us-east-2", "configure credentials")
    assert _attempts(capsys.readouterr().err) == [("1", "retrying"), ("2", "retrying"), ("3", "giving up")]


class _SilentAfterListing:
    """The moto client for listings, a client of the silent endpoint for everything else: S3 goes quiet once
    the transfer has started."""

    def __init__(self, answering, silent) -> None:
        self.answering, self.silent = answering, silent

    def get_paginator(self, name):
        return self.answering.get_paginator(name)

    def __getattr__(self, name):
        return getattr(self.silent, name)


def test_s3_going_silent_once_the_upload_started_fails_it_with_each_attempt_shown(
    aws_env, fast, monkeypatch, tmp_path, s3, bucket
):
    (tmp_path / "weights.bin").write_bytes(b"x" * 1000)
    out = io.StringIO()
    settings = TransferSettings(concurrency=1)
    with silent_server() as port:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        client = _SilentAfterListing(s3, make_s3_client("us-east-2", settings, out))
        with pytest.raises(
            BuildError, match=r"uploading weights.bin to s3://.*: S3 did not answer .*3 attempts.*re-run"
        ):
            S3Store(client, bucket, settings, stream=out).upload_tree("a/", tmp_path, ["weights.bin"])
    assert _attempts(out.getvalue()) == [("1", "retrying"), ("2", "retrying"), ("3", "giving up")]
