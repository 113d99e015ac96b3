"""The journey's own pieces, quickly: the three-profile config, the pods' path rewrites, KEDA's reconcile in the fake
cluster, what a pod's Python may write and see, the offline pip, the manifests' tokens. The journey itself runs with
`make journey` (docs/testing.md, Journey)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from charts.code_bundle import locked_requirements
from tests.conftest import readme_spec_k5_config_dict
from tests.journey import images
from tests.journey.cluster import PAUSED, Cluster
from tests.journey.manifests import resolve
from tests.journey.network import Addresses
from tests.journey.pods import path_rewriter

HERE = Path(__file__).parent


def test_the_three_profile_config_is_the_readmes_spec_k5_example():
    assert yaml.safe_load((HERE / "three-profiles.yaml").read_text()) == readme_spec_k5_config_dict()


def test_mount_paths_are_rewritten_as_whole_path_prefixes_only():
    rewrite = path_rewriter({"/models": "/w/mnt", "/tmp": "/w/rootfs/tmp", "/opt/code": "/w/code"})
    assert rewrite("--models-root /models --dir /models/artifacts/d") == "--models-root /w/mnt --dir /w/mnt/artifacts/d"
    assert rewrite("PYTHONPATH=/tmp/trn-specdec:/tmp/deps") == "PYTHONPATH=/w/rootfs/tmp/trn-specdec:/w/rootfs/tmp/deps"
    assert rewrite('{"model":"/models/checkpoints/Q"}') == '{"model":"/w/mnt/checkpoints/Q"}'
    for untouched in ("s3://bucket/models/x", "/modelsx", "/opt/codes", "/var/tmp/x", "models"):
        assert rewrite(untouched) == untouched


class _NoPods:
    """A host for a cluster that never runs a pod (no node)."""

    images_dir = Path("/nonexistent")
    hidden: tuple[Path, ...] = ()

    def bucket_view(self, bucket: str) -> Path:
        raise AssertionError("no pod runs here")

    def pod_env(self) -> dict[str, str]:
        return {}


def _deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    }


def _scaled_object(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name},
        "spec": {"scaleTargetRef": {"name": name}, "minReplicaCount": 1},
    }


def _replicas_become(cluster: Cluster, name: str, want: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        found = cluster.get("Deployment", "ns", name)
        if found and found["spec"]["replicas"] == want:
            return True
        time.sleep(0.05)
    return False


def test_keda_holds_a_paused_target_at_the_paused_count_and_puts_a_bare_scale_to_zero_back(tmp_path):
    cluster = Cluster(tmp_path, Addresses(), host=_NoPods(), trn2_max_nodes=0, trn2_nodes=0, system_nodes=0)
    try:
        cluster.apply_object(_deployment("spec"), "ns")
        cluster.apply_object(_scaled_object("spec"), "ns")
        assert cluster.kubectl(["-n", "ns", "scale", "deploy/spec", "--replicas=0"])[0] == 0
        assert _replicas_become(cluster, "spec", 1), "KEDA puts a target below minReplicaCount back to it"
        pause = ["-n", "ns", "annotate", "scaledobject/spec", f"{PAUSED}=0", "--overwrite"]
        assert cluster.kubectl(pause)[0] == 0
        assert _replicas_become(cluster, "spec", 0)
        time.sleep(0.5)  # several reconciles: the pause holds
        assert cluster.get("Deployment", "ns", "spec")["spec"]["replicas"] == 0  # type: ignore[index]
        assert cluster.kubectl(["-n", "ns", "annotate", "scaledobject/spec", f"{PAUSED}-"])[0] == 0
        assert _replicas_become(cluster, "spec", 1)
        code, _, err = cluster.kubectl(["-n", "ns", "get", "job", "nope", "-o", "json"])
        assert code == 1 and err.startswith('Error from server (NotFound): jobs.batch "nope" not found')
    finally:
        cluster.close()


PROBE = """
import errno, sys
try:
    open(sys.argv[1] + "/new", "w")
except OSError as err:
    print("write", errno.errorcode[err.errno])
try:
    open(sys.argv[2]).read()
except OSError as err:
    print("hidden", errno.errorcode[err.errno])
print("image", len(open(sys.argv[3]).read()) > 0)
"""


def test_a_pods_python_cannot_write_its_read_only_mounts_nor_see_the_deployers_folders(tmp_path):
    mount, laptop = tmp_path / "mount", tmp_path / "laptop"
    mount.mkdir()
    laptop.mkdir()
    (laptop / "crossover.json").write_text("{}")
    image_file = images.IMAGE_CODE / "standin_vllm.py"
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(images.SITE),
        "JOURNEY_READ_ONLY": str(mount),
        "JOURNEY_HIDDEN": f"{laptop}:{images.IMAGE_CODE.parent}",
        "JOURNEY_IMAGE": str(images.IMAGE_CODE),
    }
    args = [sys.executable, "-c", PROBE, str(mount), str(laptop / "crossover.json"), str(image_file)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=30)
    assert done.stdout.split("\n")[:3] == ["write EROFS", "hidden ENOENT", "image True"], done.stderr


def _pip(tmp_path: Path, requirements: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "requirements.txt"
    path.write_text(requirements)
    argv = ["install", "--quiet", "--require-hashes", "--target", str(tmp_path / "deps"), "-r", str(path)]
    return subprocess.run(
        [sys.executable, str(images.IMAGE_CODE / "standin_pip.py"), *argv], capture_output=True, text=True, timeout=30
    )


def test_the_offline_pip_accepts_the_locked_requirements_and_refuses_another_version(tmp_path):
    locked = locked_requirements("aiohttp")
    assert _pip(tmp_path, locked).returncode == 0
    name, version = locked.split(" ", 1)[0].split("==")
    other = _pip(tmp_path, locked.replace(f"{name}=={version}", f"{name}==0.0.1", 1))
    assert other.returncode == 1 and f"{name}==0.0.1 is pinned" in other.stderr


@pytest.mark.parametrize(
    ("token", "value"),
    [
        ({"Ref": "AWS::AccountId"}, "123456789012"),
        ({"Fn::Join": ["-", ["a", {"Ref": "AWS::Region"}]]}, "a-us-east-2"),
        ({"Fn::ImportValue": "Stack:Workspace1"}, "journey-stack-workspace1"),
    ],
)
def test_manifest_tokens_resolve_as_cloudformation_would_in_the_journeys_account(token, value):
    assert resolve(json.loads(json.dumps(token)), "123456789012", "us-east-2") == value
