"""`make build` and `make stage` orchestration against a scripted kubectl on PATH (no cluster here) and moto:
the profile's devices are freed before the build Job starts and its Deployment is scaled back whether the Job
succeeds or fails; checkpoints are staged by a Job only when their manifest is missing. A build touches the
service only when S3 answered that the artifact's manifest is missing: a check S3 did not answer (a loopback
proxy in front of moto refuses, throttles or drops the artifact requests) or a damaged committed prefix stops
before any kubectl call."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import stat
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from charts.jobs.bench import SWEEP
from config import load_config
from config.bucket_layout import MANIFEST_NAME, checkpoint_prefix, results_key
from config.exit_codes import CommandError
from model_build.store import S3Store
from ops import build_artifact as build_artifact_module
from ops import kubectl as ops_kubectl
from ops import run_benchmark as run_benchmark_module
from ops.build_artifact import main as build_main
from ops.build_artifact import run_build
from ops.interrupts import Interrupted, unwinding
from ops.kubectl import apply, follow_job, kubectl, start_job
from ops.out_of_service import OutOfService
from ops.run_benchmark import main as bench_main
from ops.stage_checkpoints import main as stage_main
from ops.stage_checkpoints import run_stage
from tests.bench.builders import run_settings, sweep_settings
from tests.conftest import MOTO_ACCOUNT
from tests.ops.fake_cluster import models_bucket, publish_artifact_of
from tests.silent_endpoint import silent_server


def _job(name: str) -> list[dict]:
    return [{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}}]


def test_follow_job_reports_completion_and_failure(fake_kubectl, monkeypatch):
    monkeypatch.setenv("FAKE_JOB_RESULT", "Complete")
    start_job("ns", _job("job-a"))
    assert follow_job("ns", "job-a", poll_s=0) is True
    monkeypatch.setenv("FAKE_JOB_RESULT", "Failed")
    start_job("ns", _job("job-b"))
    assert follow_job("ns", "job-b", poll_s=0) is False


PAUSE = ["-n", "trn-specdec", "annotate", "scaledobject/speculative", "autoscaling.keda.sh/paused-replicas=0"]
PAUSED_BY = "trn-specdec/paused-by"
RESUME = [*PAUSE[:4], "autoscaling.keda.sh/paused-replicas-", f"{PAUSED_BY}-"]
LOOKUP = ["-n", "trn-specdec", "get", "scaledobjects", "-o", "json"]  # every entry point looks for a pause first


def is_pause_by(call: list[str], operation: str) -> bool:
    """The pause, and in the same call who took it: the operation, the UTC time, the pid and the host."""
    by = re.fullmatch(rf"{PAUSED_BY}=(.*) at \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ, pid \d+ on \S+", call[5])
    return call[:5] == PAUSE and by is not None and by.group(1) == operation and call[6:] == ["--overwrite"]


@pytest.mark.parametrize(("result", "code"), [("Complete", 0), ("Failed", 1)])
def test_build_pauses_the_scaled_object_waits_for_the_pods_and_resumes_it_whatever_the_job_did(
    aws_env, fake_cluster, fake_kubectl, monkeypatch, capsys, result, code
):
    """The default config scales with KEDA: a bare scale to 0 would be undone at KEDA's next poll and the serving pod
    would retake the devices (the fake's `raced`); the pause holds it at 0 until it is removed."""
    models_bucket(staged=["qwen3-32b", "qwen3-1-7b"])
    fake_cluster(["baseline", "speculative"], scaled=True)
    monkeypatch.setenv("FAKE_JOB_RESULT", result)
    monkeypatch.setenv("FAKE_JOB_NEEDS", "speculative")
    assert run_build(None, "speculative", poll_s=0) == code  # verify finds no artifact in the empty bucket
    calls = fake_kubectl()
    verbs = [c[2] for c in calls]
    assert calls[0] == LOOKUP and is_pause_by(calls[1], "make build PROFILE=speculative")
    pods_gone = max(i for i, c in enumerate(calls) if c[2:4] == ["get", "pods"])
    assert verbs.index("annotate") < pods_gone < verbs.index("apply") and "scale" not in verbs
    assert calls[-1] == RESUME
    state = fake_cluster.state()
    assert not state.get("raced") and state["scaledobjects"]["speculative"]["annotations"] == {}
    assert "scaledobject/speculative resumed" in capsys.readouterr().out


def test_the_bare_scale_to_zero_races_keda_in_the_fake_cluster(fake_cluster, fake_kubectl, monkeypatch):
    """The flow `make build` had: the fake cluster puts the target back to its minimum, the Job never runs."""
    fake_cluster(["speculative"], scaled=True)
    monkeypatch.setenv("FAKE_JOB_RESULT", "Complete")
    monkeypatch.setenv("FAKE_JOB_NEEDS", "speculative")
    kubectl("-n", "trn-specdec", "scale", "deploy/speculative", "--replicas=0")
    start_job("trn-specdec", _job("build-speculative"))
    assert follow_job("trn-specdec", "build-speculative", poll_s=0) is False
    assert fake_cluster.state()["raced"]


def test_without_scaling_build_scales_the_deployment_to_zero_and_back(
    aws_env, fake_cluster, fake_kubectl, monkeypatch, unscaled_config, capsys
):
    models_bucket(staged=["qwen3-32b", "qwen3-1-7b"])
    fake_cluster(["baseline", "speculative"], scaled=False)
    monkeypatch.setenv("FAKE_JOB_RESULT", "Complete")
    monkeypatch.setenv("FAKE_JOB_NEEDS", "speculative")
    assert run_build(str(unscaled_config), "speculative", poll_s=0) == 0
    calls = fake_kubectl()
    assert calls[0] == ["-n", "trn-specdec", "get", "deployments", "-o", "json"]
    take, give_back = (json.loads(c[6]) for c in (calls[1], calls[-1]))
    assert calls[1][:6] == calls[-1][:6] == ["-n", "trn-specdec", "patch", "deploy/speculative", "--type=merge", "-p"]
    assert take["spec"] == {"replicas": 0} and take["metadata"]["annotations"][PAUSED_BY].startswith("make build")
    assert give_back == {"metadata": {"annotations": {PAUSED_BY: None}}, "spec": {"replicas": 1}}
    state = fake_cluster.state()
    assert "annotate" not in [c[2] for c in calls] and not state.get("raced")
    assert state["replicas"]["speculative"] == 1 and state["deployment_annotations"]["speculative"] == {}
    assert "deploy/speculative scaled back to 1" in capsys.readouterr().out


def test_an_interrupted_build_resumes_the_scaled_object(aws_env, fake_cluster, fake_kubectl, monkeypatch):
    models_bucket(staged=["qwen3-32b", "qwen3-1-7b"])
    fake_cluster(["speculative"], scaled=True)
    monkeypatch.setenv("FAKE_JOB_RESULT", "Complete")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(build_artifact_module, "follow_job", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_build(None, "speculative", poll_s=0)
    assert fake_kubectl()[-1] == RESUME
    assert fake_cluster.state()["scaledobjects"]["speculative"]["annotations"] == {}


def test_pods_that_never_go_stop_with_a_sentence_and_the_service_given_back(fake_cluster, fake_kubectl):
    """A pod that does not terminate (a finalizer, a stuck node): the body never runs and the pause is removed."""
    config = load_config()
    fake_cluster(["speculative"], scaled=True)
    service = OutOfService(config, config.profile("speculative"), operation="a test", poll_s=0, timeout_s=0.5)
    service._take_command = lambda: ("-n", "trn-specdec", "logs", "x")  # type: ignore[method-assign]  # takes nothing
    stuck = r"speculative: its pods \(speculative-0\) were still there 0.5 s after"
    with pytest.raises(CommandError, match=stuck), service:
        pytest.fail("the body must not run while the pods are there")
    assert fake_kubectl()[-1] == RESUME and service.restored


def test_resumed_is_said_only_when_kubectl_did_it(aws_env, fake_cluster, fake_kubectl, monkeypatch, capsys):
    models_bucket(staged=["qwen3-32b", "qwen3-1-7b"])
    fake_cluster(["speculative"], scaled=True)
    monkeypatch.setenv("FAKE_JOB_RESULT", "Complete")
    monkeypatch.setenv("FAKE_SCALE_FAILS", "autoscaling.keda.sh/paused-replicas-")
    assert run_build(None, "speculative", poll_s=0) == 1  # built, but the service is still paused at 0
    assert fake_kubectl()[-1] == RESUME
    out, err = capsys.readouterr()
    assert "resumed" not in out and "job/build-speculative-" in out
    assert "could not give the service back (error: failed to patch deployment" in err
    assert f"`kubectl {' '.join(RESUME)}`" in err


def test_a_published_artifact_that_verifies_is_not_rebuilt(aws_env, fake_kubectl, tmp_path, capsys):
    models_bucket(staged=["qwen3-32b", "qwen3-1-7b"])
    publish_artifact_of(tmp_path, "speculative")
    assert run_build(None, "speculative", poll_s=0) == 0
    assert fake_kubectl() == [LOOKUP]
    assert "already published and verified; nothing to build" in capsys.readouterr().out


def _delete_object(store: S3Store, prefix: str) -> str:
    store.client.delete_object(Bucket=store.bucket, Key=prefix + "weights/tp0.st")
    return "weights/tp0.st: missing from"


def _truncate_object(store: S3Store, prefix: str) -> str:
    store.client.put_object(Bucket=store.bucket, Key=prefix + "model.pt", Body=b"short")
    return "model.pt: size is 5 bytes, expected 3000"


def _garble_manifest(store: S3Store, prefix: str) -> str:
    store.client.put_object(Bucket=store.bucket, Key=prefix + MANIFEST_NAME, Body=b"{not json")
    return "manifest.json is not a readable manifest"


@pytest.mark.parametrize("damage", [_delete_object, _truncate_object, _garble_manifest])
def test_a_damaged_committed_prefix_stops_with_the_repair_and_touches_nothing(
    aws_env, fake_kubectl, tmp_path, capsys, damage
):
    models_bucket(staged=["qwen3-32b", "qwen3-1-7b"])
    store, prefix = publish_artifact_of(tmp_path, "speculative")
    problem = damage(store, prefix)
    assert run_build(None, "speculative", poll_s=0) == 1
    assert fake_kubectl() == [LOOKUP]  # no scale-down, no Job: publish would refuse to overwrite the commit anyway
    err = capsys.readouterr().err
    assert f"{store.url(prefix)} is committed (it has a manifest) but damaged" in err and problem in err
    assert f"aws s3 rm --recursive {store.url(prefix)}), then run `make build PROFILE=speculative` again" in err


class _FaultyS3(BaseHTTPRequestHandler):
    """Forwards every request to moto, except those for keys under artifacts/, which get `server.fault`."""

    server: _FaultyS3Server
    # HTTP/1.1 answers botocore's `Expect: 100-continue` on PUT at once; under HTTP/1.0 each PUT waited 1 s for it.
    protocol_version = "HTTP/1.1"

    def _handle(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.server.fault and "/artifacts/" in self.path:
            self.server.faulted += 1
            if self.server.fault == "network":  # drop the connection without an answer
                self.close_connection = True
                return
            status, code = {"credentials": (403, "ExpiredToken"), "throttling": (503, "SlowDown")}[self.server.fault]
            error = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{code}</Message></Error>"
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(error)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(error.encode())
            return
        upstream = http.client.HTTPConnection(*self.server.upstream, timeout=30)
        upstream.request(self.command, self.path, body=body, headers=dict(self.headers))
        response = upstream.getresponse()
        data = response.read()
        self.send_response(response.status)
        for name, value in response.getheaders():
            if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(name, value)
        self.send_header("Content-Length", response.getheader("Content-Length", str(len(data))))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        upstream.close()

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle

    def log_message(self, format: str, *args: object) -> None:  # keep pytest's output quiet
        pass


class _FaultyS3Server(ThreadingHTTPServer):
    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _FaultyS3)
        split = urlsplit(upstream)
        self.upstream = (split.hostname, split.port)
        self.fault: str | None = None  # "credentials", "throttling" or "network" once a test sets it
        self.faulted = 0


@pytest.fixture
def faulty_s3(aws_env, monkeypatch) -> Iterator[_FaultyS3Server]:
    """AWS through the faulty proxy; botocore's retries run in full but without their backoff sleeps."""
    from botocore.retries.standard import ExponentialBackoff

    server = _FaultyS3Server(aws_env)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0)
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_address[1]}")
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("credentials", "access denied to s3://"),
        ("throttling", "(SlowDown) when calling the GetObject operation (reached max retries"),
        ("network", "Connection was closed before we received a valid response"),
    ],
)
def test_a_check_s3_did_not_answer_stops_with_its_sentence_and_touches_nothing(
    fake_kubectl, faulty_s3, tmp_path, capsys, fault, said
):
    models_bucket(staged=["qwen3-32b", "qwen3-1-7b"])  # every artifacts/ request fails, whatever the bucket holds
    faulty_s3.fault = fault
    assert build_main(["speculative", "--apply"]) == 2
    assert faulty_s3.faulted >= 1
    assert fake_kubectl() == []  # no scale-down, no Job
    err = capsys.readouterr().err
    assert "speculative: could not check its published artifact: " in err and said in err
    assert "Nothing was changed: deploy/speculative keeps serving" in err and "Traceback" not in err


