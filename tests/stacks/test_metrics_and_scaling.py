"""The live metrics store, its scraper, KEDA and the alarms, read from the synthesized templates and checked against
what the rendered pods carry, the pinned KEDA chart and the names the pinned CloudWatch add-on publishes."""

from __future__ import annotations

import json
import re
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml

from charts import render_serving
from charts.metrics_proxy import METRICS_PORT_NAME as METRICS_PROXY_PORT_NAME
from config.labels import PROFILE as PROFILE_POD_LABEL
from config.metrics import NAMESPACE_LABEL, POD_LABEL, PROFILE_LABEL
from serving_stacks import stack_named
from stacks import container_insights
from tests.prometheus import (
    DiscoveredPod,
    exposition_server,
    kubernetes_sd_problems,
    promtool,
    runnable_scrape_config,
    running_prometheus,
    without_kubernetes_sd,
)

KEDA = json.loads((Path(__file__).parents[1] / "charts" / "fixtures" / "keda_2_20_2.json").read_text())


def _props(synth, type_: str, suffix: str = "Cluster") -> list[dict[str, Any]]:
    return [r["Properties"] for r in synth.resources(suffix, type_).values()]


def scrape_config(synth) -> dict[str, Any]:
    (scraper,) = _props(synth, "AWS::APS::Scraper")
    return yaml.safe_load(scraper["ScrapeConfiguration"]["ConfigurationBlob"]["Fn::Base64"])


def meta_labels(pod: dict[str, Any], namespace: str, port_name: str) -> dict[str, str]:
    """The discovery labels Prometheus's kubernetes_sd (role pod) gives this pod template's target on `port_name`."""
    labels = {
        "__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", k): v
        for k, v in pod["metadata"]["labels"].items()
    }
    labels["__meta_kubernetes_namespace"] = namespace
    labels["__meta_kubernetes_pod_container_port_name"] = port_name
    return labels


def kept(job: dict[str, Any], labels: dict[str, str]) -> bool:
    for rule in job["relabel_configs"]:
        if rule.get("action") == "keep":
            value = ";".join(labels.get(s, "") for s in rule["source_labels"])
            if not re.fullmatch(rule["regex"], value):
                return False
    return True


def test_the_scraper_scrapes_every_rendered_vllm_pod_through_its_metrics_sidecar(synth, plugin_synth):
    """Role pod discovery makes one target per declared container port: exactly one target per vLLM pod is kept, the
    metrics-only sidecar's (vLLM's own port also serves the /v1 API, charts/metrics_proxy.py), on the stack's path."""
    for s in (synth, plugin_synth):
        config = s.config
        jobs = [j for j in scrape_config(s)["scrape_configs"] if j["job_name"].startswith("vllm")]
        profiles = {p.name for p in config.profiles}  # the vLLM Deployments, not the endpoint's router
        deployments = [
            o
            for o in render_serving(config, "bucket")
            if o["kind"] == "Deployment" and o["metadata"]["name"] in profiles
        ]
        assert len(deployments) == len(config.profiles)
        for d in deployments:
            stack = stack_named(config.profile(d["metadata"]["name"]).image.stack)
            pod = d["spec"]["template"]
            targets = [
                (c["name"], j["metrics_path"])
                for c in pod["spec"]["containers"]
                for port in c.get("ports", [])
                for j in jobs
                if kept(j, meta_labels(pod, d["metadata"]["namespace"], port["name"]))
            ]
            assert targets == [("metrics-proxy", stack.METRICS_PATH)], d["metadata"]["name"]


def test_the_scraper_keeps_only_vllm_series_and_the_schedulers_pending_pods(synth):
    jobs = {j["job_name"]: j for j in scrape_config(synth)["scrape_configs"]}
    assert set(jobs) == {"vllm", "endpoint", "kube-scheduler"}
    (name_filter,) = jobs["vllm"]["metric_relabel_configs"]
    assert re.fullmatch(name_filter["regex"], "vllm:num_requests_waiting")
    assert not re.fullmatch(name_filter["regex"], "python_gc_objects_collected_total")
    (pending,) = jobs["kube-scheduler"]["metric_relabel_configs"]
    assert pending["regex"] == "scheduler_pending_pods"


