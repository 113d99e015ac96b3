"""The autoscaling objects as their receivers see them: KEDA's pinned CRD schemas, the Kubernetes schemas, a PromQL
parser, and the HPA algorithm KEDA hands them to (replayed with the rendered numbers)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from charts.autoscaling import render_autoscaling
from config import DeploymentConfig, parse_config
from tests.charts.conftest import QUERY_URL, of_kind, vllm_of_kind
from tests.charts.hpa_replay import replay, scrape_interval
from tests.conftest import ROOT, default_config_dict

KEDA = json.loads((Path(__file__).with_name("fixtures") / "keda_2_20_2.json").read_text())


def plugin_two_nodes() -> DeploymentConfig:
    """The vllm-neuron example on two trn2 nodes: 32 devices, 4 per replica, two profiles -> up to 4 replicas each."""
    import yaml

    data = yaml.safe_load((ROOT / "config" / "vllm-neuron.yaml").read_text())
    data["trn2_nodes"].update(min_size=2, desired_size=2, max_size=2)
    return parse_config(data)


@pytest.fixture(scope="module")
def scaled(plugin_config) -> dict[str, dict[str, Any]]:
    return of_kind(render_autoscaling(plugin_config, QUERY_URL), "ScaledObject")


def strict(schema: Any) -> Any:
    """The CRD schema as the API server applies it with strict field validation: an object's unknown fields are
    errors (structural schemas prune them; `kubectl apply --validate=strict` rejects them)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def validate_keda(obj: dict[str, Any]) -> None:
    assert obj["apiVersion"] == KEDA["apiVersion"]
    jsonschema.validate(obj["spec"], strict(KEDA["specSchemas"][obj["kind"]]))


def test_keda_objects_validate_against_the_pinned_crd_schemas(default_config, plugin_config):
    for config in (default_config, plugin_config, plugin_two_nodes()):
        objects = render_autoscaling(config, QUERY_URL)
        keda = [o for o in objects if o["apiVersion"].startswith("keda.sh/")]
        assert {o["kind"] for o in keda} == {"ScaledObject", "TriggerAuthentication"}
        for obj in keda:
            validate_keda(obj)


