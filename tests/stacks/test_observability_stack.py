"""The benchmark dashboard reads exactly the metrics bench/cloudwatch.py writes."""

from __future__ import annotations

import json

from bench.prompts import DEFAULT_SUITE


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


def test_dashboard_shows_neuroncore_utilization_of_this_cluster(synth):
    expressions = [m[0]["expression"] for m in _metrics(_body(synth)) if isinstance(m[0], dict)]
    assert any("node_neuroncore_utilization" in e and synth.config.cluster_name in e for e in expressions)
