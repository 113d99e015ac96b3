"""The loopback Prometheus the tests and the journey use (tests/prometheus.py): it starts on a port nobody holds,
answers instant and range queries, stops cleanly; a rendered pod becomes the targets Kubernetes discovery would give."""

from __future__ import annotations

import time

import pytest

from tests import prometheus
from tests.ports import squatted_port
from tests.prometheus import (
    ADDRESS_IN_USE,
    DiscoveredPod,
    PrometheusError,
    exposition_server,
    pod_static_configs,
    running_prometheus,
)

EMPTY = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "scrape_configs": []}


def test_it_answers_instant_and_range_queries_and_stops_cleanly(tmp_path):
    with running_prometheus(EMPTY, tmp_path) as prom:
        assert prom.url.startswith("http://127.0.0.1:")
        assert prom.query("vector(42)")[0]["value"][1] == "42"
        now = time.time()
        (at,) = prom.query("time()", at=now - 60)
        assert float(at["value"][1]) == pytest.approx(now - 60, abs=0.01)
        (series,) = prom.query_range("vector(1) + 1", start=now - 10, end=now, step=5)
        assert [v for _, v in series["values"]] == ["2", "2", "2"]
        with pytest.raises(PrometheusError, match=r"bad_data.*parse error"):
            prom.query("sum(")
        process = prom.process
    assert process.returncode == 0  # SIGTERM: a clean shutdown, not a kill
    assert "See you next time!" in prom.log.read_text()


def test_rule_files_are_written_beside_the_configuration_and_evaluated(tmp_path):
    rules = {"groups": [{"name": "g", "rules": [{"record": "answer", "expr": "vector(42)"}]}]}
    with running_prometheus(EMPTY, tmp_path, rule_files={"answer.yaml": rules}) as prom:
        (recorded,) = prom.wait_for("answer")
    assert recorded["value"][1] == "42"


def test_a_port_taken_between_the_pick_and_the_bind_is_replaced_by_another(tmp_path, monkeypatch):
    """The race the harness closes: the free port it picked is bound by someone else before Prometheus binds it."""
    with squatted_port(monkeypatch, prometheus) as taken, running_prometheus(EMPTY, tmp_path) as prom:
        assert not prom.url.endswith(f":{taken}")
        assert prom.query("vector(1)")
    assert ADDRESS_IN_USE in (tmp_path / f"prometheus-{taken}.log").read_text()


def test_a_configuration_prometheus_refuses_fails_with_its_own_words(tmp_path):
    bad = {"global": {"scrape_interval": "1s"}, "scrape_configs": [{"job_name": "x", "no_such_field": 1}]}
    expected = r"(?s)did not become ready.*field no_such_field not found"
    with pytest.raises(PrometheusError, match=expected), running_prometheus(bad, tmp_path):
        pass


POD = {
    "metadata": {"labels": {"app.kubernetes.io/name": "vllm", "trn-specdec/profile": "baseline"}},
    "spec": {
        "initContainers": [{"name": "verify-artifact", "image": "img:init"}],
        "containers": [
            {"name": "vllm", "image": "img:1", "ports": [{"containerPort": 8000, "name": "http"}]},
            {"name": "metrics-proxy", "image": "img:2", "ports": [{"containerPort": 9400, "name": "metrics"}]},
        ],
    },
}


def test_a_pod_becomes_one_target_per_declared_port_and_one_per_init_container_without_ports():
    """pod.go `buildPod` at v2.42.0: containers, then init containers; a port-free target where none is declared."""
    pod = DiscoveredPod(name="baseline-7c9d-x2x4q", namespace="ns", template=POD, addresses={"metrics": "127.0.0.1:1"})
    targets = pod_static_configs(pod)
    assert [t["targets"] for t in targets] == [["127.0.0.1:8000"], ["127.0.0.1:1"], ["127.0.0.1"]]
    http, metrics, init = (t["labels"] for t in targets)
    assert metrics["__meta_kubernetes_pod_container_port_name"] == "metrics"
    assert metrics["__meta_kubernetes_pod_container_port_number"] == "9400"
    assert metrics["__meta_kubernetes_pod_container_name"] == "metrics-proxy"
    assert (
        http["__meta_kubernetes_pod_container_init"] == "false"
        and init["__meta_kubernetes_pod_container_init"] == "true"
    )
    assert "__meta_kubernetes_pod_container_port_name" not in init
    for labels in (http, metrics, init):
        assert labels["__meta_kubernetes_namespace"] == "ns"
        assert labels["__meta_kubernetes_pod_name"] == "baseline-7c9d-x2x4q"
        # every character of a Kubernetes label key that is not [a-zA-Z0-9_] becomes _ (SanitizeLabelName)
        assert labels["__meta_kubernetes_pod_label_app_kubernetes_io_name"] == "vllm"
        assert labels["__meta_kubernetes_pod_label_trn_specdec_profile"] == "baseline"
        assert labels["__meta_kubernetes_pod_labelpresent_trn_specdec_profile"] == "true"


def test_static_targets_carrying_meta_labels_are_relabelled_like_discovered_ones(tmp_path):
    """The premise of the swap, on the real binary: a static target's __meta_* labels reach relabel_configs (a keep
    on one and a copy of another) and are gone from the stored series afterwards."""
    keep_metrics_port = [
        {"source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": "metrics", "action": "keep"},
        {"source_labels": ["__meta_kubernetes_pod_label_trn_specdec_profile"], "target_label": "profile"},
    ]
    with exposition_server("/metrics", "demo_up 1\n") as address, exposition_server("/metrics", "demo_up 2\n") as api:
        pod = DiscoveredPod(name="p", namespace="ns", template=POD, addresses={"metrics": address, "http": api})
        job = {"job_name": "j", "static_configs": pod_static_configs(pod), "relabel_configs": keep_metrics_port}
        with running_prometheus({**EMPTY, "scrape_configs": [job]}, tmp_path) as prom:
            (series,) = prom.wait_for("demo_up")
            assert [s["metric"] for s in prom.query("up")] == [{**series["metric"], "__name__": "up"}]
    assert series["metric"] == {"__name__": "demo_up", "instance": address, "job": "j", "profile": "baseline"}


def test_the_pinned_build_has_no_kubernetes_discovery_hence_the_swap(tmp_path):
    """Why the rendered configuration cannot run here as it is: Debian's 2.42 leaves Kubernetes SD out. If a future
    pin has it, this fails, and promtool can check the rendered blob whole."""
    path = tmp_path / "k8s.yml"
    path.write_text("scrape_configs:\n- job_name: x\n  kubernetes_sd_configs:\n  - role: pod\n")
    done = prometheus.promtool("check", "config", "--syntax-only", str(path))
    assert done.returncode == 1
    assert "field kubernetes_sd_configs not found in type config.ScrapeConfig" in done.stdout + done.stderr
