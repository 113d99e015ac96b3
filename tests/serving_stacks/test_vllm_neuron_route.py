"""The vllm-neuron stack on its compilation route, read from the rendered objects (config/vllm-neuron.yaml):
every environment variable has a cited reader, build and serve run the same route, environment, image and cache
layout, and the route is part of the artifact digest."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from charts import render_serving
from charts.jobs.model_build import render_build_job
from config import parse_config
from config.schema import DeploymentConfig
from model_build.digest import profile_digest
from serving_stacks import vllm_neuron
from tests.conftest import EXAMPLE_ACCOUNT, ROOT

BUCKET = "trn-specdec-models-000000000000-us-east-2"


@pytest.fixture(scope="module")
def config() -> DeploymentConfig:
    """The shipped vllm-neuron example, with an API key Secret so that every variable a pod can carry renders."""
    data = yaml.safe_load((ROOT / "config" / "vllm-neuron.yaml").read_text())
    data["api_key_secret"] = "vllm-api-key"
    return parse_config(data)


def env_of(container: dict[str, Any]) -> dict[str, str | None]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def pod_of(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"]


@pytest.fixture(scope="module")
def rendered(config) -> dict[str, dict[str, dict[str, Any]]]:
    """profile -> {"service": Deployment pod, "build": build Job pod}, as rendered."""
    deployments = {o["metadata"]["name"]: o for o in render_serving(config, BUCKET) if o["kind"] == "Deployment"}
    found = {}
    for p in config.profiles:
        (job,) = [o for o in render_build_job(config, p.name, EXAMPLE_ACCOUNT) if o["kind"] == "Job"]
        found[p.name] = {"service": pod_of(deployments[p.name]), "build": pod_of(job)}
    return found


def test_every_env_var_of_a_vllm_neuron_pod_has_a_cited_reader(rendered):
    for profile, pods in rendered.items():
        for kind, pod in pods.items():
            for container in pod.get("initContainers", []) + pod["containers"]:
                uncited = sorted(set(env_of(container)) - set(vllm_neuron.ENV_READERS))
                assert not uncited, (
                    f"{profile} {kind} container {container['name']} sets {uncited}, which serving_stacks/"
                    "vllm_neuron.py ENV_READERS does not cite: cite where the pinned plugin, vLLM or runtime reads "
                    "it, or drop it"
                )


def test_build_and_serve_name_the_native_route(rendered):
    for profile, pods in rendered.items():
        (vllm,) = [c for c in pods["service"]["containers"] if c["name"] == "vllm"]
        (build,) = pods["build"]["containers"]
        for name, container in (("service", vllm), ("build", build)):
            assert env_of(container).get("VLLM_NEURON_BACKEND") == "neuron_native", (profile, name)


def test_build_and_serve_share_image_route_lnc_and_cache_layout(rendered):
    """The cache the build fills is the cache serving reads: the same image, the same plugin environment, the
    compile cache at the same place below VLLM_CACHE_ROOT (the init step copies it file by file)."""
    for profile, pods in rendered.items():
        (vllm,) = [c for c in pods["service"]["containers"] if c["name"] == "vllm"]
        (verify,) = pods["service"]["initContainers"]
        (build,) = pods["build"]["containers"]
        assert build["image"] == vllm["image"] == verify["image"], profile
        serve_env, build_env = env_of(vllm), env_of(build)
        for name in ("VLLM_NEURON_BACKEND", "NEURON_LOGICAL_NC_CONFIG"):
            assert build_env[name] == serve_env[name], (profile, name)
        # serving: the init step copies the published files below VLLM_CACHE_ROOT, the guard watches the cache there
        cache_root = serve_env["VLLM_CACHE_ROOT"]
        assert verify["command"][verify["command"].index("--copy-to") + 1] == cache_root
        assert vllm["command"][vllm["command"].index("--watch") + 1] == f"{cache_root}/neuron/compile_cache"
        # build: the compile writes below its VLLM_CACHE_ROOT, which is the directory it publishes
        script = build["command"][-1]
        (compile_line,) = [line for line in script.splitlines() if " compile " in line]
        (publish_line,) = [line for line in script.splitlines() if " publish " in line]
        out = compile_line.split(" --out ", 1)[1].split()[0]
        assert build_env["VLLM_CACHE_ROOT"] == out, profile
        assert publish_line.endswith(f"--from {out}"), profile


def test_the_route_is_part_of_the_artifact_digest(config, monkeypatch):
    profile = config.profile("eagle3")
    native = profile_digest(config, profile)
    monkeypatch.setattr(vllm_neuron, "ROUTE", "neuron")  # the value some images set
    assert profile_digest(config, profile) != native


def test_the_runtime_lnc_is_the_claimed_lnc(config, rendered):
    """The variable the stack names for the runtime's logical core size carries what the DRA claim configures."""
    claims = {o["metadata"]["name"]: o for o in render_serving(config, BUCKET) if o["kind"] == "ResourceClaimTemplate"}
    for profile, pods in rendered.items():
        (vllm,) = [c for c in pods["service"]["containers"] if c["name"] == "vllm"]
        lnc = claims[f"{profile}-neuron"]["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"]
        assert env_of(vllm)["NEURON_LOGICAL_NC_CONFIG"] == str(lnc["logicalNeuronCore"]), profile