def test_stage_runs_a_job_for_the_missing_models_only(aws_env, fake_kubectl, monkeypatch):
    models_bucket(staged=["qwen3-32b"])
    monkeypatch.setenv("FAKE_JOB_RESULT", "Complete")
    assert run_stage(None, poll_s=0) == 0
    calls = fake_kubectl()
    assert calls[0] == LOOKUP
    assert [c[2] for c in calls][1:3] == ["get", "apply"]  # no earlier Job of that name: nothing to replace
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
    models_bucket(staged=["qwen3-32b", "qwen3-1-7b"])
    assert run_stage(None, poll_s=0) == 0
    assert fake_kubectl() == [LOOKUP]


def test_a_failed_stage_stops_the_build_before_it_touches_the_service(aws_env, fake_kubectl, monkeypatch):
    models_bucket(staged=[])
    monkeypatch.setenv("FAKE_JOB_RESULT", "Failed")
    assert run_build(None, "speculative", poll_s=0) == 1
    assert not [c for c in fake_kubectl() if {"scale", "annotate", "patch"} & set(c)]


def test_a_kubectl_failure_is_a_sentence_with_its_message_and_the_fix(tmp_path, monkeypatch, capsys):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "kubectl"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.exit('error: You must be logged in to the server (Unauthorized)')\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(CommandError, match=r"kubectl -n ns apply -f -` failed: error: You must be logged in") as err:
        start_job("ns", _job("job-a"))
    assert "aws eks update-kubeconfig" in str(err.value)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(CommandError, match="kubectl is not installed"):
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


