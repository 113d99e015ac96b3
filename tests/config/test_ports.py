"""The port vocabulary (config/ports.py) against what we render, and the rule that checks the config's ports
against it: every port a rendered pod listens on is one the config sets or one config/ports.py names for that kind
of pod, so a port hard-coded anywhere else fails here, and each port named there is refused on the config field
that shares its pod."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from charts import render_serving
from charts.endpoint import LABELS as ENDPOINT_LABELS
from charts.envoy_bootstrap import spill_thresholds
from charts.jobs.bench import LOSSLESS, RUN, SWEEP, render_bench_job
from charts.jobs.model_build import render_build_job
from charts.jobs.stage import render_stage_job
from config import ConfigError, DeploymentConfig, parse_config
from config.labels import VLLM_POD_LABELS
from config.ports import VLLM_POD_PORTS, endpoint_pod_ports
from tests.conftest import EXAMPLE_ACCOUNT, ROOT, default_config_dict, readme_spec_k5_config_dict

FIRST_PORT = 8100  # the ports the configs below set: none of them a fixed one, so neither hides a fixed port


def _three_profiles() -> dict[str, Any]:
    data = readme_spec_k5_config_dict()
    data["endpoint"]["weights"] = {"baseline": 50, "speculative": 25, "spec-k5": 25}  # two spilling arms: two gates
    return data


def _plugin() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "config" / "vllm-neuron.yaml").read_text())
    data.setdefault("endpoint", {})["weights"] = {"baseline": 50, "eagle3": 50}
    return data


def _with_own_ports(data: dict[str, Any]) -> DeploymentConfig:
    data["endpoint"]["port"] = FIRST_PORT
    for i, profile in enumerate(data["profiles"]):
        profile["port"] = FIRST_PORT + 1 + i
    return parse_config(data)


@pytest.fixture(scope="module", params=[_three_profiles, _plugin], ids=["legacy-v0-three-profiles", "vllm-neuron"])
def rendered(request: pytest.FixtureRequest) -> tuple[DeploymentConfig, list[dict[str, Any]]]:
    """Everything we render that runs pods: the deployed objects, and every Job `make` renders."""
    config = _with_own_ports(request.param())
    objects = render_serving(config, config.models_bucket_name(EXAMPLE_ACCOUNT))
    objects += render_stage_job(config, config.models_in_use(), EXAMPLE_ACCOUNT)
    for p in config.profiles:
        objects += render_build_job(config, p.name, EXAMPLE_ACCOUNT)
    for mode in (RUN, LOSSLESS, SWEEP):
        objects += render_bench_job(config, EXAMPLE_ACCOUNT, "run1", [], mode=mode)
    return config, objects


def pods(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, str], dict[str, Any]]]:
    """(kind/name, pod labels, pod spec) of every pod template (Deployment, Job, ...) and bare Pod."""
    for obj in objects:
        spec = obj.get("spec") or {}
        template = spec.get("template") if isinstance(spec.get("template"), dict) else None
        if template is not None and "containers" in template.get("spec", {}):
            yield f"{obj['kind']}/{obj['metadata']['name']}", template["metadata"].get("labels", {}), template["spec"]
        elif obj["kind"] == "Pod":
            yield f"Pod/{obj['metadata']['name']}", obj["metadata"].get("labels", {}), spec


def _envoy_ports(bootstrap: dict[str, Any]) -> set[int]:
    addresses = [listener["address"] for listener in bootstrap.get("static_resources", {}).get("listeners", [])]
    addresses += [bootstrap["admin"]["address"]] if "admin" in bootstrap else []
    return {a["socket_address"]["port_value"] for a in addresses}


def bootstraps(pod: dict[str, Any], objects: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every Envoy configuration the pod runs: on a container's command line, or in a ConfigMap it mounts."""
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        argv = [*container.get("command", []), *container.get("args", [])]
        if "--config-yaml" in argv:
            yield yaml.safe_load(argv[argv.index("--config-yaml") + 1])
    mounted = {v["configMap"]["name"] for v in pod.get("volumes", []) if "configMap" in v}
    for obj in objects:
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] in mounted:
            for text in (obj.get("data") or {}).values():
                try:
                    loaded = yaml.safe_load(text)
                except yaml.YAMLError:
                    continue
                if isinstance(loaded, dict) and "static_resources" in loaded:
                    yield loaded


