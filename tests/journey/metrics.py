"""The journey's live-metrics step: a real Prometheus (the pinned 2.42, tests/prometheus.py) scrapes the world's
running pods through the rendered scrape configuration (its relabel and keep rules as rendered, Kubernetes discovery
swapped for static targets carrying the labels discovery would give the same pods), loads the rendered alert rules,
and answers every query the deployment reads: each live-dashboard panel and annotation, each alert rule, each KEDA
trigger. What the managed collector, Grafana, AMP's ruler and KEDA would ask AMP, asked here of the same series.

What is not the real thing, and why: scrapes and rule evaluations every second instead of 30 s (so the journey waits
seconds); the kube-scheduler job is not run (it discovers the EKS API server's endpoints, which do not exist here), so
`scheduler_pending_pods` has no series and the rule reading it is evaluated but named as unfed; the dashboard's
CloudWatch panel is checked against what `bench run --cloudwatch` put into moto's CloudWatch (ListMetrics for each
series its SEARCH names), since moto has no metric-math SEARCH.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.journey.manifests import Rendered
from tests.prometheus import DiscoveredPod, Prometheus, runnable_scrape_config, running_prometheus, vector_selectors

PROMETHEUS_UID = "amp"
# Series only the EKS control plane serves (the scrape job of the kube-scheduler's metrics): no world has them.
CONTROL_PLANE_SERIES = {"scheduler_pending_pods": "the EKS control plane's kube-scheduler (not run in the journey)"}


class MetricsFailed(Exception):
    """What broke, as one sentence naming the panel, rule or trigger and its query."""


@dataclass(frozen=True)
class Evaluated:
    panels: int
    text_panels: int
    annotations: int
    rules: int
    triggers: int
    cloudwatch: int
    png: Path


def scrape_configuration(rendered: Rendered) -> dict[str, Any]:
    """The managed collector's configuration as the Cluster stack deploys it (AWS::APS::Scraper)."""
    (scraper,) = [r for r in rendered.template("Cluster")["Resources"].values() if r["Type"] == "AWS::APS::Scraper"]
    return yaml.safe_load(scraper["Properties"]["ScrapeConfiguration"]["ConfigurationBlob"]["Fn::Base64"])


def alert_rules(rendered: Rendered) -> dict[str, Any]:
    """The rule group the Observability stack deploys into the workspace (AWS::APS::RuleGroupsNamespace)."""
    (namespace,) = [
        r
        for r in rendered.template("Observability")["Resources"].values()
        if r["Type"] == "AWS::APS::RuleGroupsNamespace"
    ]
    return yaml.safe_load(namespace["Properties"]["Data"])


