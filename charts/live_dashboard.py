"""The live dashboard as code: the Grafana dashboard JSON of the serving A/B, built from the config.

One row per profile (TTFT and inter-token latency p50/p99 from vLLM's histograms, output tokens/s, the live draft
acceptance rate, requests waiting and running, serving replicas), one row for the endpoint (the split per arm and the
spill of each spilling arm, from Envoy's cluster stats) and one for the verdict (live token-weighted ITL speedup of
each speculative profile over the baseline, beside the last benchmark's from CloudWatch). Each profile's panels read
its own stack's series (`ServingProfile.live_metrics`, owned by serving_stacks/contract.py LiveMetrics); a panel its
stack cannot report is a text panel saying why. Every query selects through the labels the scraper writes and KEDA
reads (charts/autoscaling.series_selector); tests/charts/test_live_dashboard.py checks that each one parses as PromQL and
reads only series its profile's vLLM serves and the rendered scrape jobs keep. The viewer and why: docs/dashboard.md.

Rendering only: nothing here runs or queries anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from charts.autoscaling import running_query, series_selector, serving_replicas_query, waiting_query
from charts.envoy_bootstrap import spill_thresholds
from config.endpoint import CAPPED_SUFFIX, SPILL_METRICS
from config.metrics import ITL, NAMESPACE_LABEL, TEST_CASE, VARIANT
from config.profiles import DraftSpeculation, ServingProfile
from config.schema import DeploymentConfig
from config.versions import GRAFANA_AMP_PLUGIN_ID
from serving_stacks.contract import AcceptanceCounters, buckets, total

# A rate over at least four samples of the managed scraper (30 s minimum interval, AMP user guide "Using an AWS
# managed collector"): Grafana's own $__rate_interval rule is max(4 x scrape interval, step + scrape interval).
RATE_WINDOW = "2m"
# The data sources the viewer provisions (stacks/constructs/grafana.py); panels name them by uid.
PROMETHEUS_UID = "amp"
PROMETHEUS_TYPE = GRAFANA_AMP_PLUGIN_ID  # the data source type is the plugin's id
CLOUDWATCH_UID = "cloudwatch"
CLOUDWATCH_TYPE = "cloudwatch"
DASHBOARD_UID = "trn-specdec-live"
# The dashboard JSON model's version. Grafana migrates a dashboard with an older number forward when it loads it, so
# a number at or below the running Grafana's is safe; 39 is Grafana 11's (not checked against 13.2's own number).
SCHEMA_VERSION = 39

# Envoy 1.40's cluster traffic stats as its /stats/prometheus names them: envoy_cluster_<stat>{envoy_cluster_name=...}.
# Read from the pinned binary itself (tests/charts/test_live_dashboard.py scrapes it on the rendered bootstrap).
ENVOY_REQUESTS = "envoy_cluster_upstream_rq_total"
ENVOY_CLUSTER_LABEL = "envoy_cluster_name"
ENVOY_METRICS = (ENVOY_REQUESTS, *SPILL_METRICS)  # everything the endpoint's scrape job keeps


@dataclass(frozen=True)
class Query:
    """One PromQL expression of a panel and the legend Grafana shows for it."""

    expr: str
    legend: str


def _rate(series: str, sel: str) -> str:
    return f"rate({series}{sel}[{RATE_WINDOW}])"


def quantile_query(q: float, histogram: str, namespace: str, profile: str) -> str:
    """A quantile of a vLLM histogram (base name) over every pod of the profile (buckets summed before the quantile)."""
    return f"histogram_quantile({q}, sum by (le) ({_rate(buckets(histogram), series_selector(namespace, profile))}))"


def counts_steps(profile: ServingProfile) -> bool:
    """Whether the profile's generation counter counts engine steps rather than tokens (its stack's engine counts one
    token per request per step, and the profile speculates, so a step emits several)."""
    return profile.speculative and profile.live_metrics.generation_counts_steps


def tokens_per_second_query(namespace: str, profile: ServingProfile) -> str:
    """Output tokens per second: the stack's generation counter, or where that counts steps (counts_steps) the token
    counts of the requests that finished, which include every speculated token."""
    m, sel = profile.live_metrics, series_selector(namespace, profile.name)
    if counts_steps(profile):
        return f"sum({_rate(m.request_generation_tokens + '_sum', sel)})"
    return f"sum({_rate(total(m.generation_tokens), sel)})"


def acceptance_query(namespace: str, profile: str, counters: AcceptanceCounters) -> str:
    """vLLM's draft acceptance rate: accepted / proposed draft tokens (what `bench` reports as the server's)."""
    sel = series_selector(namespace, profile)
    return f"sum({_rate(total(counters.accepted_tokens), sel)}) / sum({_rate(total(counters.draft_tokens), sel)})"


def token_itl_query(namespace: str, profile: ServingProfile) -> str:
    """Token-weighted inter-token latency of the requests that finished in the window: their decode time (first to
    last token) over their tokens after the first, as bench's ITL weighs it. vLLM's ITL histogram cannot give this: it
    observes one interval per request per engine step, however many tokens the step emitted."""
    m, sel = profile.live_metrics, series_selector(namespace, profile.name)
    decode = f"sum({_rate(m.request_decode_time + '_sum', sel)})"
    tokens = f"sum({_rate(m.request_generation_tokens + '_sum', sel)})"
    requests = f"sum({_rate(m.request_generation_tokens + '_count', sel)})"
    return f"{decode} / ({tokens} - {requests})"


def speedup_query(namespace: str, baseline: ServingProfile, profile: ServingProfile) -> str:
    """Live ITL speedup: the baseline's token-weighted inter-token latency over the speculative profile's, each from
    its own stack's series (above 1 is faster)."""
    return f"({token_itl_query(namespace, baseline)}) / ({token_itl_query(namespace, profile)})"


