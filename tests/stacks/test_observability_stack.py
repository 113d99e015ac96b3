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
    speedups = [e for e in expressions if "/" in e and "SEARCH" not in e]
    assert len(speedups) == len(DEFAULT_SUITE) * (len(synth.config.profiles) - 1)


def test_dashboard_has_no_neuron_monitor_series_under_dra(synth):
    """neuron-monitor does not support the Neuron DRA driver: a series from it would stay empty."""
    assert "neuroncore" not in json.dumps(_body(synth)).lower()


def test_dashboard_shows_running_pods_of_every_rendered_serving_service(synth):
    config = synth.config
    rendered = [o for group in render_groups(config, "bucket").values() for o in group if o["kind"] == "Service"]
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
    services = {o["metadata"]["name"] for o in serving_objects if o["kind"] == "Service"}
    watched = set()
    for profile in config.profiles:
        alarm = alarms[f"{config.name}-{profile.name}-not-serving"]
        dims = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
        assert dims == {"Service": profile.name, "Namespace": config.namespace, "ClusterName": config.cluster_name}
        assert alarm["MetricName"] == "service_number_of_running_pods" and alarm["TreatMissingData"] == "breaching"
        watched.add(dims["Service"])
    assert watched == services
    assert all("AlarmActions" not in a for a in alarms.values())  # no topic configured: state only


def test_alarms_notify_the_configured_topic_on_alarm_and_recovery(variant_synth):
    topic = variant_synth.config.observability.alarm_topic_arn
    alarms = _alarms(variant_synth)
    assert len(alarms) == 1 + len(variant_synth.config.profiles)
    for alarm in alarms.values():
        assert alarm["AlarmActions"] == [topic] and alarm["OKActions"] == [topic]