@pytest.mark.timeout(150)
def test_an_api_endpoint_that_never_answers_is_a_sentence_from_the_real_kubectl(tmp_path, monkeypatch):
    """kubectl itself against a loopback server that accepts TCP and never answers: its TLS handshake timeout
    (10 s) and our --request-timeout (2 s here, 20 s in use) end the call; the error names the cause."""
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is not on PATH; the ops tests need it")
    with silent_server() as port:
        config = tmp_path / "kubeconfig"
        config.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
                    "users": [{"name": "u", "user": {"token": "x"}}],
                    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "c",
                }
            )
        )
        monkeypatch.setenv("KUBECONFIG", str(config))
        monkeypatch.setattr(ops_kubectl, "REQUEST_TIMEOUT", "2s")  # the mechanism, not the 20 s wait
        with pytest.raises(CommandError, match=r"`kubectl -n ns apply -f -` failed: .*timeout.*update-kubeconfig"):
            apply("ns", _job("job-a"))


@pytest.mark.timeout(30)
def test_a_kubectl_that_hangs_is_stopped_at_the_deadline_with_a_sentence(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "kubectl"
    script.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(600)\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(ops_kubectl, "DEADLINE_S", 1.0)
    with pytest.raises(CommandError, match=r"`kubectl -n ns apply -f -` did not finish within 1 s: .*api_public_cidrs"):
        apply("ns", _job("job-a"))


@pytest.mark.parametrize("main", [build_main, stage_main, bench_main])
@pytest.mark.parametrize("account", ["abc", "12", "1234567890123", "12345678901x"])
def test_a_bad_account_id_is_one_usage_line(main, account, capsys):
    args = ["baseline"] if main is build_main else []
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--account", account])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --account: '{account}' is not an AWS account id (12 digits" in err and "Traceback" not in err


def test_a_bench_whose_report_fails_keeps_the_results_and_says_how_to_rerun(
    aws_env, fake_kubectl, monkeypatch, tmp_path, capsys
):
    import boto3

    models_bucket(staged=[])
    config = load_config()
    boto3.client("s3", region_name=config.region).put_object(
        Bucket=config.models_bucket_name(MOTO_ACCOUNT), Key=results_key("run1"), Body=b"not a results file"
    )
    monkeypatch.setattr(run_benchmark_module, "new_run_id", lambda mode=None: "run1")
    monkeypatch.setenv("FAKE_JOB_RESULT", "Complete")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CommandError, match=r"the results are in bench-results/run1.json, but their report failed"):
        run_benchmark_module.run_bench(None, [], poll_s=0)
    assert (tmp_path / "bench-results" / "run1.json").read_bytes() == b"not a results file"