def _envoy(series: str, namespace: str, clusters: str) -> str:
    """An Envoy counter's rate for clusters matching `clusters` (a regex), in the endpoint's namespace."""
    return f'rate({series}{{{NAMESPACE_LABEL}="{namespace}",{ENVOY_CLUSTER_LABEL}=~"{clusters}"}}[{RATE_WINDOW}])'


def split_query(namespace: str, profile: str) -> str:
    """Requests per second the arm's upstream served: its own cluster (override header, unspilled arm) plus its capped
    cluster (the spilling arm's path), folded into one series. Gate health checks add a few per minute."""
    return f"sum({_envoy(ENVOY_REQUESTS, namespace, f'{profile}|{profile}{CAPPED_SUFFIX}')})"


def spill_query(namespace: str, profile: str) -> str:
    """Requests per second the arm's circuit breaker refused (sent to the baseline instead)."""
    capped = profile + CAPPED_SUFFIX
    return " + ".join(f"sum({_envoy(m, namespace, capped)})" for m in SPILL_METRICS)


def spill_share_query(namespace: str, profile: str) -> str:
    """The share of the arm's requests that spilled: refused / (refused + sent through the cap). Refused requests
    never reach the pool, so they are not in upstream_rq_total (checked on the pinned Envoy in the tests)."""
    spilled = spill_query(namespace, profile)
    sent = f"sum({_envoy(ENVOY_REQUESTS, namespace, profile + CAPPED_SUFFIX)})"
    return f"({spilled}) / (({spilled}) + {sent})"


def scale_events_query(namespace: str, profile: str) -> str:
    """Non-zero where the profile's serving replicas changed in the last window: an annotation per scale step."""
    sel = series_selector(namespace, profile)
    return f"({serving_replicas_query(namespace, profile)} - count(up{sel} offset {RATE_WINDOW} == 1)) != 0"


class DashboardBuilder:
    """Lays panels out on Grafana's 24-column grid, row by row, with unique ids."""

    WIDTH = 24

    def __init__(self) -> None:
        self.panels: list[dict[str, Any]] = []
        self._y = 0
        self._x = 0
        self._row_height = 0

    def _next_id(self) -> int:
        return len(self.panels) + 1

    def row(self, title: str) -> None:
        self._newline()
        self.panels.append(
            {
                "type": "row",
                "id": self._next_id(),
                "title": title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": self.WIDTH, "x": 0, "y": self._y},
                "panels": [],
            }
        )
        self._y += 1

    def _newline(self) -> None:
        if self._x:
            self._y += self._row_height
            self._x, self._row_height = 0, 0

    def panel(
        self,
        title: str,
        queries: list[Query],
        *,
        unit: str,
        kind: str = "timeseries",
        width: int = 6,
        height: int = 8,
        description: str = "",
        targets: list[dict[str, Any]] | None = None,
    ) -> None:
        refs = [chr(ord("A") + i) for i in range(len(queries))]
        prometheus = [
            {
                "refId": ref,
                "datasource": {"type": PROMETHEUS_TYPE, "uid": PROMETHEUS_UID},
                "expr": q.expr,
                "legendFormat": q.legend,
                "range": True,
            }
            for ref, q in zip(refs, queries, strict=True)
        ]
        self._place(width, height)
        self.panels.append(
            {
                "type": kind,
                "id": self._next_id(),
                "title": title,
                "description": description,
                "datasource": {"type": PROMETHEUS_TYPE, "uid": PROMETHEUS_UID} if not targets else None,
                "gridPos": {"h": height, "w": width, "x": self._x, "y": self._y},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "options": {},
                "targets": [*prometheus, *(targets or [])],
            }
        )
        self._advance(width, height)

    def note(self, title: str, text: str, *, width: int = 6, height: int = 8) -> None:
        """A text panel in place of a panel the profile's stack cannot fill: it says why, where the data would be."""
        self._place(width, height)
        self.panels.append(
            {
                "type": "text",
                "id": self._next_id(),
                "title": title,
                "description": text,
                "gridPos": {"h": height, "w": width, "x": self._x, "y": self._y},
                "options": {"mode": "markdown", "content": text},
            }
        )
        self._advance(width, height)

    def _place(self, width: int, height: int) -> None:
        if self._x + width > self.WIDTH:
            self._newline()

    def _advance(self, width: int, height: int) -> None:
        self._x += width
        self._row_height = max(self._row_height, height)


