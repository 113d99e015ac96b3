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
import shutil
import stat
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from charts.jobs.bench import SWEEP
from cloud import aws
from config import load_config
from config.bucket_layout import MANIFEST_NAME, artifact_prefix, checkpoint_prefix, results_key
from model_build.errors import BuildError
from model_build.plan import build_plan
from model_build.publish import publish_artifact
from model_build.store import S3Store
from ops import build_artifact as build_artifact_module
from ops import kubectl as ops_kubectl
from ops import run_benchmark as run_benchmark_module
from ops.build_artifact import main as build_main
from ops.build_artifact import run_build
from ops.kubectl import apply, follow_job, kubectl, start_job
from ops.out_of_service import OutOfService
from ops.run_benchmark import main as bench_main
from ops.stage_checkpoints import main as stage_main
from ops.stage_checkpoints import run_stage
from tests.bench.builders import run_settings, sweep_settings
from tests.conftest import MOTO_ACCOUNT, default_config_dict
from tests.model_build.conftest import SMALL, fake_compile
from tests.silent_endpoint import silent_server

FAKE_KUBECTL = """#!{python}
import json, os, sys
log = os.environ["FAKE_KUBECTL_LOG"]
with open(log, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
lines = [json.loads(line) for line in open(log)]
applies = [i for i, a in enumerate(lines) if "apply" in a]
cluster_file = os.environ.get("FAKE_CLUSTER")
# The log stream runs beside the other calls (a Popen): it neither reads nor moves the cluster.
cluster = json.load(open(cluster_file)) if cluster_file and "logs" not in args else None
PAUSED = "autoscaling.keda.sh/paused-replicas"
if cluster is not None:
    # KEDA, as kedacore/keda v2.20.2 pkg/scaling/executor/scale_scaledobjects.go does at each poll (one poll passes
    # between two kubectl calls here): a paused ScaledObject's target is held at the paused count (:53-55 and the
    # controller's scale to it), else a target below minReplicaCount goes back to the minimum (:70-73, :101-108).
    for name, so in cluster["scaledobjects"].items():
        if PAUSED in so["annotations"]:
            cluster["replicas"][name] = int(so["annotations"][PAUSED])
        elif cluster["replicas"][name] < so["minReplicaCount"]:
            cluster["replicas"][name] = so["minReplicaCount"]
    # The Deployment's pods follow its replica count one call late (creation and graceful termination take time).
    cluster["pods"] = dict(cluster["seen"])
    cluster["seen"] = dict(cluster["replicas"])
    need = os.environ.get("FAKE_JOB_NEEDS")
    if applies and need and cluster["pods"].get(need, 0) > 0:
        cluster["raced"] = True  # the build Job was waiting while a serving pod held the devices

def save():
    if cluster is not None:
        with open(cluster_file + ".new", "w") as f:
            json.dump(cluster, f)
        os.replace(cluster_file + ".new", cluster_file)

if "get" in args and "job" in args:
    if not applies:  # before this run applied anything: a Job left by an earlier run, or none
        previous = os.environ.get("FAKE_JOB_PREVIOUS")
        save()
        if not previous:
            sys.exit("Error from server (NotFound): jobs.batch not found")
        print(json.dumps({{"status": {{"conditions": [{{"type": previous, "status": "True"}}]}}}}))
        sys.exit(0)
    calls = sum(1 for a in lines[applies[-1]:] if a[2:4] == ["get", "job"])
    final = os.environ["FAKE_JOB_RESULT"]
    if cluster is not None and cluster.get("raced"):  # its pod stays Pending until activeDeadlineSeconds
        status = {{}} if calls < 3 else {{"conditions": [{{"type": "Failed", "status": "True"}}]}}
    else:
        status = {{"active": 1}} if calls < 3 else {{"conditions": [{{"type": final, "status": "True"}}]}}
    print(json.dumps({{"status": status}}))
elif os.environ.get("FAKE_SCALE_FAILS") and os.environ["FAKE_SCALE_FAILS"] in args:
    save()
    sys.exit("error: failed to patch deployment: the server was unable to return a response in the time allotted")
elif "get" in args and "pods" in args:
    selector = dict(kv.split("=") for kv in args[args.index("-l") + 1].split(","))
    name = selector["app.kubernetes.io/instance"]
    count = cluster["pods"].get(name, 0) if cluster is not None else 0
    print(json.dumps({{"items": [{{"metadata": {{"name": f"{{name}}-{{i}}"}}}} for i in range(count)]}}))
elif "scale" in args and cluster is not None:
    name = args[args.index("scale") + 1].split("/")[1]
    cluster["replicas"][name] = int(args[args.index("scale") + 2].split("=")[1])
elif "annotate" in args and cluster is not None:
    name = args[args.index("annotate") + 1].split("/")[1]
    change = args[args.index("annotate") + 2]
    annotations = cluster["scaledobjects"][name]["annotations"]
    if change.endswith("-"):
        annotations.pop(change[:-1], None)
    else:
        key, value = change.split("=")
        annotations[key] = value
elif "logs" in args:
    print("compiling...")
elif "apply" in args:
    sys.stdin.read()
save()
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

    def calls() -> list[list[str]]:
        """The logged argument lists. Each call but the log stream (`logs -f` must outlive any request timeout)
        ends with the request timeout, which is then left out."""
        logged = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        assert all((c[-1] == "--request-timeout=20s") != (c[2:4] == ["logs", "-f"]) for c in logged), logged
        return [c[:-1] if c[2:4] != ["logs", "-f"] else c for c in logged]

    return calls


@pytest.fixture
def fake_cluster(fake_kubectl, tmp_path, monkeypatch):
    """The fake kubectl with state: one serving pod per profile, and with `scaled` a ScaledObject (minReplicaCount 1)
    that KEDA reconciles between calls. Returns a reader of the state."""
    path = tmp_path / "cluster.json"

    def make(profiles: list[str], *, scaled: bool) -> None:
        path.write_text(
            json.dumps(
                {
                    "replicas": dict.fromkeys(profiles, 1),
                    "seen": dict.fromkeys(profiles, 1),
                    "pods": dict.fromkeys(profiles, 1),
                    "scaledobjects": {p: {"minReplicaCount": 1, "annotations": {}} for p in profiles} if scaled else {},
                }
            )
        )
        monkeypatch.setenv("FAKE_CLUSTER", str(path))

    def state() -> dict:
        return json.loads(path.read_text())

    make.state = state  # type: ignore[attr-defined]
    return make


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


PAUSE = ["-n", "trn-specdec", "annotate", "scaledobject/speculative", "autoscaling.keda.sh/paused-replicas=0"]
RESUME = ["-n", "trn-specdec", "annotate", "scaledobject/speculative", "autoscaling.keda.sh/paused-replicas-"]


@pytest.mark.parametrize(("result", "code"), [("Complete", 0), ("Failed", 1)])
def test_build_pauses_the_scaled_object_waits_for_the_pods_and_resumes_it_whatever_the_job_did(
    aws_env, fake_cluster, fake_kubectl, monkeypatch, capsys, result, code
):
    """The default config scales with KEDA: a bare scale to 0 would be undone at KEDA's next poll and the serving pod
    would retake the devices (the fake's `raced`); the pause holds it at 0 until it is removed."""
    _bucket(staged=["qwen3-32b", "qwen3-1-7b"])
    fake_cluster(["baseline", "speculative"], scaled=True)
    monkeypatch.setenv("FAKE_JOB_RESULT", result)
    monkeypatch.setenv("FAKE_JOB_NEEDS", "speculative")
    assert run_build(None, "speculative", poll_s=0) == code  # verify finds no artifact in the empty bucket
    calls = fake_kubectl()
    verbs = [c[2] for c in calls]
    assert calls[0] == [*PAUSE, "--overwrite"]
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
    aws_env, fake_cluster, fake_kubectl, monkeypatch, tmp_path, capsys
):
    data = default_config_dict()
    data["scaling"] = {"enabled": False}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    _bucket(staged=["qwen3-32b", "qwen3-1-7b"])
    fake_cluster(["baseline", "speculative"], scaled=False)
    monkeypatch.setenv("FAKE_JOB_RESULT", "Complete")
    monkeypatch.setenv("FAKE_JOB_NEEDS", "speculative")
    assert run_build(str(path), "speculative", poll_s=0) == 0
    calls = fake_kubectl()
    assert calls[0] == ["-n", "trn-specdec", "scale", "deploy/speculative", "--replicas=0"]
    assert calls[-1] == ["-n", "trn-specdec", "scale", "deploy/speculative", "--replicas=1"]
    assert "annotate" not in [c[2] for c in calls] and not fake_cluster.state().get("raced")
    assert "deploy/speculative scaled back to 1" in capsys.readouterr().out


