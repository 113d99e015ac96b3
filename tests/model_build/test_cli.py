"""The command line: help, bucket from STS, exit codes, environment errors as sentences."""

from __future__ import annotations

import subprocess
import sys

import pytest

from model_build.cli import main
from tests.conftest import EXAMPLE_ACCOUNT, ROOT
from tests.model_build.conftest import MOTO_ACCOUNT, fake_compile
from tests.silent_endpoint import SHOWN, attempts_shown

COMMANDS = ["plan", "stage-checkpoints", "compile", "publish", "verify"]


def test_help_explains_every_command():
    result = subprocess.run(
        [sys.executable, "-m", "model_build", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    for command in COMMANDS:
        assert command in result.stdout
    assert "exit codes: 0 ok, 1 mismatch" in result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_help(command, capsys):
    assert main([command, "--help"]) == 0
    assert "usage: python -m model_build " + command in capsys.readouterr().out


def test_publish_and_verify_find_the_bucket_through_sts(tmp_path, plans, bucket, capsys):
    assert bucket.endswith(f"-{MOTO_ACCOUNT}-us-east-2")
    out = tmp_path / "build"
    fake_compile(out, plans["baseline"])
    args = ["--part-size-mib", "5", "--concurrency", "2"]
    assert main(["publish", "baseline", "--from", str(out), *args]) == 0
    assert f"published: s3://{bucket}/artifacts/{plans['baseline'].digest}/" in capsys.readouterr().out
    assert main(["verify", "baseline", "--deep", *args]) == 0
    assert capsys.readouterr().out.startswith("OK: ")
    assert main(["publish", "baseline", "--from", str(out), *args]) == 0
    again = capsys.readouterr().out
    assert again.startswith("already published") and "this run sent 0 bytes" in again


def test_a_missing_bucket_is_exit_2(aws_env, capsys):
    assert main(["--bucket", "not-deployed-bucket", "verify", "baseline"]) == 2
    assert "bucket not-deployed-bucket does not exist" in capsys.readouterr().err


def test_no_credentials_is_exit_2_with_the_bucket_to_pass(monkeypatch, capsys, tmp_path):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "")
    assert main(["verify", "baseline"]) == 2
    err = capsys.readouterr().err
    assert "cannot tell which AWS account to use" in err and "--bucket trn-specdec-models-<account>-us-east-2" in err


def test_bad_config_and_bad_arguments_are_exit_2(capsys, tmp_path):
    assert main(["--config", str(tmp_path / "missing.yaml"), "plan", "baseline"]) == 2
    assert "cannot be read" in capsys.readouterr().err
    assert main(["publish", "baseline"]) == 2  # --from is required
    assert main(["plan", "baseline", "--part-size-mib", "1"]) == 2  # not a plan option


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--part-size-mib", "nan"),
        ("--part-size-mib", "inf"),
        ("--part-size-mib", "-5"),
        ("--part-size-mib", "4"),
        ("--part-size-mib", "5121"),
        ("--concurrency", "0"),
    ],
)
def test_bad_numbers_are_one_usage_line(flag, value, capsys):
    assert main(["publish", "baseline", "--from", ".", flag, value]) == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: '{value}'" in err and "Traceback" not in err


def test_a_silent_s3_endpoint_fails_at_the_one_bucket_check_with_each_attempt_shown(silent_aws, capsys):
    bucket = f"trn-specdec-models-{EXAMPLE_ACCOUNT}-us-east-2"  # its name says its owner: no STS call first
    assert main(["--bucket", bucket, "verify", "baseline"]) == 2
    err = capsys.readouterr().err
    assert attempts_shown(err) == SHOWN and err.count("HeadBucket") == 4  # three attempt lines and the sentence
    assert f"error: HeadBucket {bucket}: AWS did not answer" in err and "Traceback" not in err


def test_a_command_asks_headbucket_once(tmp_path, plans, bucket, monkeypatch, capsys):
    """Staging two models and publishing each used to ask once per model and once more before the first."""
    import botocore.client

    calls: list[str] = []
    real = botocore.client.BaseClient._make_api_call

    def counting(self, operation, params):
        calls.append(operation)
        return real(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", counting)
    out = tmp_path / "build"
    fake_compile(out, plans["baseline"])
    assert main(["publish", "baseline", "--from", str(out), "--part-size-mib", "5"]) == 0
    assert main(["verify", "baseline"]) == 0
    assert calls.count("HeadBucket") == 2, calls  # one per command


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("not json", "is not JSON"),
        ('{"vllm": "serve"}', "is a JSON dict, not a non-empty list of strings"),
        ("[]", "not a non-empty list of strings"),
        ('["vllm", 8000]', "not a non-empty list of strings"),
    ],
)
def test_a_vllm_argv_that_is_not_a_json_list_of_strings_is_one_usage_line(value, words, capsys, tmp_path):
    """Was a JSONDecodeError / TypeError traceback from inside the cache build."""
    assert main(["compile", "baseline", "--out", str(tmp_path), "--vllm-argv-json", value]) == 2
    err = capsys.readouterr().err
    assert "argument --vllm-argv-json" in err and words in err and "Traceback" not in err


def test_ctrl_c_is_exit_130_with_how_to_resume(monkeypatch, capsys):
    """Ctrl-C during any command (here while reading the config) is 130, never 1 ("artifact mismatch")."""
    import model_build.cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(model_build.cli, "load_config", interrupted)
    assert main(["plan", "baseline"]) == 130
    assert "interrupted; re-run the same command to resume" in capsys.readouterr().err


def test_the_part_size_range_is_s3s():
    """5 MiB to 5 GiB (S3's multipart limits): both ends accepted, one byte beyond refused in the settings too."""
    from model_build.cli import _part_size_mib
    from model_build.errors import BuildError
    from model_build.store import MAX_PART_SIZE, MIN_PART_SIZE, TransferSettings

    assert (_part_size_mib("5"), _part_size_mib("5120")) == (5.0, 5120.0)
    assert TransferSettings(part_size=MAX_PART_SIZE).part_size == MAX_PART_SIZE
    with pytest.raises(BuildError, match="above S3's maximum of 5368709120"):
        TransferSettings(part_size=MAX_PART_SIZE + 1)
    with pytest.raises(BuildError, match="below S3's minimum"):
        TransferSettings(part_size=MIN_PART_SIZE - 1)
