"""The live dashboard reads only what is stored: every query parses as PromQL (the pinned promql-parser) and every
series it selects survives the rendered scrape jobs' keep rules. The candidate series are the ones the producers
really expose: vLLM 0.29.0's, read from its source in the vllm-0.29.0 environment, and the pinned Envoy's, read from
its own /stats/prometheus on the rendered bootstrap (loopback stand-ins behind it)."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path
from typing import Any

import promql_parser as promql
import pytest
import yaml

from charts.envoy_bootstrap import Upstream
from charts.live_dashboard import (
    CLOUDWATCH_UID,
    PROMETHEUS_UID,
    live_dashboard,
    panel_queries,
    spilling_arms,
)
from config import DeploymentConfig, parse_config
from config.metrics import ITL, VARIANT
from stacks.constructs.grafana import datasources
from stacks.constructs.managed_prometheus import SCHEDULER_METRICS, scrape_configuration, serving_scrape_jobs
from stacks.constructs.serving_alert_rules import DRIFT_FOR, SPILL_SHARE, alert_rules
from tests.conftest import ROOT, default_config_dict
from tests.router_harness import envoy_router, stand_ins

VLLM_SOURCES = ("vllm/v1/metrics/loggers.py", "vllm/v1/spec_decode/metrics.py")
Series = dict[str, str]  # one series' labels, __name__ included


def ab_config() -> DeploymentConfig:
    """The default deployment with a 90/10 split, a spilling speculative arm and a tuned acceptance rate: every
    panel and every alert is rendered."""
    data = default_config_dict()
    data["endpoint"] = {"weights": {"baseline": 90, "speculative": 10}, "spill_threshold": {"speculative": 2}}
    (spec,) = [p for p in data["profiles"] if p["name"] == "speculative"]
    spec["decoding"]["tuned_acceptance_rate"] = 0.62
    return parse_config(data)


CONFIG = ab_config()
DASHBOARD = live_dashboard(CONFIG)
QUERIES = panel_queries(DASHBOARD)
ALERTS = {r["alert"]: [r["expr"]] for g in alert_rules(CONFIG)["groups"] for r in g["rules"]}


def vllm_source(relative: str) -> str:
    """A file of the pinned vLLM 0.29.0, from its environment (the engine checks' venv)."""
    found = sorted((ROOT / ".venv-vllm-0.29.0" / "lib").glob(f"python3*/site-packages/{relative}"))
    if not found:
        pytest.skip(".venv-vllm-0.29.0 is not here: vLLM 0.29.0's metric names cannot be read")
    return found[0].read_text()


def vllm_exposed_names() -> set[str]:
    """What vLLM 0.29.0's Prometheus client exposes: gauges by name, counters as <name>_total, histograms as
    _bucket/_sum/_count (prometheus_client's exposition). Read from the metric constructors in its source."""
    names: set[str] = set()
    for rel in VLLM_SOURCES:
        text = vllm_source(rel)
        kinds = re.findall(r"_(gauge|counter|histogram)_cls\(\s*name=\"(vllm:[a-z0-9_]+)\"", text)
        # The spec-decode counters are declared as (name, documentation) pairs and built with _counter_cls.
        kinds += [("counter", n) for n in re.findall(r"\(\"(vllm:spec_decode_[a-z0-9_]+)\",\s*\"", text)]
        for kind, name in kinds:
            if kind == "gauge":
                names.add(name)
            elif kind == "counter":
                names.add(name + "_total")
            else:
                names |= {name + s for s in ("_bucket", "_sum", "_count")}
    return names


@pytest.fixture(scope="module")
def envoy_series(tmp_path_factory: pytest.TempPathFactory) -> list[Series]:
    """Every series the pinned Envoy serves on /stats/prometheus with the bootstrap the chart renders."""
    with stand_ins([p.name for p in CONFIG.profiles]) as si:
        upstreams = {name: Upstream("127.0.0.1", s.port) for name, s in si.items()}
        with (
            envoy_router(CONFIG, upstreams, tmp_path_factory.mktemp("envoy")) as router,
            urllib.request.urlopen(router.metrics_url + "/stats/prometheus", timeout=5) as resp,  # loopback only
        ):
            text = resp.read().decode()
    out = []
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ", line)
        if m and not line.startswith("#"):
            labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"', m.group(2) or ""))
            out.append({"__name__": m.group(1), **labels})
    return out


def rendered_jobs(config: DeploymentConfig) -> list[dict[str, Any]]:
    """The scrape jobs as the scraper's configuration blob carries them."""
    return yaml.safe_load(scrape_configuration(serving_scrape_jobs(config)))["scrape_configs"]


def kept(job: dict[str, Any], candidates: list[Series]) -> list[Series]:
    """Prometheus' metric_relabel `keep`: the source labels joined by ';' must fully match the regex."""
    out = candidates
    for rule in job.get("metric_relabel_configs", []):
        assert rule["action"] == "keep", rule
        regex = re.compile(rule["regex"])
        out = [s for s in out if regex.fullmatch(";".join(s.get(name, "") for name in rule["source_labels"]))]
    return out


def target_labels(job: dict[str, Any]) -> set[str]:
    return {r["target_label"] for r in job["relabel_configs"] if "target_label" in r}


def stored(config: DeploymentConfig, envoy: list[Series]) -> list[Series]:
    """Every series the workspace holds: each job's kept candidates with the job's target labels, plus `up`."""
    vllm = [{"__name__": n} for n in sorted(vllm_exposed_names())]
    # kube-scheduler's pending_pods gauge, one series per queue (kubernetes pkg/scheduler/metrics/metrics.go).
    queues = ("active", "backoff", "unschedulable", "gated")
    scheduler = [{"__name__": n, "queue": q} for n in SCHEDULER_METRICS for q in queues]
    out: list[Series] = []
    for job in rendered_jobs(config):
        name = job["job_name"]
        candidates = envoy if name == "endpoint" else scheduler if name == "kube-scheduler" else vllm
        extra = {label: "*" for label in target_labels(job)}
        out += [{**s, **extra} for s in kept(job, candidates)] + [{"__name__": "up", **extra}]
    return out


def selectors(expr: Any) -> list[Any]:
    """Every vector selector in a parsed expression (matrix selectors and subqueries wrap one)."""
    if isinstance(expr, promql.VectorSelector):
        return [expr]
    if isinstance(expr, promql.MatrixSelector):
        return [expr.vector_selector]
    children = [getattr(expr, a) for a in ("lhs", "rhs", "expr", "param") if getattr(expr, a, None) is not None]
    children += list(getattr(expr, "args", None) or [])
    return [s for child in children for s in selectors(child)]


def matches(selector: Any, series: Series) -> bool:
    """The selector's name and its label matchers against one stored series; a label the scrape writes ("*")
    matches any value."""
    if series["__name__"] != selector.name:
        return False
    for m in selector.matchers.matchers:
        value = series.get(m.name)
        if value is None:
            return False
        if value == "*":
            continue
        op = str(m.op).removeprefix("MatchOp.")
        ok = {
            "Equal": value == m.value,
            "NotEqual": value != m.value,
            "Re": re.fullmatch(m.value, value) is not None,
            "NotRe": re.fullmatch(m.value, value) is None,
        }[op]
        if not ok:
            return False
    return True


def unscraped(queries: dict[str, list[str]], store: list[Series]) -> dict[str, list[str]]:
    """Per panel, the selectors that no stored series satisfies."""
    out: dict[str, list[str]] = {}
    for title, exprs in queries.items():
        for expr in exprs:
            for sel in selectors(promql.parse(expr)):
                if not any(matches(sel, s) for s in store):
                    out.setdefault(title, []).append(f"{sel.name}{{{sel.matchers}}}")
    return out


@pytest.fixture(scope="module")
def store(envoy_series: list[Series]) -> list[Series]:
    return stored(CONFIG, envoy_series)


def test_the_ab_config_renders_every_kind_of_panel():
    titles = " | ".join(QUERIES)
    for part in (
        "time to first token",
        "inter-token latency",
        "tokens/s",
        "acceptance",
        "waiting",
        "replicas",
        "requests/s per arm",
        "spilled",
        "live ITL p50 speedup",
        "annotation: speculative spilled",
    ):
        assert part in titles, part
    assert spilling_arms(CONFIG) == ["speculative"]


def test_every_query_parses_as_promql():
    for title, exprs in QUERIES.items():
        for expr in exprs:
            promql.parse(expr)  # raises ValueError on anything Prometheus would refuse
            assert selectors(promql.parse(expr)), (title, expr)


def test_every_panel_reads_only_series_the_scrape_jobs_keep(store):
    assert unscraped(QUERIES, store) == {}


def test_vllm_series_the_dashboard_needs_are_defined_by_vllm_0_29_0():
    """Against the producer, not our constants: the names come from vLLM's source."""
    names = vllm_exposed_names()
    assert {
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:generation_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:num_requests_waiting",
    } <= names


def test_the_envoy_job_keeps_few_series_per_router_pod(envoy_series):
    """The keep-filter is what the docs cost: three counters of each profile's own and capped clusters."""
    (job,) = [j for j in rendered_jobs(CONFIG) if j["job_name"] == "endpoint"]
    kept_series = kept(job, envoy_series)
    assert len(envoy_series) > 300
    assert {(s["__name__"], s["envoy_cluster_name"]) for s in kept_series} == {
        (m, c)
        for m in (
            "envoy_cluster_upstream_rq_total",
            "envoy_cluster_upstream_rq_active_overflow",
            "envoy_cluster_upstream_rq_pending_overflow",
        )
        for c in ("baseline", "speculative", "speculative-capped")
    }
    assert job["metrics_path"] == "/stats/prometheus"


PANEL_SERIES = sorted(
    {(title, sel.name) for title, exprs in QUERIES.items() for e in exprs for sel in selectors(promql.parse(e))}
)


@pytest.mark.parametrize(("title", "series"), PANEL_SERIES, ids=[f"{t}<-{s}" for t, s in PANEL_SERIES])
def test_a_panel_whose_series_is_not_kept_is_flagged(store, title, series):
    """Each panel's query broken once: its series gone from the store, the check names that panel."""
    without = [s for s in store if s["__name__"] != series]
    assert title in unscraped(QUERIES, without)


def test_a_keep_rule_that_drops_envoys_counters_is_seen(envoy_series):
    """The keep rules are read, not assumed: a job that keeps no Envoy counter leaves the endpoint panels bare."""
    jobs = rendered_jobs(CONFIG)
    (job,) = [j for j in jobs if j["job_name"] == "endpoint"]
    job["metric_relabel_configs"][0]["regex"] = "envoy_server_live"
    vllm = [{"__name__": n} for n in vllm_exposed_names()]
    store = [s for j in jobs for s in kept(j, envoy_series if j is job else vllm)]
    assert "requests/s per arm" in unscraped({"requests/s per arm": QUERIES["requests/s per arm"]}, store)


# --- the JSON model: no Grafana runs here and no JSON schema of its dashboard model at 13.x was found offline (its
# schema is CUE, grafana/grafana kinds/dashboard); these structural checks stand in. ---


def _panels() -> list[dict[str, Any]]:
    return DASHBOARD["panels"]


def test_panel_ids_are_unique_and_refids_unique_per_panel():
    ids = [p["id"] for p in _panels()]
    assert len(ids) == len(set(ids))
    for p in _panels():
        refs = [t["refId"] for t in p.get("targets", [])]
        assert len(refs) == len(set(refs)), p["title"]


def test_panels_sit_on_the_24_column_grid_without_overlap():
    cells: set[tuple[int, int]] = set()
    for p in _panels():
        g = p["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, p["title"]
        cells |= mine


def test_every_target_names_a_provisioned_data_source():
    provisioned = {d["uid"] for d in datasources("https://example.invalid/workspaces/ws-1", "us-east-2")["datasources"]}
    assert provisioned == {PROMETHEUS_UID, CLOUDWATCH_UID}
    for p in _panels():
        for t in p.get("targets", []):
            assert t["datasource"]["uid"] in provisioned | {"__expr__"}, (p["title"], t)
    for a in DASHBOARD["annotations"]["list"]:
        assert a["datasource"]["uid"] == PROMETHEUS_UID


def test_the_benchmark_speedup_reads_the_benchmarks_itl_per_variant():
    (panel,) = [p for p in _panels() if p["title"] == "speculative: last benchmark's ITL speedup"]
    base, spec, ratio = panel["targets"]
    assert f'MetricName="{ITL}"' in base["expression"] and f'{VARIANT}="baseline"' in base["expression"]
    assert f'{VARIANT}="speculative"' in spec["expression"]
    assert CONFIG.observability.metrics_namespace in base["expression"]
    assert ratio["expression"] == f"${base['refId']} / ${spec['refId']}" and base["hide"] and spec["hide"]


def test_a_profile_without_speculation_has_no_acceptance_panel():
    titles = [p["title"] for p in _panels()]
    assert "speculative: draft acceptance rate" in titles
    assert "baseline: draft acceptance rate" not in titles


def test_the_json_round_trips_through_the_viewers_values(tmp_path: Path):
    """What the chart provisions is this dashboard, byte for byte after JSON parsing."""
    import json

    from stacks.constructs.grafana import grafana_values

    values = grafana_values(CONFIG, "https://example.invalid/workspaces/ws-1", "us-east-2")
    (provider,) = values["dashboards"].values()
    assert json.loads(provider["serving"]["json"]) == DASHBOARD


# --- the alerts on what the dashboard shows (stacks/constructs/serving_alert_rules.py) ---


def test_spill_and_acceptance_alerts_read_the_dashboards_queries_for_15_minutes():
    rules = {r["alert"]: r for g in alert_rules(CONFIG)["groups"] for r in g["rules"]}
    spill, acceptance = rules["SpillAboveShare-speculative"], rules["AcceptanceBelowTuned-speculative"]
    share = QUERIES["spilled to the baseline (share of the arm's requests)"][0]
    assert spill["expr"] == f"{share} > {SPILL_SHARE}"
    assert acceptance["expr"] == f"{QUERIES['speculative: draft acceptance rate'][0]} < 0.62"
    assert spill["for"] == acceptance["for"] == DRIFT_FOR == "15m"
    assert "AcceptanceBelowTuned-baseline" not in rules and "SpillAboveShare-baseline" not in rules


def test_without_a_tuned_rate_or_spill_there_is_no_drift_alert():
    plain = {r["alert"] for g in alert_rules(parse_config(default_config_dict()))["groups"] for r in g["rules"]}
    assert not any(a.startswith(("SpillAboveShare", "AcceptanceBelowTuned")) for a in plain)


def test_every_alert_parses_and_reads_only_kept_series(store):
    for exprs in ALERTS.values():
        promql.parse(exprs[0])
    assert unscraped(ALERTS, store) == {}


ALERT_SERIES = sorted({(a, sel.name) for a, (e,) in ALERTS.items() for sel in selectors(promql.parse(e))})


@pytest.mark.parametrize(("alert", "series"), ALERT_SERIES, ids=[f"{a}<-{s}" for a, s in ALERT_SERIES])
def test_an_alert_whose_series_is_not_kept_is_flagged(store, alert, series):
    assert alert in unscraped(ALERTS, [s for s in store if s["__name__"] != series])


def test_a_tuned_rate_outside_0_to_1_is_refused_with_the_field_named():
    from config import ConfigError

    data = default_config_dict()
    (spec,) = [p for p in data["profiles"] if p["name"] == "speculative"]
    spec["decoding"]["tuned_acceptance_rate"] = 62
    with pytest.raises(ConfigError, match=r"profiles\[1\]\.decoding\.tuned_acceptance_rate=62"):
        parse_config(data)
