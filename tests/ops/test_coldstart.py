"""The cold-start report reads the cluster's own record: pods (conditions, container state timestamps), nodes,
kubelet events and container logs, shaped exactly as the API returns them (each fixture object is validated
against the Kubernetes OpenAPI schema of the cluster's version). Phases never overlap or go negative, cover the
pod's whole time to Ready, and say why a pod is not Ready. The last test runs the real kubectl against a loopback
API server that serves those objects."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import kubernetes_validate
import pytest

from config import load_config
from config.metrics import COLD_START_PHASE, TIME_TO_READY
from ops import coldstart_report
from ops.coldstart import PHASES, ColdStart, cold_start, metric_datums, node_scale_up_table, report_table
from tests.ops import coldstart_objects as objects
from tests.ops.coldstart_objects import NAMESPACE, NODE, NODE_READY_S, PODS, T0, Timeline, recorded


def _starts() -> dict[str, ColdStart]:
    pods, nodes, events, logs = recorded()
    by_name = {n["metadata"]["name"]: n for n in nodes}
    return {
        p["metadata"]["name"]: cold_start(
            p, by_name.get(p["spec"].get("nodeName", "")), events, *logs[p["metadata"]["name"]]
        )
        for p in pods
    }


def _seconds(start: ColdStart) -> dict[str, float]:
    return {p.name: p.seconds for p in start.phases}


def test_every_fixture_object_is_valid_for_the_clusters_kubernetes_version():
    version = f"{load_config().kubernetes_version}.0"
    pods, nodes, events, _ = recorded()
    for obj in [*pods, *nodes, *events]:
        kubernetes_validate.validate(obj, version, strict=True)
    assert len(pods) == len(PODS) and nodes and events


def test_a_pod_on_a_new_node_starts_at_node_ready_and_every_phase_is_read_from_its_own_record():
    s = _starts()["speculative-7d9f8c6b5-normal"]
    assert s.start_kind == "new node" and s.outcome == "Ready"
    assert s.phases[0].start == T0 + timedelta(seconds=NODE_READY_S)  # not the pod's creation at 0 s
    assert _seconds(s) == {
        "schedule": 10,  # 300 -> 310 PodScheduled
        "claims and volumes": 8,  # -> 318 Pulling
        "image pull": 120,  # -> 438 Pulled
        "container create": 2,  # -> 440 init startedAt
        "artifact check": pytest.approx(12.3),  # -> 452.3 "OK: ... matches" (log, nanoseconds)
        "cache copy": pytest.approx(107.7),  # -> 560 init finishedAt
        "vLLM create": 1,  # -> 561 vllm startedAt
        "model load": pytest.approx(181.6),  # -> 742.6 "init engine ... took"
        "readiness": pytest.approx(7.4),  # -> 750 Ready
    }
    assert s.time_to_ready_s == 450
    assert (s.image_bytes, s.copied_bytes, s.compiled_s) == (objects.IMAGE_BYTES, 48_000_000_000, None)


@pytest.mark.parametrize("name", list(PODS))
def test_phases_are_consecutive_never_negative_and_sum_to_the_time_to_ready(name):
    s = _starts()[name]
    for before, after in zip(s.phases, s.phases[1:], strict=False):
        assert before.end == after.start
    assert all(p.seconds >= 0 for p in s.phases)
    if s.ready:
        assert sum(p.seconds for p in s.phases) == pytest.approx(s.time_to_ready_s)
        assert s.phases[-1].name.endswith("readiness")


def test_a_pod_on_a_ready_node_starts_at_its_creation_and_a_cached_image_pulls_in_zero_seconds():
    s = _starts()["baseline-7d9f8c6b5-slow"]
    assert s.start_kind == "ready node" and s.image_bytes == 0
    seconds = _seconds(s)
    assert seconds["image pull"] == 0 and seconds["cache copy"] == 0  # the legacy stack copies nothing
    assert seconds["model load"] == pytest.approx(1500.2)
    assert s.time_to_ready_s == 1520


@pytest.mark.parametrize(
    ("name", "outcome"),
    [
        ("speculative-7d9f8c6b5-crashing", "not Ready: vllm CrashLoopBackOff, 3 restarts, last exit 1 (Error)"),
        ("speculative-7d9f8c6b5-noartifact", "not Ready: verify-artifact CrashLoopBackOff, 0 restarts, last exit 1"),
        ("baseline-7d9f8c6b5-evicted", "evicted: The node was low on resource: ephemeral-storage."),
        ("speculative-7d9f8c6b5-pending", "not Ready: unschedulable (0/3 nodes are available: 3 cannot allocate"),
    ],
)
def test_a_pod_that_never_became_ready_says_why_and_has_no_time_to_ready(name, outcome):
    s = _starts()[name]
    assert s.outcome.startswith(outcome)
    assert s.time_to_ready_s is None
    assert not [p for p in s.phases if p.name.endswith("readiness")]


def test_a_restarted_pod_counts_its_failed_runs_and_a_compile_while_serving_is_said():
    s = _starts()["baseline-7d9f8c6b5-restarted"]
    assert s.ready and s.compiled_s == 95.0
    assert _seconds(s)["vLLM create"] == 484  # 1016 -> 1500: the two failed runs
    assert any("restarted 2 times" in n for n in s.notes)
    assert any("compiled for 95 s" in n for n in s.notes)
    # its events expired: claims, volumes and the image pull merge into the phase that ends at init start
    assert "claims and volumes + image pull + container create" in _seconds(s)


def test_a_boundary_within_the_apis_one_second_rounding_is_moved_onto_the_previous_one():
    """Ready (whole seconds) can read 0.4 s before vLLM's log line (nanoseconds): readiness is 0 s, not -0.4."""
    profile, node_name, t = PODS["speculative-7d9f8c6b5-normal"]
    t = replace(t, engine_ready=749.4, ready=749)
    s = cold_start(
        objects.pod("p", profile, node_name, t), objects.node(NODE, NODE_READY_S), [], "", objects.vllm_log(t)
    )
    assert _seconds(s)["readiness"] == 0 and not [n for n in s.notes if "clocks disagree" in n]