def test_an_interrupted_build_resumes_the_scaled_object(aws_env, fake_cluster, fake_kubectl, monkeypatch):
    _bucket(staged=["qwen3-32b", "qwen3-1-7b"])
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
    service = OutOfService(config, config.profile("speculative"), poll_s=0, timeout_s=0.5)
    service._take_command = lambda: ("-n", "trn-specdec", "logs", "x")  # type: ignore[method-assign]  # takes nothing
    stuck = r"speculative: its pods \(speculative-0\) were still there 0.5 s after"
    with pytest.raises(BuildError, match=stuck), service:
        pytest.fail("the body must not run while the pods are there")
    assert fake_kubectl()[-1] == RESUME and service.restored


def test_resumed_is_said_only_when_kubectl_did_it(aws_env, fake_cluster, fake_kubectl, monkeypatch, capsys):
    _bucket(staged=["qwen3-32b", "qwen3-1-7b"])
    fake_cluster(["speculative"], scaled=True)
    monkeypatch.setenv("FAKE_JOB_RESULT", "Complete")
    monkeypatch.setenv("FAKE_SCALE_FAILS", "autoscaling.keda.sh/paused-replicas-")
    assert run_build(None, "speculative", poll_s=0) == 1  # built, but the service is still paused at 0
    assert fake_kubectl()[-1] == RESUME
    out, err = capsys.readouterr()
    assert "resumed" not in out and "job/build-speculative-" in out
    assert "could not give the service back (error: failed to patch deployment" in err
    assert "`kubectl -n trn-specdec annotate scaledobject/speculative autoscaling.keda.sh/paused-replicas-`" in err