def test_the_scrapers_blob_is_the_configuration_the_dashboard_tests_read(synth):
    """tests/charts/test_live_dashboard.py computes the kept series from scrape_configuration(serving_scrape_jobs);
    the template carries exactly that."""
    from stacks.constructs.managed_prometheus import scrape_configuration, serving_scrape_jobs

    assert scrape_config(synth) == yaml.safe_load(scrape_configuration(serving_scrape_jobs(synth.config)))


def test_the_scraper_reads_the_rendered_endpoint_pod_on_its_metrics_port_only(synth):
    """The endpoint job finds the router's pod (and no vLLM pod) on the port whose listener serves only
    /stats/prometheus; the endpoint's NetworkPolicy admits the VPC, where the scraper's interfaces are, to that port."""
    (job,) = [j for j in scrape_config(synth)["scrape_configs"] if j["job_name"] == "endpoint"]
    objects = render_serving(synth.config, "bucket")
    ns = synth.config.namespace
    pods = {o["metadata"]["name"]: o["spec"]["template"] for o in objects if o["kind"] == "Deployment"}
    assert [n for n, pod in pods.items() if kept(job, meta_labels(pod, ns, "metrics"))] == ["endpoint"]
    assert not kept(job, meta_labels(pods["endpoint"], ns, "http"))
    assert job["metrics_path"] == "/stats/prometheus"
    (policy,) = [
        o for o in objects if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "endpoint-from-namespace"
    ]
    from_vpc = [
        r for r in policy["spec"]["ingress"] if r["from"] == [{"ipBlock": {"cidr": synth.config.network.vpc_cidr}}]
    ]
    assert [p["port"] for r in from_vpc for p in r["ports"]] == [9902]


# AMP user guide, "Using an AWS managed collector" > Scraper configuration
# (https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html): "The scraper config can't specify a
# scrape interval of less than 30 seconds"; the complete list of allowed sections is global, scrape_config,
# static_config, relabel_config, metric_relabel_configs and kubernetes_sd_config; an authorization, if any, is the
# service-account token file. Written here as the guide says, not imported from the code under test.
AMP_MIN_SCRAPE_INTERVAL_S = 30
AMP_SCRAPE_CONFIG_FIELDS = {
    "job_name", "metrics_path", "scheme", "scrape_interval", "scrape_timeout", "honor_labels", "authorization",
    "bearer_token_file", "static_configs", "kubernetes_sd_configs", "relabel_configs", "metric_relabel_configs",
}  # fmt: skip
AMP_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?")


def prometheus_seconds(text: str) -> float:
    """A Prometheus duration (`30s`, `1m`, `1m30s`, `500ms`) in seconds."""
    match = _DURATION.fullmatch(text)
    assert match and text, f"not a Prometheus duration: {text!r}"
    h, m, s, ms = (int(g or 0) for g in match.groups())
    return h * 3600 + m * 60 + s + ms / 1000


def test_prometheus_seconds_reads_the_duration_forms():
    assert [prometheus_seconds(t) for t in ("15s", "1m", "1m30s", "500ms", "2h")] == [15, 60, 90, 0.5, 7200]


def test_no_rendered_scrape_interval_is_below_the_managed_collectors_minimum(synth, plugin_synth, variant_synth):
    for s in (synth, plugin_synth, variant_synth):
        config = scrape_config(s)
        assert set(config) <= {"global", "scrape_configs"}
        intervals = [config["global"]["scrape_interval"]]
        intervals += [j["scrape_interval"] for j in config["scrape_configs"] if "scrape_interval" in j]
        assert all(prometheus_seconds(i) >= AMP_MIN_SCRAPE_INTERVAL_S for i in intervals), intervals


def test_every_scrape_job_uses_only_sections_the_managed_collector_accepts(synth, plugin_synth):
    for s in (synth, plugin_synth):
        for job in scrape_config(s)["scrape_configs"]:
            assert set(job) <= AMP_SCRAPE_CONFIG_FIELDS, (job["job_name"], set(job) - AMP_SCRAPE_CONFIG_FIELDS)
            assert job.get("bearer_token_file", AMP_TOKEN_FILE) == AMP_TOKEN_FILE
            assert all(sd.keys() <= {"role", "namespaces"} for sd in job["kubernetes_sd_configs"])