def test_a_boundary_far_before_the_previous_one_is_said_and_counted_as_zero():
    t = Timeline(created=1000, scheduled=1001, init=(990, 1016), vllm_start=1017, engine_ready=1100, ready=1101)
    s = cold_start(objects.pod("p", "baseline", NODE, t), objects.node(NODE, NODE_READY_S), [], "", objects.vllm_log(t))
    assert all(p.seconds >= 0 for p in s.phases)
    assert any("ended 11 s before it began (clocks disagree)" in n for n in s.notes)


def test_the_table_has_one_row_per_pod_and_one_column_per_phase():
    table = report_table(_starts().values()).splitlines()
    header = [c.strip() for c in table[0].strip("|").split("|")]
    assert header == ["pod", "service", "start", *PHASES, "to Ready", "outcome"]
    assert len(table) == 2 + len(PODS)
    (normal,) = [r for r in table if "-normal" in r]
    assert [c.strip() for c in normal.strip("|").split("|")][3:] == [
        "10", "8", "120", "2", "12", "108", "1", "182", "7", "450", "Ready"
    ]  # fmt: skip


def test_cloudwatch_gets_ready_pods_only_with_the_phases_they_recorded():
    starts = list(_starts().values())
    datums = metric_datums(starts, now=T0 + timedelta(hours=1), max_age_s=14 * 86400)
    ready = [s for s in starts if s.ready]
    to_ready = [d for d in datums if d["MetricName"] == TIME_TO_READY]
    assert sorted(d["Values"][0] for d in to_ready) == sorted(s.time_to_ready_s for s in ready)
    assert {d["Dimensions"][1]["Value"] for d in to_ready} == {"new node", "ready node"}
    phases = {d["Dimensions"][1]["Value"] for d in datums if d["MetricName"] == COLD_START_PHASE}
    assert phases == set(PHASES)  # never a merged "a + b" phase: each series means one thing
    assert all(d["Unit"] == "Seconds" and d["Dimensions"][0]["Name"] == "Variant" for d in datums)
    assert metric_datums(starts, now=T0 + timedelta(days=15), max_age_s=14 * 86400) == []