def test_a_sweep_job_downloads_its_sweep_file_and_reports_it_with_plots(
    aws_env, fake_kubectl, monkeypatch, tmp_path, capsys
):
    """`make bench-sweep`: the Job uploads under results/<run id>/; the sweep file comes back here and
    `bench sweep-report` writes the report, crossover.json and the plots the Job could not draw."""
    import boto3

    from bench.sweep.run import SweepResults
    from config.bucket_layout import sweep_key

    models_bucket(staged=[])
    config = load_config()
    empty = SweepResults(
        created_at="2026-11-26T00:00:00Z",  # type: ignore[arg-type]
        settings=sweep_settings(run=run_settings(requests=4, max_tokens=16), requests_per_point=4),
        points=[],
    )
    boto3.client("s3", region_name=config.region).put_object(
        Bucket=config.models_bucket_name(MOTO_ACCOUNT),
        Key=sweep_key("sweep-run1"),
        Body=empty.model_dump_json().encode(),
    )
    monkeypatch.setattr(run_benchmark_module, "new_run_id", lambda mode=None: "sweep-run1")
    monkeypatch.setenv("FAKE_JOB_RESULT", "Complete")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    monkeypatch.chdir(tmp_path)
    assert run_benchmark_module.run_bench(None, [], poll_s=0, mode=SWEEP) == 0
    report = tmp_path / "bench-results" / "sweep-run1"
    assert {p.name for p in report.iterdir()} >= {"report.md", "crossover.json", "pareto.png"}