def dashboard(rendered: Rendered) -> dict[str, Any]:
    """The live dashboard's JSON as the Grafana chart's values provision it (tokens, e.g. the workspace URL, aside)."""
    for resource in rendered.template("Cluster")["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] == "Custom::AWSCDK-EKS-HelmChart" and props.get("Chart") == "grafana":
            raw = props["Values"]
            text = (
                raw
                if isinstance(raw, str)
                else "".join(p if isinstance(p, str) else "TOKEN" for p in raw["Fn::Join"][1])
            )
            (provider,) = json.loads(text)["dashboards"].values()
            (board,) = provider.values()
            return json.loads(board["json"])
    raise MetricsFailed("the Cluster template installs no grafana chart, so there is no live dashboard to check")


def keda_queries(rendered: Rendered) -> dict[str, str]:
    """Each ScaledObject's prometheus triggers: `<scaledobject>/<trigger>` -> its query."""
    return {
        f"{so['metadata']['name']}/{t.get('name', t['type'])}": t["metadata"]["query"]
        for so in rendered.find("ScaledObject")
        for t in so["spec"]["triggers"]
        if t["type"] == "prometheus"
    }


def discovered(pods: list[dict[str, Any]]) -> list[DiscoveredPod]:
    """The world's running pods as the pod role of kubernetes_sd_configs would list them."""
    out = []
    for pod in pods:
        ip = pod.get("status", {}).get("podIP")
        if not ip or "deletionTimestamp" in pod["metadata"]:
            continue
        owner = next(iter(pod["metadata"].get("ownerReferences", [])), None)
        out.append(
            DiscoveredPod(
                name=pod["metadata"]["name"],
                namespace=pod["metadata"]["namespace"],
                template={"metadata": pod["metadata"], "spec": pod["spec"]},
                ip=ip,
                node=pod["spec"].get("nodeName", "node"),
                controller=(owner["kind"], owner["name"]) if owner else None,
            )
        )
    return out


def _finite(sample: dict[str, Any]) -> bool:
    return math.isfinite(float(sample["value"][1]))


def _series(expr: str) -> set[str]:
    """The metric names an expression selects, by the pinned PromQL parser."""
    import promql_parser

    return {s.name for s in vector_selectors(promql_parser.parse(expr))}


@contextmanager
def prometheus_on(rendered: Rendered, pods: list[dict[str, Any]], workdir: Path) -> Iterator[Prometheus]:
    """Prometheus scraping `pods` through the rendered scrape configuration, with the rendered alert rules loaded,
    once every kept target has been scraped."""
    found = discovered(pods)
    config = runnable_scrape_config(scrape_configuration(rendered), found)
    kept = [j["job_name"] for j in config["scrape_configs"]]
    with running_prometheus(config, workdir, rule_files={"alerts.yaml": alert_rules(rendered)}) as prom:
        prom.wait_for("count(up == 1) by (job)", lambda r: {s["metric"]["job"] for s in r} >= set(kept), timeout_s=30.0)
        # Every kept target scraped once before any traffic: a rate needs a sample from before the change.
        deadline = time.monotonic() + 30.0
        while not all(t["health"] == "up" for t in prom.active_targets()):
            if time.monotonic() > deadline:
                raise MetricsFailed("not every scraped pod answered Prometheus within 30 s")
            time.sleep(0.2)
        yield prom


ENDPOINT_REQUESTS = 24


def drive(urls: list[str], model: str, requests: int = 6, endpoints: list[str] | None = None) -> None:
    """Completions against each serving pod and, more of them, the endpoint, a few at a time, so every histogram,
    counter and gauge the queries read moves between two scrapes. The endpoint draws an arm per request by the
    weights: 24 requests leave an arm of weight 50 without one once in 2^24 runs (6 did once in 64, and its spill
    panel read 0/0)."""
    body = json.dumps({"model": model, "prompt": "Shall I compare thee", "max_tokens": 24}).encode()

    def one(url: str) -> None:
        request = urllib.request.Request(
            url + "/v1/completions", data=body, headers={"content-type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as r:  # loopback pod addresses
            r.read()

    sent = [(u, requests) for u in urls] + [(u, ENDPOINT_REQUESTS) for u in endpoints or []]
    threads = [threading.Thread(target=one, args=(u,)) for u, n in sent for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)


def evaluate(prom: Prometheus, rendered: Rendered, namespace: str, cloudwatch: Any, out: Path) -> Evaluated:
    """Every query on the running Prometheus; MetricsFailed names what has no data (or errs)."""
    board = dashboard(rendered)
    problems: list[str] = []
    drawn, text, cw = _panels(prom, board, cloudwatch, problems)
    for a in board["annotations"]["list"]:
        prom.query(a["expr"])  # an annotation may be empty (no scale step yet); it must evaluate
    rules = _rules(prom, rendered, namespace, problems)
    triggers = keda_queries(rendered)
    for name, query in triggers.items():
        result = prom.query(query)
        if len(result) != 1 or not _finite(result[0]):
            problems.append(f"KEDA trigger {name}: {query} returned {result or 'no series'} (KEDA reads one value)")
    if problems:
        raise MetricsFailed("; ".join(problems[:6]) + (f" (and {len(problems) - 6} more)" if len(problems) > 6 else ""))
    annotations = len(board["annotations"]["list"])
    return Evaluated(len(drawn), text, annotations, rules, len(triggers), cw, draw(prom, drawn, out))


def _panels(
    prom: Prometheus, board: dict[str, Any], cloudwatch: Any, problems: list[str]
) -> tuple[list[tuple[str, str]], int, int]:
    """Each panel's queries: Prometheus ones must return a finite value, a text panel must say why it has none, a
    CloudWatch one must find its series in CloudWatch. Returns (panel title, query) pairs, text and CloudWatch counts."""
    drawn: list[tuple[str, str]] = []
    text = cw = 0
    for panel in (p for p in board["panels"] if p["type"] != "row"):
        targets = panel.get("targets", [])
        if not targets:
            if not panel.get("options", {}).get("content", "").strip():
                problems.append(f"panel {panel['title']!r} has no query and does not say why")
            text += 1
        for t in targets:
            if t["datasource"]["uid"] == PROMETHEUS_UID:
                result = prom.query(t["expr"])
                if not any(_finite(s) for s in result):
                    problems.append(f"panel {panel['title']!r}: {t['expr']} returned {result or 'no series'}")
                drawn.append((panel["title"], t["expr"]))
            elif t["datasource"]["type"] == "cloudwatch":
                cw += 1
                if problem := _cloudwatch_problem(cloudwatch, t["expression"]):
                    problems.append(f"panel {panel['title']!r}: {problem}")
    return drawn, text, cw


def _cloudwatch_problem(cloudwatch: Any, expression: str) -> str | None:
    """The series a panel's SEARCH names, in CloudWatch (moto has no SEARCH: ListMetrics with the same names)."""
    found = re.search(r"\{([^,]+),.*MetricName=\"([^\"]+)\".*Variant=\"([^\"]+)\"", expression)
    if found is None:
        return f"its CloudWatch expression {expression!r} names no namespace, metric and Variant"
    space, metric, variant = found.groups()
    listed = cloudwatch.list_metrics(
        Namespace=space, MetricName=metric, Dimensions=[{"Name": "Variant", "Value": variant}]
    )["Metrics"]
    if listed:
        return None
    return f"CloudWatch has no {metric} of Variant {variant} in {space} (bench run --cloudwatch publishes it)"


def _rules(prom: Prometheus, rendered: Rendered, namespace: str, problems: list[str]) -> int:
    """Every rendered alert rule loaded, evaluated without error, and each series it reads served by a scraped pod
    (but the control plane's)."""
    evaluated = prom.rules()
    rendered_rules = [r for g in alert_rules(rendered)["groups"] for r in g["rules"]]
    if len(evaluated) != len(rendered_rules):
        problems.append(f"Prometheus loaded {len(evaluated)} alert rules of the {len(rendered_rules)} rendered")
    for rule in evaluated:
        if rule.get("health") != "ok":
            problems.append(f"alert {rule['name']}: {rule.get('health')} ({rule.get('lastError')})")
        for name in sorted(_series(rule["query"]) - set(CONTROL_PLANE_SERIES) - {"up"}):
            if not prom.query(f'count({{__name__="{name}",namespace="{namespace}"}})'):
                problems.append(f"alert {rule['name']} reads {name}, which no scraped pod serves")
    return len(evaluated)


def draw(prom: Prometheus, queries: list[tuple[str, str]], out: Path) -> Path:
    """The panels' values over the last minute as one PNG: what a newcomer looks at before paying for a trn2."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    titles = list(dict.fromkeys(title for title, _ in queries))
    cols = 3
    rows = math.ceil(len(titles) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 2.6 * rows), squeeze=False)
    end = time.time()
    for ax, title in zip(axes.flat, titles, strict=False):
        for _, expr in (q for q in queries if q[0] == title):
            for series in prom.query_range(expr, end - 60, end, 1):
                points = [(float(t) - end, float(v)) for t, v in series["values"] if math.isfinite(float(v))]
                if points:
                    ax.plot(*zip(*points, strict=True), linewidth=1)
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("seconds before the query", fontsize=6)
        ax.tick_params(labelsize=6)
    for ax in list(axes.flat)[len(titles) :]:
        ax.axis("off")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out