class _FakeApi(BaseHTTPRequestHandler):
    """The read-only slice of the Kubernetes API that `kubectl get` (with discovery) and `kubectl logs` use."""

    server: _FakeApiServer

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        self.server.requests.append(self.path)
        pods, nodes, events, logs = recorded()
        resources = [
            {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "verbs": ["get", "list"]},
            {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]},
            {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node", "verbs": ["get", "list"]},
            {"name": "events", "singularName": "event", "namespaced": True, "kind": "Event", "verbs": ["get", "list"]},
        ]
        answers = {
            "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
            "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
            "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": resources},
            f"/api/v1/namespaces/{NAMESPACE}/pods": {"kind": "PodList", "apiVersion": "v1", "items": pods},
            "/api/v1/nodes": {"kind": "NodeList", "apiVersion": "v1", "items": nodes},
            f"/api/v1/namespaces/{NAMESPACE}/events": {"kind": "EventList", "apiVersion": "v1", "items": events},
        }
        for answer in answers.values():
            if "items" in answer:
                answer["metadata"] = {"resourceVersion": "4000"}
        for pod in pods:  # `kubectl logs POD` reads the pod first
            answers[f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}"] = pod
        if url.path in answers:
            self._send(200, "application/json", json.dumps(answers[url.path]))
        elif url.path.endswith("/log"):
            pod = url.path.split("/")[-2]
            init, vllm = logs[pod]
            text = {"verify-artifact": init, "vllm": vllm}[query["container"][0]]
            assert query.get("timestamps") == ["true"], self.path
            self._send(200, "text/plain", text)
        else:
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}
            self._send(404, "application/json", json.dumps(status))

    def _send(self, code: int, content_type: str, body: str) -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # keep pytest's output quiet
        pass


class _FakeApiServer(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _FakeApi)
        self.requests: list[str] = []