def _profile_row(b: DashboardBuilder, ns: str, p: ServingProfile) -> None:
    name, m = p.name, p.live_metrics
    d = p.decoding
    b.row(f"{name} ({d.method}, k={d.num_speculative_tokens})" if isinstance(d, DraftSpeculation) else name)
    b.panel(
        f"{name}: time to first token p50 / p99",
        [Query(quantile_query(q, m.ttft, ns, name), f"p{int(q * 100)}") for q in (0.5, 0.99)],
        unit="s",
        description=f"vLLM's {m.ttft} (vLLM {m.vllm_version}).",
    )
    b.panel(
        f"{name}: inter-token latency p50 / p99",
        [Query(quantile_query(q, m.itl, ns, name), f"p{int(q * 100)}") for q in (0.5, 0.99)],
        unit="s",
        description=f"vLLM's {m.itl} (vLLM {m.vllm_version}): one interval per request per engine step, so on a "
        "speculative profile an interval spans every token of its step. Compare profiles in the verdict row "
        "(token-weighted), not by these quantiles.",
    )
    b.panel(
        f"{name}: output tokens/s",
        [Query(tokens_per_second_query(ns, p), "tokens/s")],
        unit="short",
        description=f"Tokens of the requests that finished, from {m.request_generation_tokens}: vLLM "
        f"{m.vllm_version} counts one token per request per step in {m.generation_tokens}, and this profile's steps "
        "emit several."
        if counts_steps(p)
        else f"vLLM's {m.generation_tokens} counter.",
    )
    if p.speculative:
        title = f"{name}: draft acceptance rate"
        if m.acceptance is None:
            b.note(
                title,
                f"No data on this stack: {m.no_acceptance} `bench run` reports tokens per streamed chunk "
                "(client-derived acceptance length) instead.",
            )
        else:
            b.panel(
                title,
                [Query(acceptance_query(ns, name, m.acceptance), "accepted / proposed")],
                unit="percentunit",
                description=f"vLLM's {m.acceptance.accepted_tokens} / {m.acceptance.draft_tokens} counters.",
            )
    b.panel(
        f"{name}: requests waiting / running",
        [Query(waiting_query(ns, p), "waiting"), Query(running_query(ns, p), "running")],
        unit="short",
        description="The series KEDA scales on, summed over the profile's pods.",
    )
    b.panel(
        f"{name}: serving replicas",
        [Query(serving_replicas_query(ns, name), "serving (scraped)")],
        unit="short",
        description="Replicas whose /metrics answered the last scrape. Desired and pending replicas need "
        "kube-state-metrics, which this deployment does not scrape (docs/dashboard.md).",
    )


def spilling_arms(config: DeploymentConfig) -> list[str]:
    """The speculative arms the endpoint caps and spills (charts/envoy_bootstrap.spill_thresholds owns the rule)."""
    return list(spill_thresholds(config))