def _publish_artifact(tmp_path: Path, profile: str) -> tuple[S3Store, str]:
    """A (fake) compiled artifact of `profile`, published to the models bucket: (store, artifact prefix)."""

    config = load_config()
    plan = build_plan(config, config.profile(profile), bucket=config.models_bucket_name(MOTO_ACCOUNT))
    fake_compile(tmp_path / profile, plan, files={"neuron_config.json": 200, "model.pt": 3000, "weights/tp0.st": 5000})
    store = S3Store(aws.s3_client(config.region, MOTO_ACCOUNT), plan.bucket or "", SMALL)
    publish_artifact(store, plan, tmp_path / profile)
    return store, artifact_prefix(plan.digest)


def test_a_published_artifact_that_verifies_is_not_rebuilt(aws_env, fake_kubectl, tmp_path, capsys):
    _bucket(staged=["qwen3-32b", "qwen3-1-7b"])
    _publish_artifact(tmp_path, "speculative")
    assert run_build(None, "speculative", poll_s=0) == 0
    assert fake_kubectl() == []
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
    _bucket(staged=["qwen3-32b", "qwen3-1-7b"])
    store, prefix = _publish_artifact(tmp_path, "speculative")
    problem = damage(store, prefix)
    assert run_build(None, "speculative", poll_s=0) == 1
    assert fake_kubectl() == []  # no scale-down, no Job: publish would refuse to overwrite the commit anyway
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
    _bucket(staged=["qwen3-32b", "qwen3-1-7b"])  # every artifacts/ request fails, whatever the bucket holds
    faulty_s3.fault = fault
    assert build_main(["speculative", "--apply"]) == 2
    assert faulty_s3.faulted >= 1
    assert fake_kubectl() == []  # no scale-down, no Job
    err = capsys.readouterr().err
    assert "speculative: could not check its published artifact: " in err and said in err
    assert "Nothing was changed: deploy/speculative keeps serving" in err and "Traceback" not in err


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
        with pytest.raises(BuildError, match=r"`kubectl -n ns apply -f -` failed: .*timeout.*update-kubeconfig"):
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
    with pytest.raises(BuildError, match=r"`kubectl -n ns apply -f -` did not finish within 1 s: .*api_public_cidrs"):
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

    _bucket(staged=[])
    config = load_config()
    boto3.client("s3", region_name=config.region).put_object(
        Bucket=config.models_bucket_name(MOTO_ACCOUNT), Key=results_key("run1"), Body=b"not a results file"
    )
    monkeypatch.setattr(run_benchmark_module, "new_run_id", lambda mode=None: "run1")
    monkeypatch.setenv("FAKE_JOB_RESULT", "Complete")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BuildError, match=r"the results are in bench-results/run1.json, but their report failed"):
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

    _bucket(staged=[])
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
    with pytest.raises(BuildError) as err:
        run_build(str(path), "speculative", poll_s=0) if command == "build" else run_stage(str(path), poll_s=0)
    what = "the build of speculative" if command == "build" else "staging"
    assert str(err.value).startswith(what) and "does not start: Capacity Block cr-0123456789abcdef0 ends in" in str(
        err.value
    )
    assert fake_kubectl() == []