@pytest.fixture
def fake_api(tmp_path, monkeypatch) -> Iterator[_FakeApiServer]:
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is not on PATH; the ops tests need it")
    server = _FakeApiServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    (tmp_path / "kubeconfig").write_text(json.dumps(config))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    monkeypatch.setenv("HOME", str(tmp_path))  # kubectl's discovery cache
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.timeout(120)
def test_the_report_through_the_real_kubectl_prints_the_table_and_writes_the_png(fake_api, tmp_path, capsys):
    assert coldstart_report.main(["--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert (
        "| speculative-7d9f8c6b5-normal | speculative | new node | 10 | 8 | 120 | 2 | 12 | 108 | 1 | 182 | 7 | 450 |"
        in out
    )
    assert "baseline-7d9f8c6b5-restarted: vLLM compiled for 95 s while starting" in out
    (png,) = (tmp_path / "out").glob("coldstart-*.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    (md,) = (tmp_path / "out").glob("coldstart-*.md")
    assert "image 11800000000 bytes pulled, compile cache 48000000000 bytes copied" in md.read_text()
    asked = [urlsplit(r) for r in fake_api.requests]
    selectors = {u.path: parse_qs(u.query) for u in asked if "Selector" in u.query}
    assert selectors[f"/api/v1/namespaces/{NAMESPACE}/pods"]["labelSelector"] == ["app.kubernetes.io/name=vllm"]
    assert selectors["/api/v1/nodes"]["labelSelector"] == ["trn-specdec/node-role=trn2"]
    assert selectors[f"/api/v1/namespaces/{NAMESPACE}/events"]["fieldSelector"] == ["involvedObject.kind=Pod"]
    assert sum(u.path.endswith("/log") for u in asked) == 2 * len(PODS)
    assert os.environ["KUBECONFIG"].endswith("kubeconfig")


def test_the_v1_engine_line_wins_over_an_earlier_model_loading_line():
    """vLLM V1 logs "Model loading took" before its KV cache and warm-up; the engine line ends the load."""
    profile, node_name, t = PODS["baseline-7d9f8c6b5-restarted"]
    log = f"{objects.log_at(t.vllm_start + 50)} INFO Model loading took 30.5 GiB and 48.0 seconds\n" + objects.vllm_log(
        t
    )
    s = cold_start(objects.pod("p", profile, node_name, t), objects.node(NODE, NODE_READY_S), [], "", log)
    assert _seconds(s)["model load"] == pytest.approx(200.4) and s.compiled_s == 95.0
    s = cold_start(
        objects.pod("p", profile, node_name, t), objects.node(NODE, NODE_READY_S), [], "", log[: log.index("\n") + 1]
    )
    assert _seconds(s)["model load"] == pytest.approx(50)  # a V0 log has only that line


def test_published_numbers_reach_cloudwatch_by_service_and_phase(aws_env):
    """PutMetricData to moto on loopback, then read back as the autoscaler's period would be: the maximum
    TimeToReadySeconds of a service."""
    import boto3

    config = load_config()
    starts = list(_starts().values())
    sent = coldstart_report.publish(
        starts, namespace=config.observability.metrics_namespace, region=config.region, now=T0 + timedelta(hours=1)
    )
    assert sent == len(metric_datums(starts, now=T0 + timedelta(hours=1), max_age_s=14 * 86400))
    cw = boto3.client("cloudwatch", region_name=config.region)

    def maximum(metric: str, dimensions: dict[str, str]) -> float:
        (point,) = cw.get_metric_statistics(
            Namespace=config.observability.metrics_namespace,
            MetricName=metric,
            Dimensions=[{"Name": k, "Value": v} for k, v in dimensions.items()],
            StartTime=T0,
            EndTime=T0 + timedelta(hours=2),
            Period=7200,
            Statistics=["Maximum"],
        )["Datapoints"]
        return point["Maximum"]

    assert maximum(TIME_TO_READY, {"Variant": "baseline", "Start": "ready node"}) == 1520
    assert maximum(TIME_TO_READY, {"Variant": "speculative", "Start": "new node"}) == 450
    assert maximum(COLD_START_PHASE, {"Variant": "speculative", "Phase": "image pull"}) == 120


@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_an_unwritable_out_is_a_sentence_before_any_kubectl_call(where, tmp_path, capsys, monkeypatch):
    """The report folder used to fail after the whole collection, as a traceback."""
    monkeypatch.setattr(
        coldstart_report, "collect", lambda namespace: pytest.fail("collected before --out was checked")
    )
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" if where == "a file" else tmp_path / "file" / "report"
    assert coldstart_report.main(["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--out {str(out)!r}" in err and "choose another --out folder" in err and "Traceback" not in err


def _scale_up_event(name: str, seconds: float) -> dict:
    """The Cluster Autoscaler's event on a pod it adds a node for (CA FAQ, "What events are emitted by CA?")."""
    _, _, events, _ = recorded()
    (kubelet,) = [e for e in events if e["involvedObject"]["name"] == name and e["reason"] == "Pulling"]
    event = json.loads(json.dumps(kubelet))
    event["metadata"].update(name=f"{name}.scaleup", uid=f"uid-event-{name}-scaleup")
    event["involvedObject"].pop("fieldPath")
    event.update(
        reason="TriggeredScaleUp",
        message="pod triggered scale-up: [{eks-trn2-nodes 1->2 (max: 2)}]",
        source={"component": "cluster-autoscaler"},
        firstTimestamp=objects.at(seconds),
        lastTimestamp=objects.at(seconds),
        reportingComponent="cluster-autoscaler",
        reportingInstance="",
    )
    return event


def test_a_pod_that_waited_for_a_new_node_has_its_scale_up_phases():
    pods, nodes, events, logs = recorded()
    name = "speculative-7d9f8c6b5-normal"
    event = _scale_up_event(name, 12)
    kubernetes_validate.validate(event, "1.35.0", strict=True)
    (pod,) = [p for p in pods if p["metadata"]["name"] == name]
    start = cold_start(pod, nodes[0], [*events, event], *logs[name])
    assert {p.name: p.seconds for p in start.node_phases} == {
        "pending until scale-up": 12,  # pod created at 0 -> CA's TriggeredScaleUp
        "node launch": 248,  # -> the node registered (its creationTimestamp, 260 s)
        "node Ready": 40,  # -> 300 Ready condition
        "replica start": 450,  # -> 750 pod Ready (the cold-start table's time to Ready)
    }
    without = cold_start(pod, nodes[0], events, *logs[name])  # the event is gone after about an hour
    assert without.node_phases[0].name == "pending until scale-up + node launch"
    table = node_scale_up_table([start, _starts()["baseline-7d9f8c6b5-slow"]])
    assert name in table and "baseline-7d9f8c6b5-slow" not in table  # that one found its node Ready
    assert "| 12 | 248 | 40 | 450 | 750 |" in table


def test_a_pod_on_a_node_that_was_already_there_has_no_scale_up_phases():
    assert _starts()["baseline-7d9f8c6b5-slow"].node_phases == ()
