"""The stand-ins `make build`, `make stage` and `make bench` run against here: a scripted kubectl on PATH that keeps
a small cluster's state in a JSON file and reconciles it as KEDA does, and the models bucket on moto."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

from cloud import aws
from config import load_config
from config.bucket_layout import MANIFEST_NAME, artifact_prefix, checkpoint_prefix
from model_build.plan import build_plan
from model_build.publish import publish_artifact
from model_build.store import S3Store
from tests.conftest import MOTO_ACCOUNT
from tests.model_build.conftest import SMALL, fake_compile

FAKE_KUBECTL = """#!{python} -S
import json, os, sys, time
log = os.environ["FAKE_KUBECTL_LOG"]
with open(log, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
if os.environ.get("FAKE_KUBECTL_PIDS"):  # who ran: a test checks that none is left running
    with open(os.environ["FAKE_KUBECTL_PIDS"], "a") as f:
        f.write(f"{{os.getpid()}}\\n")
PAUSED = "autoscaling.keda.sh/paused-replicas"
STEPS = {{  # the steps a test may hold (FAKE_HOLD): the call waits, as a slow API would, before it does anything
    "lookup": "get" in args and ("scaledobjects" in args or "deployments" in args),
    "pause": "annotate" in args and f"{{PAUSED}}=0" in args,
    "pods": "get" in args and "pods" in args,
    "job": "get" in args and "job" in args and any("apply" in json.loads(line) for line in open(log)),
    "give-back": "annotate" in args and f"{{PAUSED}}-" in args,
}}
for step in os.environ.get("FAKE_HOLD", "").split(","):
    if step and STEPS[step]:
        hold = os.path.join(os.environ["FAKE_HOLD_DIR"], step)
        with open(hold + ".held", "a") as f:
            f.write(f"{{os.getpid()}}\\n")
        for _ in range(3000):  # until the test releases it (30 s at most)
            if os.path.exists(hold + ".release"):
                break
            time.sleep(0.01)
lines = [json.loads(line) for line in open(log)]
applies = [i for i, a in enumerate(lines) if "apply" in a]
cluster_file = os.environ.get("FAKE_CLUSTER")
# The log stream runs beside the other calls (a Popen): it neither reads nor moves the cluster.
cluster = json.load(open(cluster_file)) if cluster_file and "logs" not in args else None
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
        if any(verb in args for verb in ("annotate", "patch", "scale")):  # which process changed what, in order
            cluster.setdefault("history", []).append({{"pid": os.getpid(), "args": args[:-1]}})
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
elif "get" in args and ("scaledobjects" in args or "deployments" in args):
    if cluster is None:
        print(json.dumps({{"items": []}}))
    elif "scaledobjects" in args:
        objects = cluster["scaledobjects"]
        print(json.dumps({{"items": [{{"metadata": {{"name": n, "annotations": so["annotations"]}}}} for n, so in objects.items()]}}))
    else:
        notes = cluster.get("deployment_annotations", {{}})
        items = [{{"metadata": {{"name": n, "annotations": notes.get(n, {{}})}}, "spec": {{"replicas": r}}}} for n, r in cluster["replicas"].items()]
        print(json.dumps({{"items": items}}))
elif "annotate" in args and cluster is not None:
    at = args.index("annotate")
    name = args[at + 1].split("/")[1]
    annotations = cluster["scaledobjects"][name]["annotations"]
    for change in args[at + 2:]:
        if change.startswith("--"):
            continue
        if change.endswith("-"):
            annotations.pop(change[:-1], None)
        else:
            key, value = change.split("=", 1)  # as kubectl does: the value may hold "="
            annotations[key] = value
elif "patch" in args and cluster is not None:  # a merge patch of a Deployment's annotations and replica count
    name = args[args.index("patch") + 1].split("/")[1]
    change = json.loads(args[args.index("-p") + 1])
    notes = cluster.setdefault("deployment_annotations", {{}}).setdefault(name, {{}})
    for key, value in change.get("metadata", {{}}).get("annotations", {{}}).items():
        if value is None:
            notes.pop(key, None)
        else:
            notes[key] = value
    if "replicas" in change.get("spec", {{}}):
        cluster["replicas"][name] = change["spec"]["replicas"]
elif "logs" in args:
    print("compiling...")
elif "apply" in args:
    sys.stdin.read()
save()
"""


def install_kubectl(bin_dir: Path) -> Path:
    """The fake kubectl as `bin_dir/kubectl`; it reads FAKE_KUBECTL_LOG, FAKE_CLUSTER, FAKE_JOB_* and FAKE_HOLD*."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "kubectl"
    script.write_text(FAKE_KUBECTL.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def cluster_state(profiles: list[str], *, scaled: bool) -> dict:
    """One serving pod per profile, and with `scaled` a ScaledObject (minReplicaCount 1) per profile."""
    return {
        "replicas": dict.fromkeys(profiles, 1),
        "seen": dict.fromkeys(profiles, 1),
        "pods": dict.fromkeys(profiles, 1),
        "scaledobjects": {p: {"minReplicaCount": 1, "annotations": {}} for p in profiles} if scaled else {},
    }


def models_bucket(staged: list[str]) -> None:
    """The models bucket on moto, with a checkpoint manifest for each model in `staged`."""
    import boto3

    config = load_config()
    s3 = boto3.client("s3", region_name=config.region)
    bucket = config.models_bucket_name(MOTO_ACCOUNT)
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": config.region})
    for key in staged:
        model = config.models[key]
        s3.put_object(Bucket=bucket, Key=checkpoint_prefix(model.hf_id, model.revision) + MANIFEST_NAME, Body=b"{}")


def publish_artifact_of(tmp_path: Path, profile: str) -> tuple[S3Store, str]:
    """A (fake) compiled artifact of `profile`, published to the models bucket: (store, artifact prefix)."""

    config = load_config()
    plan = build_plan(config, config.profile(profile), bucket=config.models_bucket_name(MOTO_ACCOUNT))
    fake_compile(tmp_path / profile, plan, files={"neuron_config.json": 200, "model.pt": 3000, "weights/tp0.st": 5000})
    store = S3Store(aws.s3_client(config.region, MOTO_ACCOUNT), plan.bucket or "", SMALL)
    publish_artifact(store, plan, tmp_path / profile)
    return store, artifact_prefix(plan.digest)