def listening_ports(pod: dict[str, Any], objects: list[dict[str, Any]]) -> set[int]:
    """The containerPorts the pod declares and the ports its Envoys listen on (listeners and admin)."""
    declared = {
        port["containerPort"]
        for container in [*pod.get("initContainers", []), *pod["containers"]]
        for port in container.get("ports", [])
    }
    return declared.union(*(_envoy_ports(b) for b in bootstraps(pod, objects)))


def test_every_fixed_port_a_rendered_pod_listens_on_is_named_for_that_pod_in_config_ports(
    rendered: tuple[DeploymentConfig, list[dict[str, Any]]],
) -> None:
    """A vLLM pod has the metrics sidecar's port, the router pod its admin, metrics and one gate per spilling arm,
    the Jobs none; a port hard-coded anywhere else (or named in the vocabulary and not rendered) fails here."""
    config, objects = rendered
    configured = {p.port for p in config.profiles} | {config.endpoint.port}
    seen = set()
    for name, labels, pod in pods(objects):
        if VLLM_POD_LABELS.items() <= labels.items():
            expected, kind = set(VLLM_POD_PORTS), "vllm"
        elif labels == ENDPOINT_LABELS:
            expected, kind = set(endpoint_pod_ports(len(spill_thresholds(config)))), "endpoint"
        else:
            expected, kind = set(), "job"
        fixed = listening_ports(pod, objects) - configured
        assert fixed == expected, f"{name}: fixed ports {sorted(fixed)}, config/ports.py names {sorted(expected)}"
        seen.add(kind)
    assert seen == {"vllm", "endpoint", "job"}, seen  # the walk found every kind of pod


def test_the_walk_sees_a_port_hard_coded_in_a_sidecar_and_in_a_mounted_envoy_config() -> None:
    """The check itself: an admin listener added to a sidecar's Envoy and a listener in a mounted ConfigMap."""
    sidecar = {"admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 9401}}}}
    mounted = {"static_resources": {"listeners": [{"address": {"socket_address": {"port_value": 9999}}}]}}
    pod = {
        "containers": [
            {"name": "s", "args": ["--config-yaml", yaml.safe_dump(sidecar)], "ports": [{"containerPort": 1}]}
        ],
        "volumes": [{"name": "c", "configMap": {"name": "cm"}}],
    }
    objects = [{"kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"envoy.yaml": yaml.safe_dump(mounted)}}]
    assert listening_ports(pod, objects) == {1, 9401, 9999}


def _problems(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    return "\n".join(err.value.problems)


@pytest.mark.parametrize("port", sorted(VLLM_POD_PORTS))
def test_a_profile_on_a_port_of_its_vllm_pod_is_refused_with_the_collision_and_the_fix(port: int) -> None:
    """Port 9400 used to validate, render, and then collide with the pod's own metrics sidecar."""
    data = default_config_dict()
    data["profiles"][1]["port"] = port
    said = _problems(data)
    assert f"profiles[1] (speculative).port={port} is the port of the {VLLM_POD_PORTS[port]} in the same pod" in said
    assert "use another port, e.g. 8000" in said and "profiles[0]" not in said


def test_every_port_of_the_router_pod_is_refused_as_endpoint_port() -> None:
    data = default_config_dict()
    for port, what in endpoint_pod_ports(len(data["profiles"])).items():
        data["endpoint"]["port"] = port
        assert f"endpoint.port={port} is the router's own {what} port" in _problems(data)