def live_dashboard(config: DeploymentConfig) -> dict[str, Any]:
    """The whole dashboard JSON."""
    ns = config.namespace
    spilling = spilling_arms(config)
    base = config.baseline_profile
    baseline = base.name
    b = DashboardBuilder()
    for p in config.profiles:
        _profile_row(b, ns, p)
    b.row("endpoint (Envoy)")
    b.panel(
        "requests/s per arm",
        [Query(split_query(ns, p.name), p.name) for p in config.profiles],
        unit="reqps",
        width=12,
        description="Envoy's upstream requests per profile: the arm's own cluster plus its capped cluster.",
    )
    if spilling:
        b.panel(
            "spilled to the baseline (share of the arm's requests)",
            [Query(spill_share_query(ns, name), name) for name in spilling],
            unit="percentunit",
            width=12,
            description="Requests the arm's circuit breaker refused, which Envoy retried on the baseline.",
        )
    others = [p for p in config.profiles if p.speculative]
    if others:
        b.row(f"verdict: ITL speedup over {baseline}")
        for p in others:
            name = p.name
            b.panel(
                f"{name}: live ITL speedup (token-weighted)",
                [Query(speedup_query(ns, base, p), "live")],
                unit="x",
                width=12,
                description=f"Token-weighted inter-token latency of {baseline} / {name} over the requests that "
                f"finished in the last {RATE_WINDOW}: each profile's decode time over its tokens after the first, from "
                "its own vLLM's per-request histograms (above 1 is faster).",
            )
            b.panel(
                f"{name}: last benchmark's ITL speedup",
                [],
                unit="x",
                kind="stat",
                width=12,
                description="CloudWatch: the mean over test cases of each case's p50 ITL, baseline / variant, from "
                "`bench run --cloudwatch` in the last 7 days.",
                targets=benchmark_speedup_targets(config.observability.metrics_namespace, baseline, name),
            )
            b.panels[-1]["timeFrom"] = "7d"
    return {
        "uid": DASHBOARD_UID,
        "title": f"{config.name}: live serving",
        "tags": ["trn-specdec"],
        "timezone": "utc",
        "editable": False,
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-3h", "to": "now"},
        "templating": {"list": []},
        "annotations": {"list": annotations(config, spilling)},
        "panels": b.panels,
    }


def benchmark_speedup_targets(metrics_namespace: str, baseline: str, variant: str) -> list[dict[str, Any]]:
    """Two hidden CloudWatch metric-math queries (mean over test cases of the hourly p50 ITL, CloudWatch's SEARCH
    and AVG) and a Grafana math expression dividing them."""

    def search(ref: str, name: str) -> dict[str, Any]:
        search = f'{{{metrics_namespace},{TEST_CASE},{VARIANT}}} MetricName="{ITL}" {VARIANT}="{name}"'
        return {
            "refId": ref,
            "datasource": {"type": CLOUDWATCH_TYPE, "uid": CLOUDWATCH_UID},
            "queryMode": "Metrics",
            "metricQueryType": 0,
            "metricEditorMode": 1,
            "expression": f"AVG(SEARCH('{search}', 'p50', 3600))",
            "id": ref.lower(),
            "region": "default",
            "period": "3600",
            "hide": True,
        }

    return [
        search("BASE", baseline),
        search("SPEC", variant),
        {
            "refId": "SPEEDUP",
            "datasource": {"type": "__expr__", "uid": "__expr__"},
            "type": "math",
            "expression": "$BASE / $SPEC",
        },
    ]


def annotations(config: DeploymentConfig, spilling: list[str]) -> list[dict[str, Any]]:
    """Scale steps of each profile and minutes with spill, as Grafana annotation queries on the same series."""
    ns = config.namespace
    out = [
        {
            "name": f"{p.name} scaled",
            "enable": True,
            "iconColor": "blue",
            "datasource": {"type": PROMETHEUS_TYPE, "uid": PROMETHEUS_UID},
            "expr": scale_events_query(ns, p.name),
            "step": "60s",
            "titleFormat": f"{p.name}: serving replicas changed",
        }
        for p in config.profiles
    ]
    out += [
        {
            "name": f"{name} spilled",
            "enable": True,
            "iconColor": "orange",
            "datasource": {"type": PROMETHEUS_TYPE, "uid": PROMETHEUS_UID},
            "expr": f"({spill_query(ns, name)}) > 0",
            "step": "60s",
            "titleFormat": f"{name}: requests spilled to {config.baseline_profile.name}",
        }
        for name in spilling
    ]
    return out


def panel_queries(dashboard: dict[str, Any]) -> dict[str, list[str]]:
    """Every PromQL expression per panel title (annotations under `annotation: <name>`): what the tests parse."""
    out: dict[str, list[str]] = {}
    for panel in dashboard["panels"]:
        exprs = [t["expr"] for t in panel.get("targets", []) if t["datasource"]["uid"] == PROMETHEUS_UID]
        if exprs:
            out[panel["title"]] = exprs
    for a in dashboard["annotations"]["list"]:
        out[f"annotation: {a['name']}"] = [a["expr"]]
    return out