def test_keda_schema_check_rejects_a_misspelt_field(scaled):
    """Guard that the check is strict: a misspelt behavior field must fail, as the API server would refuse it."""
    obj = copy.deepcopy(next(iter(scaled.values())))
    obj["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]["stabilisationWindowSeconds"] = 0
    with pytest.raises(jsonschema.ValidationError):
        validate_keda(obj)


def test_other_autoscaling_objects_validate_against_the_clusters_kubernetes_schemas(plugin_config):
    others = [o for o in render_autoscaling(plugin_config, QUERY_URL) if not o["apiVersion"].startswith("keda.sh/")]
    assert {o["kind"] for o in others} == {"NetworkPolicy"}
    for obj in others:
        kubernetes_validate.validate(obj, f"{plugin_config.kubernetes_version}.0", strict=True)


def test_one_scaled_object_per_profile_targets_its_rendered_deployment(plugin_serving_objects, scaled):
    deployments = vllm_of_kind(plugin_serving_objects, "Deployment")  # not the endpoint's router
    assert {s["spec"]["scaleTargetRef"]["name"] for s in scaled.values()} == set(deployments)
    for obj in scaled.values():
        ref = obj["spec"]["scaleTargetRef"]
        assert (ref["apiVersion"], ref["kind"]) == ("apps/v1", "Deployment")
        assert obj["metadata"]["namespace"] == deployments[ref["name"]]["metadata"]["namespace"]


def test_queries_select_the_profile_label_the_scraper_puts_on_its_pods(plugin_config, scaled):
    for name, obj in scaled.items():
        for trigger in obj["spec"]["triggers"]:
            assert f'profile="{name}"' in trigger["metadata"]["query"]
            assert f'namespace="{plugin_config.namespace}"' in trigger["metadata"]["query"]
            assert trigger["metadata"]["serverAddress"] == QUERY_URL


def test_thresholds_follow_the_compiled_batch():
    data = default_config_dict()
    data["serving"]["max_num_seqs"] = 8
    config = parse_config(data)
    for obj in of_kind(render_autoscaling(config, QUERY_URL), "ScaledObject").values():
        thresholds = {t["name"]: t["metadata"]["threshold"] for t in obj["spec"]["triggers"]}
        assert thresholds == {"requests-waiting": "4", "requests-running": "8"}


def test_the_waiting_threshold_rounds_down_to_a_whole_request():
    """0.3 x max_num_seqs 4 = 1.2 waiting requests: KEDA adds a replica above 1, not above 2 (rounding up would let
    a queue of 2 per replica sit unanswered)."""
    data = default_config_dict()
    data["scaling"] = {**data.get("scaling", {}), "waiting_per_replica": 0.3}
    config = parse_config(data)
    assert {p.max_num_seqs for p in config.profiles} == {4}
    objects = of_kind(render_autoscaling(config, QUERY_URL), "ScaledObject")
    thresholds = {n: {t["name"]: t["metadata"]["threshold"] for t in o["spec"]["triggers"]} for n, o in objects.items()}
    assert thresholds == {
        "baseline": {"requests-waiting": "1", "requests-running": "4"},
        "speculative": {"requests-waiting": "1", "requests-running": "4"},
    }


def test_no_profile_scales_to_zero_and_max_fills_a_fair_share_of_the_devices():
    config = plugin_two_nodes()
    objects = of_kind(render_autoscaling(config, QUERY_URL), "ScaledObject")
    devices = {p.name: p.placement.devices for p in config.profiles}
    assert {o["spec"]["minReplicaCount"] for o in objects.values()} == {1}
    assert {n: o["spec"]["maxReplicaCount"] for n, o in objects.items()} == {"baseline": 4, "eagle3": 4}
    assert sum(o["spec"]["maxReplicaCount"] * devices[n] for n, o in objects.items()) <= 2 * 16


def test_scaling_switched_off_renders_no_keda_object_but_keeps_the_scraper_access():
    data = default_config_dict()
    data["scaling"] = {"enabled": False}
    kinds = {o["kind"] for o in render_autoscaling(parse_config(data), QUERY_URL)}
    assert "ScaledObject" not in kinds and "TriggerAuthentication" not in kinds
    assert "NetworkPolicy" in kinds


# --- replay of the HPA KEDA creates, with the rendered numbers --------------------------------------------------

METRICS = {"requests-waiting": "waiting", "requests-running": "running"}


def step(before: int, after: int, at: int):
    return lambda now: before if now < at else after


def test_a_warm_schedule_adds_a_cron_trigger_the_pinned_keda_accepts(default_config):
    """KEDA's cron scaler reads timezone, start, end and desiredReplicas (docs: Scalers, Cron); the HPA takes the
    largest proposal, so the queue triggers stay."""
    data = default_config_dict()
    window = {"timezone": "Europe/Berlin", "start": "30 7 * * 1-5", "end": "0 19 * * 1-5", "replicas": 2}
    data["scaling"]["warm_schedule"] = [window]
    for obj in of_kind(render_autoscaling(parse_config(data), QUERY_URL), "ScaledObject").values():
        validate_keda(obj)
        triggers = {t["name"]: t for t in obj["spec"]["triggers"]}
        assert set(triggers) == {"requests-waiting", "requests-running", "warm-0"}
        assert triggers["warm-0"]["type"] == "cron"
        assert triggers["warm-0"]["metadata"] == {
            "timezone": "Europe/Berlin",
            "start": "30 7 * * 1-5",
            "end": "0 19 * * 1-5",
            "desiredReplicas": "2",
        }
    plain = of_kind(render_autoscaling(default_config, QUERY_URL), "ScaledObject")
    assert all(len(o["spec"]["triggers"]) == 2 for o in plain.values())  # no schedule, no cron trigger


def test_a_step_from_2_to_8_requests_adds_one_replica_and_no_more_one_scrape_late():
    config = plugin_two_nodes()
    spec = of_kind(render_autoscaling(config, QUERY_URL), "ScaledObject")["eagle3"]["spec"]
    profile = config.profile("eagle3")
    lag = scrape_interval(config)
    history = replay(
        spec, clients=step(2, 8, 60), batch=profile.max_num_seqs, time_to_ready=900, seconds=3600, metric_of=METRICS,
        scrape_interval=lag,
    )  # fmt: skip
    assert {r for t, r, _ in history if t < 60 + lag} == {1}  # the step is not in the workspace until the next scrape
    assert {r for t, r, _ in history if t >= 60 + lag} == {2}  # one replica, kept once it serves


def test_a_large_step_adds_exactly_one_replica_per_scale_up_period_up_to_the_max():
    config = plugin_two_nodes()
    spec = of_kind(render_autoscaling(config, QUERY_URL), "ScaledObject")["eagle3"]["spec"]
    period = config.scaling.scale_up_period_seconds  # what the config asks for; the replay reads the rendered object
    lag = scrape_interval(config)
    history = replay(
        spec, clients=step(2, 32, 0), batch=4, time_to_ready=period, seconds=4 * period, metric_of=METRICS,
        scrape_interval=lag,
    )  # fmt: skip
    increases = [(t, r) for (t, r, _), (_, before, _) in zip(history[1:], history, strict=False) if r > before]
    assert [t for t, _ in increases] == [
        lag,
        lag + period,
        lag + 2 * period,
    ]  # the first sync after the scrape adds one
    assert [r for _, r in increases] == [2, 3, 4] and history[-1][1] == spec["maxReplicaCount"]


def test_a_drop_back_scales_down_only_after_the_stabilization_window():
    config = plugin_two_nodes()
    spec = of_kind(render_autoscaling(config, QUERY_URL), "ScaledObject")["eagle3"]["spec"]
    window = config.scaling.scale_down_stabilization_seconds  # asked for; the replay reads the rendered object
    lag = scrape_interval(config)
    drop = 1800
    clients = lambda now: 8 if 60 <= now < drop else 2  # noqa: E731
    history = replay(
        spec, clients=clients, batch=4, time_to_ready=900, seconds=drop + 2 * window, metric_of=METRICS,
        scrape_interval=lag,
    )  # fmt: skip
    assert {r for t, r, _ in history if 60 + lag <= t < drop + lag + window - 15} == {2}
    assert {r for t, r, _ in history if t >= drop + lag + window} == {1}


def test_the_replay_reads_the_workload_as_the_last_scrape_saw_it():
    """A scrape just after the step (phase 1 s) shows it at the next sync; one just before it, a whole interval later."""
    config = plugin_two_nodes()
    spec = of_kind(render_autoscaling(config, QUERY_URL), "ScaledObject")["eagle3"]["spec"]
    lag = scrape_interval(config)
    first_add = {}
    for phase in (1, lag - 1):
        history = replay(
            spec, clients=step(2, 8, 60), batch=4, time_to_ready=900, seconds=300, metric_of=METRICS,
            scrape_interval=lag, scrape_phase=phase,
        )  # fmt: skip
        first_add[phase] = min(t for t, r, _ in history if r == 2)
    assert first_add == {1: 75, lag - 1: 60 + lag}


def test_the_replay_notices_a_scaled_object_without_its_scale_up_policy():
    """Without our policy the HPA's default (4 pods or 100% per 15 s) adds replicas while the first still loads."""
    config = plugin_two_nodes()
    spec = copy.deepcopy(of_kind(render_autoscaling(config, QUERY_URL), "ScaledObject")["eagle3"]["spec"])
    del spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]["policies"]
    lag = scrape_interval(config)
    history = replay(
        spec, clients=step(2, 32, 0), batch=4, time_to_ready=900, seconds=900, metric_of=METRICS, scrape_interval=lag
    )
    assert max(r for _, r, _ in history) > 2


