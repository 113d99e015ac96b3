"""The benchmark dashboard reads exactly the metrics bench/cloudwatch.py writes; the alarms watch this
cluster's nodes and every serving Service by the names the charts give them."""

from __future__ import annotations

import json

from bench.prompts import DEFAULT_SUITE
from charts.serving_chart import render_groups


def _body(synth) -> dict:
    (dash,) = synth.resources("Observability", "AWS::CloudWatch::Dashboard").values()
    body = dash["Properties"]["DashboardBody"]
    text = (
        body
        if isinstance(body, str)
        else "".join(p if isinstance(p, str) else "us-east-2" for p in body["Fn::Join"][1])
    )
    return json.loads(text)


def _metrics(body: dict) -> list[list]:
    return [m for w in body["widgets"] for m in w.get("properties", {}).get("metrics", [])]


def test_every_test_case_has_itl_for_each_variant_and_a_speedup(synth):
    body = _body(synth)
    metrics = _metrics(body)
    namespace = synth.config.observability.metrics_namespace
    for case in DEFAULT_SUITE:
        for profile in synth.config.profiles:
            assert any(
                m[:6] == [namespace, "ITL", "TestCase", case.name, "Variant", profile.name]
                or m[:6] == [namespace, "ITL", "Variant", profile.name, "TestCase", case.name]
                for m in metrics
            ), (case.name, profile.name)
    expressions = [m[0]["expression"] for m in metrics if isinstance(m[0], dict) and "expression" in m[0]]
    speedups = [e for e in expressions if e.startswith("base /")]
    assert len(speedups) == len(DEFAULT_SUITE) * (len(synth.config.profiles) - 1)


def test_without_a_node_price_the_dashboard_says_how_to_see_cost(synth):
    body = _body(synth)
    texts = [w["properties"]["markdown"] for w in body["widgets"] if w["type"] == "text"]
    assert any("set trn2_nodes.hourly_price_usd to see cost" in t for t in texts)
    assert not [w for w in body["widgets"] if "USD" in w.get("properties", {}).get("title", "")]


def test_with_a_node_price_each_variant_has_cost_per_million_tokens_from_its_throughput(three_profile_synths):
    """40 USD per node-hour, each of three profiles claiming 8 of a node's 16 devices: 20 USD/h each, so USD per
    1M output tokens = 20e6 / 3600 / (tok/s) = 5555.56 / RunOutputThroughput, for every test case."""
    priced = three_profile_synths["readme-spec-k5"]
    config = priced.config
    body = _body(priced)
    cost = {
        w["properties"]["title"]: w["properties"]["metrics"]
        for w in body["widgets"]
        if "USD" in w.get("properties", {}).get("title", "")
    }
    assert sorted(cost) == sorted(f"{p.name}: USD per 1M output tokens at 20.00 USD/h" for p in config.profiles)
    for title, metrics in cost.items():
        variant = title.split(":")[0]
        expressions = [m[0] for m in metrics if isinstance(m[0], dict)]
        assert [e["expression"] for e in expressions] == [
            f"5555.56 / tput{i}" for i in range(1, len(DEFAULT_SUITE) + 1)
        ]
        assert [e["label"] for e in expressions] == [c.name for c in DEFAULT_SUITE]
        inputs = [m for m in metrics if not isinstance(m[0], dict)]
        namespace = config.observability.metrics_namespace
        for i, (m, case) in enumerate(zip(inputs, DEFAULT_SUITE, strict=True), start=1):
            assert m[:2] == [namespace, "RunOutputThroughput"] and m[-1]["id"] == f"tput{i}"
            assert {"Variant": variant, "TestCase": case.name} == dict(zip(m[2:6:2], m[3:6:2], strict=True))


def test_dashboard_has_no_neuron_monitor_series_under_dra(synth):
    """neuron-monitor does not support the Neuron DRA driver: a series from it would stay empty."""
    assert "neuroncore" not in json.dumps(_body(synth)).lower()


def _is_vllm_service(o: dict) -> bool:
    """A profile's Service (the endpoint's router is not a serving service: its dashboard row is still to come)."""
    return o["kind"] == "Service" and o["metadata"]["labels"].get("app.kubernetes.io/name") == "vllm"


def test_dashboard_shows_running_pods_of_every_rendered_serving_service(synth):
    config = synth.config
    rendered = [o for group in render_groups(config, "bucket").values() for o in group if _is_vllm_service(o)]
    running = [m for m in _metrics(_body(synth)) if m[:2] == ["ContainerInsights", "service_number_of_running_pods"]]
    shown = [dict(zip(m[2:8:2], m[3:8:2], strict=True)) for m in running]
    assert sorted(shown, key=lambda d: d["Service"]) == sorted(
        (
            {
                "ClusterName": config.cluster_name,
                "Namespace": o["metadata"]["namespace"],
                "Service": o["metadata"]["name"],
            }
            for o in rendered
        ),
        key=lambda d: d["Service"],
    )


def test_dashboard_searches_pod_cpu_in_this_clusters_serving_namespace(synth):
    expressions = [m[0]["expression"] for m in _metrics(_body(synth)) if isinstance(m[0], dict)]
    (search,) = [e for e in expressions if "pod_cpu_utilization" in e]
    assert f'ClusterName="{synth.config.cluster_name}"' in search
    assert f'Namespace="{synth.config.namespace}"' in search


def _alarms(synth) -> dict[str, dict]:
    return {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in synth.resources("Observability", "AWS::CloudWatch::Alarm").values()
    }


def test_alarms_watch_this_clusters_nodes_and_every_serving_service(synth):
    config = synth.config
    serving_objects = [o for group in render_groups(config, "bucket").values() for o in group]
    alarms = _alarms(synth)
    nodes = alarms[f"{config.name}-failed-nodes"]
    assert (nodes["Namespace"], nodes["MetricName"]) == ("ContainerInsights", "cluster_failed_node_count")
    assert nodes["Dimensions"] == [{"Name": "ClusterName", "Value": config.cluster_name}]
    services = {o["metadata"]["name"] for o in serving_objects if _is_vllm_service(o)}
    watched = set()
    for profile in config.profiles:
        alarm = alarms[f"{config.name}-{profile.name}-not-serving"]
        dims = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
        assert dims == {"Service": profile.name, "Namespace": config.namespace, "ClusterName": config.cluster_name}
        assert alarm["MetricName"] == "service_number_of_running_pods" and alarm["TreatMissingData"] == "breaching"
        watched.add(dims["Service"])
    assert watched == services
    assert all("AlarmActions" not in a for a in alarms.values())  # no topic configured: state only
    # Decision 12 as amended (docs/decisions.md, "Alerting: two evaluators, one topic"): CloudWatch asks only the
    # cluster-state questions, from Container Insights; every serving series is alerted on in the workspace.
    assert {a["Namespace"] for a in alarms.values()} == {"ContainerInsights"}
    assert len(alarms) == 1 + len(config.profiles)


def test_alarms_notify_the_configured_topic_on_alarm_and_recovery(variant_synth):
    topic = variant_synth.config.observability.alarm_topic_arn
    alarms = _alarms(variant_synth)
    assert len(alarms) == 1 + len(variant_synth.config.profiles)
    for alarm in alarms.values():
        assert alarm["AlarmActions"] == [topic] and alarm["OKActions"] == [topic]