def test_promtool_accepts_every_rendered_scrape_configuration(synth, plugin_synth, three_profile_synths, tmp_path):
    """The pinned Prometheus's own loader (`promtool check config`) on the scraper's blob, beside AMP's limits above:
    every field, duration, regex and relabel action. Debian's build has no Kubernetes discovery (tests/prometheus.py),
    so the kubernetes_sd_configs blocks are set aside for promtool and read against v2.42's own rules instead.
    --syntax-only: the scheduler job's bearer token file exists only where the managed collector runs, and promtool
    would otherwise require it on this disk (cmd/promtool/main.go checkConfig at v2.42.0)."""
    for s in (synth, plugin_synth, *three_profile_synths.values()):
        rendered = scrape_config(s)
        assert kubernetes_sd_problems(rendered) == []
        path = tmp_path / f"{s.config.name}-{len(s.config.profiles)}.yml"
        path.write_text(yaml.safe_dump(without_kubernetes_sd(rendered), sort_keys=False))
        done = promtool("check", "config", "--syntax-only", str(path))
        assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


def test_promtool_refuses_a_scrape_configuration_prometheus_would_not_load(synth, tmp_path):
    """The checks above are not vacuous: a relabel regex RE2 cannot compile fails promtool; an unknown discovery role
    fails the discovery check."""
    config = scrape_config(synth)
    config["scrape_configs"][0]["relabel_configs"][0]["regex"] = "vllm(?=x)"  # RE2 has no lookahead
    path = tmp_path / "broken.yml"
    path.write_text(yaml.safe_dump(without_kubernetes_sd(config), sort_keys=False))
    done = promtool("check", "config", "--syntax-only", str(path))
    assert done.returncode != 0 and "FAILED" in done.stderr + done.stdout
    config["scrape_configs"][0]["kubernetes_sd_configs"][0]["role"] = "pods"
    assert kubernetes_sd_problems(config)


EXPOSED = """\
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{model_name="m"}} {waiting}
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{model_name="m"}} 42
# TYPE vllm_neuron:neuroncore_utilization gauge
vllm_neuron:neuroncore_utilization{{core="0"}} 0.5
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{{generation="0"}} 10
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 1.5
"""
ENVOY_EXPOSED = """\
envoy_cluster_upstream_rq_total{{envoy_cluster_name="{arm}-capped"}} 7
envoy_cluster_upstream_rq_total{{envoy_cluster_name="metrics_proxy"}} 3
envoy_cluster_upstream_cx_total{{envoy_cluster_name="{arm}-capped"}} 2
vllm:num_requests_waiting 99
"""
KEPT = ("vllm:num_requests_waiting", "vllm:generation_tokens_total", "vllm_neuron:neuroncore_utilization")
NOT_KEPT = ("python_gc_objects_collected_total", "process_cpu_seconds_total", "envoy_cluster_upstream_cx_total")