# --- PromQL, parsed by a real parser (promql-parser, the Rust parser's Python binding; not in the shared venv) ---


def selectors(promql: Any, expr: Any) -> list[Any]:
    """Every vector selector in a parsed expression."""
    if isinstance(expr, promql.VectorSelector):
        return [expr]
    children = [getattr(expr, a) for a in ("lhs", "rhs", "expr") if hasattr(expr, a)]
    return [s for child in children for s in selectors(promql, child)]


def test_every_query_parses_as_promql_and_reads_only_scraped_series(plugin_config):
    import promql_parser as promql

    from stacks.constructs.managed_prometheus import SCHEDULER_METRICS
    from stacks.constructs.serving_alert_rules import alert_rules

    scaled = of_kind(render_autoscaling(plugin_config, QUERY_URL), "ScaledObject").values()
    queries = [t["metadata"]["query"] for o in scaled for t in o["spec"]["triggers"]]
    queries += [r["expr"] for g in alert_rules(plugin_config)["groups"] for r in g["rules"]]
    assert len(queries) == 2 * 2 + 1 + 2 * 2  # triggers; pending; per profile: saturated, no Ready replica
    for query in queries:
        for sel in selectors(promql, promql.parse(query)):
            labels = {m.name: m.value for m in sel.matchers.matchers}
            if sel.name in SCHEDULER_METRICS:
                continue
            # vLLM's own series (kept by the scrape's name filter) or the scrape's `up`, always of one profile.
            assert sel.name == "up" or sel.name.startswith(("vllm:", "vllm_neuron:")), query
            assert labels.keys() == {"namespace", "profile"}, query
    with pytest.raises(ValueError):
        promql.parse("sum(vllm:num_requests_waiting{profile=})")


def test_scaled_objects_of_two_profiles_differ_only_in_the_profile_they_name(scaled):
    """Replicas that share a node stay alike: same thresholds, windows, policies and limits for baseline and eagle3
    (their compiled batches and devices are equal), so only the profile's name may differ."""
    (a, b), (obj_a, obj_b) = zip(*sorted(scaled.items()), strict=True)
    assert json.dumps(obj_a).replace(f'"{a}"', '"P"').replace(f'\\"{a}\\"', '\\"P\\"') == json.dumps(obj_b).replace(
        f'"{b}"', '"P"'
    ).replace(f'\\"{b}\\"', '\\"P\\"')