@pytest.mark.parametrize("command", ["build", "stage"])
def test_build_and_stage_inside_a_capacity_blocks_last_minutes_start_no_job(
    aws_env, fake_cluster, fake_kubectl, tmp_path, command
):
    """Like the benchmark, an hours-long build or staging Job does not start when EC2 reclaims the node within
    LAST_MINUTES; a refused build leaves the service as it was (no pause, no Job)."""
    import boto3

    from tests.conftest import variant_config_dict

    data = variant_config_dict()
    data["trn2_nodes"]["capacity_block_end"] = (datetime.now(UTC) + timedelta(minutes=20)).isoformat()
    path = tmp_path / "cb.yaml"
    path.write_text(yaml.safe_dump(data))
    config = load_config(path)
    s3 = boto3.client("s3", region_name=config.region)
    bucket = config.models_bucket_name(MOTO_ACCOUNT)
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": config.region})
    if command == "build":  # checkpoints staged, artifact missing: only the build Job would start
        for model in config.models.values():
            s3.put_object(Bucket=bucket, Key=checkpoint_prefix(model.hf_id, model.revision) + MANIFEST_NAME, Body=b"{}")
    fake_cluster([p.name for p in config.profiles], scaled=True)
    with pytest.raises(CommandError) as err:
        run_build(str(path), "speculative", poll_s=0) if command == "build" else run_stage(str(path), poll_s=0)
    what = "the build of speculative" if command == "build" else "staging"
    assert str(err.value).startswith(what) and "does not start: Capacity Block cr-0123456789abcdef0 ends in" in str(
        err.value
    )
    assert [c for c in fake_kubectl() if c[2] != "get"] == []  # it may look for pauses; it changes nothing


def _ends(pid: int, within_s: float) -> bool:
    """The process is gone or a zombie within the time: a killed process dies only once the scheduler runs it, which
    on a loaded machine can take a moment; one left running never ends."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.01)
    return False


@pytest.mark.timeout(30)
def test_a_kubectl_cut_short_by_a_signal_is_killed_with_what_it_started(tmp_path, monkeypatch):
    """SIGTERM while kubectl waits (here it started a credential plugin, as EKS kubeconfigs do): neither goes on."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pids = tmp_path / "pids"
    script = bin_dir / "kubectl"
    script.write_text(
        f"#!{sys.executable}\nimport os, subprocess, time\n"
        f"plugin = subprocess.Popen(['sleep', '60'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{plugin.pid}}')\ntime.sleep(60)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    def stop_when_started() -> None:
        while not pids.exists() or not pids.read_text():
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    timer = threading.Thread(target=stop_when_started, daemon=True)
    timer.start()
    with pytest.raises(Interrupted), unwinding():
        kubectl("-n", "ns", "get", "pods")
    for pid in map(int, pids.read_text().split()):
        assert _ends(pid, within_s=10), f"pid {pid} still runs 10 s after the interrupt"