@pytest.mark.parametrize("which", ["synth", "plugin_synth"], ids=["legacy-v0", "vllm-neuron"])
def test_the_rendered_scrape_jobs_run_on_prometheus_keep_the_vllm_series_with_their_target_labels(
    which, request, tmp_path
):
    """The blob's own relabel and keep rules on the real Prometheus 2.42: each rendered Deployment as one running
    pod, Kubernetes discovery swapped for static targets with the labels it gives those pods (tests/prometheus.py).
    Every port of every pod is served here, vLLM's own API port with the same series as its metrics sidecar: only the
    sidecars are scraped by the vLLM job, each kept series carries its profile, namespace and pod, the rest is not
    stored; the endpoint job keeps only the arms' Envoy counters."""
    synth_ = request.getfixturevalue(which)
    config = synth_.config
    rendered = scrape_config(synth_)
    deployments = [o for o in render_serving(config, "bucket") if o["kind"] == "Deployment"]
    arm = config.profiles[-1].name
    (endpoint_job,) = [j for j in rendered["scrape_configs"] if j["job_name"] == "endpoint"]
    with ExitStack() as stack:
        pods, sidecars = [], {}
        for i, d in enumerate(deployments):
            name, template = d["metadata"]["name"], d["spec"]["template"]
            profile = next((p for p in config.profiles if p.name == name), None)  # else the endpoint's router
            if profile is not None:
                path, body = stack_named(profile.image.stack).METRICS_PATH, EXPOSED.format(waiting=i)
            else:
                path, body = endpoint_job["metrics_path"], ENVOY_EXPOSED.format(arm=arm)
            ports = [port["name"] for c in template["spec"]["containers"] for port in c.get("ports", [])]
            addresses = {port: stack.enter_context(exposition_server(path, body)) for port in ports}
            pod = DiscoveredPod(
                name=f"{name}-5d9c7f8b4-x{i}q2w",
                namespace=d["metadata"]["namespace"],
                template=template,
                addresses=addresses,
                controller=("ReplicaSet", f"{name}-5d9c7f8b4"),
            )
            pods.append(pod)
            if profile is not None:
                sidecars[addresses[METRICS_PROXY_PORT_NAME]] = pod
        runnable = runnable_scrape_config(rendered, pods)
        assert {j["job_name"] for j in runnable["scrape_configs"]} == {
            j["job_name"] for j in rendered["scrape_configs"] if j["job_name"] != "kube-scheduler"
        }
        (tmp_path / "runnable.yml").write_text(yaml.safe_dump(runnable, sort_keys=False))
        checked = promtool("check", "config", str(tmp_path / "runnable.yml"))  # also relabels the static targets
        assert checked.returncode == 0, checked.stdout + checked.stderr
        with running_prometheus(runnable, tmp_path / "prometheus") as prom:
            up = prom.wait_for("up == 1", lambda r: len(r) == len(sidecars) + 1)
            vllm_jobs = {s["metric"]["job"] for s in up} - {"endpoint"}
            assert {s["metric"]["instance"] for s in up if s["metric"]["job"] in vllm_jobs} == set(sidecars)
            assert len(prom.query("up")) == len(up)  # no other target was kept (and failed its scrape)
            for name in KEPT:
                found = {s["metric"]["instance"]: s["metric"] for s in prom.query(f'{{__name__="{name}"}}')}
                assert set(found) == set(sidecars), name
                for instance, labels in found.items():
                    pod = sidecars[instance]
                    assert labels[PROFILE_LABEL] == pod.template["metadata"]["labels"][PROFILE_POD_LABEL]
                    assert (labels[NAMESPACE_LABEL], labels[POD_LABEL]) == (config.namespace, pod.name)
                    assert not [k for k in labels if k.startswith("__meta_")]
            for name in NOT_KEPT:
                assert prom.query(f'{{__name__="{name}"}}') == [], name
            (envoy,) = prom.query("envoy_cluster_upstream_rq_total")
            assert envoy["metric"]["envoy_cluster_name"] == f"{arm}-capped"


def test_the_scraper_writes_to_the_workspace_from_the_clusters_private_subnets(synth):
    (scraper,) = _props(synth, "AWS::APS::Scraper")
    (workspace_id,) = synth.resources("Cluster", "AWS::APS::Workspace")
    assert scraper["Destination"]["AmpConfiguration"]["WorkspaceArn"] == {"Fn::GetAtt": [workspace_id, "Arn"]}
    eks_source = scraper["Source"]["EksConfiguration"]
    assert len(eks_source["SubnetIds"]) == len(synth.config.network.availability_zones)
    assert all("private" in json.dumps(s) for s in eks_source["SubnetIds"])


def test_keda_is_the_pinned_chart_and_sets_only_values_that_chart_has(synth):
    charts = {c["Chart"]: c for c in _props(synth, "Custom::AWSCDK-EKS-HelmChart")}
    keda = charts["keda"]
    pinned = KEDA["_provenance"]["chart"]["version"]
    assert keda["Version"] == pinned and keda["Repository"] == "https://kedacore.github.io/charts"

    def check(ours: dict[str, Any], theirs: dict[str, Any], path: str) -> None:
        for key, value in ours.items():
            assert key in theirs, f"{path}{key} is not a value of keda chart {pinned}"
            if isinstance(value, dict) and theirs[key]:  # an empty default map takes any keys
                check(value, theirs[key], f"{path}{key}.")

    check(json.loads(keda["Values"]), KEDA["values"], "")


def test_keda_may_only_query_the_metrics_workspace(synth):
    template = synth.template("Cluster")
    (workspace_id,) = synth.resources("Cluster", "AWS::APS::Workspace")
    (assoc,) = [a for a in _props(synth, "AWS::EKS::PodIdentityAssociation") if a["Namespace"] == "keda"]
    assert assoc["ServiceAccount"] == "keda-operator"
    role_id = assoc["RoleArn"]["Fn::GetAtt"][0]
    statements = synth.role_statements(role_id)
    assert statements == [
        {"Action": "aps:QueryMetrics", "Effect": "Allow", "Resource": {"Fn::GetAtt": [workspace_id, "Arn"]}}
    ]
    assert "ManagedPolicyArns" not in template["Resources"][role_id]["Properties"]


