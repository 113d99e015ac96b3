"""`make build` and `make stage` orchestration against a scripted kubectl on PATH (no cluster here) and moto:
the profile's devices are freed before the build Job starts and its Deployment is scaled back whether the Job
succeeds or fails; checkpoints are staged by a Job only when their manifest is missing."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from config import load_config
from config.bucket_layout import checkpoint_prefix
from model_build.errors import BuildError
from model_build.manifest import MANIFEST_NAME
from ops.build_artifact import run_build
from ops.kubectl import follow_job, start_job
from ops.stage_checkpoints import main as stage_main
from ops.stage_checkpoints import run_stage
from tests.conftest import MOTO_ACCOUNT

FAKE_KUBECTL = """#!{python}
import json, os, sys
log = os.environ["FAKE_KUBECTL_LOG"]
with open(log, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
lines = [json.loads(line) for line in open(log)]
applies = [i for i, a in enumerate(lines) if "apply" in a]
if "get" in args and "job" in args:
    if not applies:  # before this run applied anything: a Job left by an earlier run, or none
        previous = os.environ.get("FAKE_JOB_PREVIOUS")
        if not previous:
            sys.exit("Error from server (NotFound): jobs.batch not found")
        print(json.dumps({{"status": {{"conditions": [{{"type": previous, "status": "True"}}]}}}}))
        sys.exit(0)
    calls = sum(1 for a in lines[applies[-1]:] if a[2:4] == ["get", "job"])
    final = os.environ["FAKE_JOB_RESULT"]
    status = {{"active": 1}} if calls < 3 else {{"conditions": [{{"type": final, "status": "True"}}]}}
    print(json.dumps({{"status": status}}))
elif "logs" in args:
    print("compiling...")
elif "apply" in args:
    sys.stdin.read()
"""


@pytest.fixture
def fake_kubectl(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "kubectl"
    script.write_text(FAKE_KUBECTL.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "kubectl.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_KUBECTL_LOG", str(log))
    return lambda: [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _job(name: str) -> list[dict]:
    return [{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}}]


def test_follow_job_reports_completion_and_failure(fake_kubectl, monkeypatch):
    monkeypatch.setenv("FAKE_JOB_RESULT", "Complete")
    start_job("ns", _job("job-a"))
    assert follow_job("ns", "job-a", poll_s=0) is True
    monkeypatch.setenv("FAKE_JOB_RESULT", "Failed")
    start_job("ns", _job("job-b"))
    assert follow_job("ns", "job-b", poll_s=0) is False


def _bucket(staged: list[str]) -> None:
    """The models bucket on moto, with a checkpoint manifest for each model in `staged`."""
    import boto3

    config = load_config()
    s3 = boto3.client("s3", region_name=config.region)
    bucket = config.models_bucket_name(MOTO_ACCOUNT)
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": config.region})
    for key in staged:
        model = config.models[key]
        s3.put_object(Bucket=bucket, Key=checkpoint_prefix(model.hf_id, model.revision) + MANIFEST_NAME, Body=b"{}")


@pytest.mark.parametrize(("result", "code"), [("Complete", 0), ("Failed", 1)])
def test_build_frees_the_devices_then_scales_the_service_back(aws_env, fake_kubectl, monkeypatch, result, code):
    _bucket(staged=["qwen3-32b", "qwen3-1-7b"])
    monkeypatch.setenv("FAKE_JOB_RESULT", result)
    assert run_build(None, "speculative", poll_s=0) == code  # verify finds no artifact in the empty bucket
    calls = fake_kubectl()
    verbs = [c[2] for c in calls]
    assert calls[0] == ["-n", "trn-specdec", "scale", "deploy/speculative", "--replicas=0"]
    assert verbs.index("scale") < verbs.index("apply") and "delete" not in verbs
    assert calls[-1] == ["-n", "trn-specdec", "scale", "deploy/speculative", "--replicas=1"]


def test_stage_runs_a_job_for_the_missing_models_only(aws_env, fake_kubectl, monkeypatch):
    _bucket(staged=["qwen3-32b"])
    monkeypatch.setenv("FAKE_JOB_RESULT", "Complete")
    assert run_stage(None, poll_s=0) == 0
    calls = fake_kubectl()
    assert [c[2] for c in calls][:2] == ["get", "apply"]  # no earlier Job of that name: nothing to replace
    (job,) = {c[4] for c in calls if c[2:4] == ["get", "job"]}
    assert job.startswith("stage-checkpoints-")


@pytest.mark.parametrize(("previous", "replaced"), [("Failed", True), ("Complete", True), ("", False)])
def test_a_finished_job_of_the_same_name_is_replaced_not_reported_again(fake_kubectl, monkeypatch, previous, replaced):
    monkeypatch.setenv("FAKE_JOB_PREVIOUS", previous)
    monkeypatch.setenv("FAKE_JOB_RESULT", "Complete")
    start_job("ns", _job("job-a"))
    assert follow_job("ns", "job-a", poll_s=0) is True
    verbs = [c[2] for c in fake_kubectl()]
    assert ("delete" in verbs) == replaced
    if replaced:
        assert verbs.index("delete") < verbs.index("apply")


def test_stage_with_everything_staged_runs_nothing(aws_env, fake_kubectl, monkeypatch):
    _bucket(staged=["qwen3-32b", "qwen3-1-7b"])
    assert run_stage(None, poll_s=0) == 0
    assert fake_kubectl() == []


def test_a_failed_stage_stops_the_build_before_it_touches_the_service(aws_env, fake_kubectl, monkeypatch):
    _bucket(staged=[])
    monkeypatch.setenv("FAKE_JOB_RESULT", "Failed")
    assert run_build(None, "speculative", poll_s=0) == 1
    assert not [c for c in fake_kubectl() if "scale" in c]


def test_a_kubectl_failure_is_a_sentence_with_its_message_and_the_fix(tmp_path, monkeypatch, capsys):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "kubectl"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.exit('error: You must be logged in to the server (Unauthorized)')\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(BuildError, match=r"kubectl -n ns apply -f -` failed: error: You must be logged in") as err:
        start_job("ns", _job("job-a"))
    assert "aws eks update-kubeconfig" in str(err.value)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(BuildError, match="kubectl is not installed"):
        start_job("ns", _job("job-a"))


def test_without_aws_credentials_make_stage_says_so_and_exits_2(monkeypatch, capsys):
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    assert stage_main(["--apply"]) == 2
    err = capsys.readouterr().err
    assert "cannot tell which AWS account to use" in err and "Traceback" not in err