def test_the_cloudwatch_addon_is_pinned_to_the_version_whose_names_the_alarms_read(synth):
    addons = {a["AddonName"]: a for a in _props(synth, "AWS::EKS::Addon")}
    assert addons[container_insights.ADDON_NAME]["AddonVersion"].startswith(
        container_insights.NAMES_READ_AT + "-eksbuild."
    )


def container_insights_reads(template: dict[str, Any]) -> list[tuple[str, tuple[str, ...]]]:
    """(metric name, sorted dimension names) of every Container Insights series an alarm or widget reads."""
    reads = []
    for res in template["Resources"].values():
        props = res["Properties"]
        if res["Type"] == "AWS::CloudWatch::Alarm" and props.get("Namespace") == container_insights.NAMESPACE:
            reads.append((props["MetricName"], tuple(sorted(d["Name"] for d in props["Dimensions"]))))
        if res["Type"] == "AWS::CloudWatch::Dashboard":
            body = props["DashboardBody"]
            text = body if isinstance(body, str) else "".join(p for p in body["Fn::Join"][1] if isinstance(p, str))
            for widget in json.loads(text)["widgets"]:
                for m in widget.get("properties", {}).get("metrics", []):
                    if m[0] == container_insights.NAMESPACE:
                        dims = [d for d in m[2:] if not isinstance(d, dict)][::2]
                        reads.append((m[1], tuple(sorted(dims))))
                    elif isinstance(m[0], dict) and "SEARCH(" in m[0].get("expression", ""):
                        schema = re.search(r"\{([^}]*)\}", m[0]["expression"]).group(1).split(",")
                        if schema[0] == container_insights.NAMESPACE:
                            (name,) = re.findall(r'MetricName="([^"]+)"', m[0]["expression"])
                            reads.append((name, tuple(sorted(schema[1:]))))
    return reads


def test_alarms_and_widgets_read_only_names_the_pinned_addon_publishes(synth, variant_synth):
    for s in (synth, variant_synth):
        reads = container_insights_reads(s.template("Observability"))
        assert len(reads) >= 1 + 2 * len(s.config.profiles) + 1  # nodes, per service alarm and widget, pod CPU
        for name, dims in reads:
            published = container_insights.CLASSIC_METRICS.get(name, ())
            assert tuple(sorted(dims)) in {tuple(sorted(d)) for d in published}, (name, dims)


def test_alert_rules_watch_pending_pods_and_each_profile_at_its_maximum(synth):
    (rules,) = _props(synth, "AWS::APS::RuleGroupsNamespace", "Observability")
    alerts = {r["alert"]: r for g in yaml.safe_load(rules["Data"])["groups"] for r in g["rules"]}
    assert set(alerts) == {"ReplicasPendingAboveTrn2Capacity"} | {
        f"{alert}-{p.name}"
        for p in synth.config.profiles
        for alert in ("QueueAboveThresholdAtMaxReplicas", "ScaleUpWithoutReadyReplica")
    }
    # Pending longer than CA takes to bring a node (2 x 600 s): the ceiling; no Ready replica in 2 x time-to-Ready.
    assert alerts["ReplicasPendingAboveTrn2Capacity"]["for"] == "1200s"
    assert {alerts[f"ScaleUpWithoutReadyReplica-{p.name}"]["for"] for p in synth.config.profiles} == {"1800s"}
    assert {alerts[f"QueueAboveThresholdAtMaxReplicas-{p.name}"]["for"] for p in synth.config.profiles} == {"10m"}
    assert "Fn::ImportValue" in json.dumps(rules["Workspace"])  # the Cluster stack's workspace


def test_alerts_reach_the_configured_topic_through_the_workspace_alert_manager(synth, variant_synth):
    (plain,) = _props(synth, "AWS::APS::Workspace")
    assert "AlertManagerDefinition" not in plain
    (notifying,) = _props(variant_synth, "AWS::APS::Workspace")
    manager = yaml.safe_load(yaml.safe_load(notifying["AlertManagerDefinition"])["alertmanager_config"])
    (receiver,) = manager["receivers"]
    assert receiver["sns_configs"][0]["topic_arn"] == variant_synth.config.observability.alarm_topic_arn
