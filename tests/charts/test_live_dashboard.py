"""The live dashboard reads only what is stored, on each serving stack: every query (panels, annotations, the alert
rules, KEDA's triggers) parses as PromQL (the pinned promql-parser) and every series it selects is one its profile's
vLLM serves and the rendered scrape jobs keep. The candidate series are the ones the producers really expose: each
stack's pinned vLLM's, read from its source in `.venv-vllm-<version>` (tests/vllm_metrics.py), per profile, and the
pinned Envoy's, read from its own /stats/prometheus on the rendered bootstrap (loopback stand-ins behind it). A panel
a stack cannot fill is a text panel saying why."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path
from typing import Any

import promql_parser as promql
import pytest
import yaml

from charts.autoscaling import render_autoscaling
from charts.envoy_bootstrap import Upstream
from charts.live_dashboard import (
    CLOUDWATCH_UID,
    PROMETHEUS_UID,
    live_dashboard,
    panel_queries,
    spilling_arms,
)
from config import DeploymentConfig, parse_config
from config.labels import PROFILE as PROFILE_POD_LABEL
from config.metrics import ITL, PROFILE_LABEL, VARIANT
from stacks.constructs.grafana import datasources
from stacks.constructs.managed_prometheus import SCHEDULER_METRICS, scrape_configuration, serving_scrape_jobs
from stacks.constructs.serving_alert_rules import DRIFT_FOR, SPILL_SHARE, alert_rules
from tests.conftest import ROOT, default_config_dict
from tests.prometheus import vector_selectors
from tests.router_harness import envoy_router, stand_ins
from tests.vllm_metrics import exposed as vllm_exposed

Series = dict[str, str]  # one series' labels, __name__ included
TUNED = 0.62


def ab_config(data: dict[str, Any], spec: str) -> DeploymentConfig:
    """A deployment with a 90/10 split and a spilling speculative arm (`spec`): every panel and every alert its stack
    can have is rendered. A tuned acceptance rate where the stack reports acceptance (the config refuses it
    elsewhere)."""
    data["endpoint"] = {"weights": {"baseline": 90, spec: 10}, "spill_threshold": {spec: 2}}
    config = parse_config(data)
    if config.profile(spec).live_metrics.acceptance is not None:
        (profile,) = [p for p in data["profiles"] if p["name"] == spec]
        profile["decoding"]["tuned_acceptance_rate"] = TUNED
        config = parse_config(data)
    return config


def plugin_data() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "config" / "vllm-neuron.yaml").read_text())


# One A/B per stack: the default (legacy-v0) and config/vllm-neuron.yaml, with their speculative profile's name.
CONFIGS = {
    "legacy-v0": ab_config(default_config_dict(), "speculative"),
    "vllm-neuron": ab_config(plugin_data(), "eagle3"),
}
SPEC = {"legacy-v0": "speculative", "vllm-neuron": "eagle3"}
STACK_IDS = list(CONFIGS)


def keda_queries(config: DeploymentConfig) -> dict[str, list[str]]:
    """KEDA's Prometheus triggers, per ScaledObject and trigger."""
    scaled = [
        o for o in render_autoscaling(config, "https://example.invalid/workspaces/ws-1") if o["kind"] == "ScaledObject"
    ]
    return {
        f"KEDA {o['metadata']['name']}/{t['name']}": [t["metadata"]["query"]]
        for o in scaled
        for t in o["spec"]["triggers"]
        if t["type"] == "prometheus"
    }


def alerts(config: DeploymentConfig) -> dict[str, list[str]]:
    return {r["alert"]: [r["expr"]] for g in alert_rules(config)["groups"] for r in g["rules"]}


DASHBOARDS = {stack: live_dashboard(c) for stack, c in CONFIGS.items()}
QUERIES = {stack: panel_queries(d) for stack, d in DASHBOARDS.items()}
ALERTS = {stack: alerts(c) for stack, c in CONFIGS.items()}
KEDA = {stack: keda_queries(c) for stack, c in CONFIGS.items()}
# The default stack's A/B, for the checks of the JSON model that do not depend on the stack.
CONFIG, DASHBOARD = CONFIGS["legacy-v0"], DASHBOARDS["legacy-v0"]


def envoy_series_of(config: DeploymentConfig, tmp: Path) -> list[Series]:
    """Every series the pinned Envoy serves on /stats/prometheus with the bootstrap the chart renders."""
    with stand_ins([p.name for p in config.profiles]) as si:
        upstreams = {name: Upstream("127.0.0.1", s.port) for name, s in si.items()}
        with (
            envoy_router(config, upstreams, tmp) as router,
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


@pytest.fixture(scope="module")
def envoy_series(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Series]]:
    return {stack: envoy_series_of(c, tmp_path_factory.mktemp(f"envoy-{stack}")) for stack, c in CONFIGS.items()}


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


def profiles_scraped(job: dict[str, Any], config: DeploymentConfig) -> list[str]:
    """The profiles whose pods the job's relabel rules keep (its keep rule on the profile pod label)."""
    source = "__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", PROFILE_POD_LABEL)
    (rule,) = [r for r in job["relabel_configs"] if r.get("action") == "keep" and r["source_labels"] == [source]]
    return [p.name for p in config.profiles if re.fullmatch(rule["regex"], p.name)]


def vllm_candidates(job: dict[str, Any], config: DeploymentConfig) -> list[Series]:
    """What the vLLM pods of the job's profiles serve, each profile its own stack's vLLM's series."""
    return [
        {"__name__": name, PROFILE_LABEL: profile}
        for profile in profiles_scraped(job, config)
        for name in sorted(vllm_exposed(config.profile(profile).live_metrics))
    ]


def stored(config: DeploymentConfig, envoy: list[Series]) -> list[Series]:
    """Every series the workspace holds: each job's kept candidates with the job's target labels, plus `up`. A vLLM
    series keeps its profile (the label the scrape writes from the pod's); other written labels match anything."""
    # kube-scheduler's pending_pods gauge, one series per queue (kubernetes pkg/scheduler/metrics/metrics.go).
    queues = ("active", "backoff", "unschedulable", "gated")
    scheduler = [{"__name__": n, "queue": q} for n in SCHEDULER_METRICS for q in queues]
    out: list[Series] = []
    for job in rendered_jobs(config):
        name = job["job_name"]
        extra = {label: "*" for label in target_labels(job)}
        if name == "endpoint" or name == "kube-scheduler":
            candidates = envoy if name == "endpoint" else scheduler
            out += [{**s, **extra} for s in kept(job, candidates)] + [{"__name__": "up", **extra}]
            continue
        out += [{**extra, **s} for s in kept(job, vllm_candidates(job, config))]
        out += [{**extra, "__name__": "up", PROFILE_LABEL: p} for p in profiles_scraped(job, config)]
    return out


selectors = vector_selectors  # every vector selector of a parsed expression (tests/prometheus.py)


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
def store(envoy_series: dict[str, list[Series]]) -> dict[str, list[Series]]:
    return {stack: stored(c, envoy_series[stack]) for stack, c in CONFIGS.items()}


@pytest.mark.parametrize("stack", STACK_IDS)
def test_the_ab_config_renders_every_kind_of_panel(stack):
    titles = " | ".join(p["title"] for p in DASHBOARDS[stack]["panels"])
    for part in (
        "time to first token",
        "inter-token latency",
        "tokens/s",
        "acceptance",
        "waiting",
        "replicas",
        "requests/s per arm",
        "spilled",
        "live ITL speedup",
    ):
        assert part in titles, part
    assert f"annotation: {SPEC[stack]} spilled" in QUERIES[stack]
    assert spilling_arms(CONFIGS[stack]) == [SPEC[stack]]
    assert [KEDA[stack], ALERTS[stack]] != [{}, {}]


@pytest.mark.parametrize("stack", STACK_IDS)
def test_every_query_parses_as_promql(stack):
    for title, exprs in {**QUERIES[stack], **ALERTS[stack], **KEDA[stack]}.items():
        for expr in exprs:
            promql.parse(expr)  # raises ValueError on anything Prometheus would refuse
            assert selectors(promql.parse(expr)), (title, expr)


@pytest.mark.parametrize("stack", STACK_IDS)
def test_every_panel_reads_only_series_its_profiles_vllm_serves_and_the_scrape_jobs_keep(store, stack):
    assert unscraped(QUERIES[stack], store[stack]) == {}


@pytest.mark.parametrize("stack", STACK_IDS)
def test_every_keda_query_reads_only_stored_series(store, stack):
    assert len(KEDA[stack]) == 2 * len(CONFIGS[stack].profiles)
    assert unscraped(KEDA[stack], store[stack]) == {}


@pytest.mark.parametrize("stack", STACK_IDS)
def test_a_panel_the_stack_cannot_fill_says_why_on_the_dashboard(stack):
    """Every panel has a query, or is a text panel whose words say why (the stack's own reason); here that is the
    acceptance panel of a stack whose vLLM reports no acceptance."""
    config = CONFIGS[stack]
    spec = config.profile(SPEC[stack])
    panels = {p["title"]: p for p in DASHBOARDS[stack]["panels"] if p["type"] != "row"}
    notes = {t: p for t, p in panels.items() if p["type"] == "text"}
    acceptance = f"{spec.name}: draft acceptance rate"
    if spec.live_metrics.acceptance is None:
        assert list(notes) == [acceptance]
        assert spec.live_metrics.no_acceptance in notes[acceptance]["options"]["content"]
        assert "targets" not in notes[acceptance]
    else:
        assert notes == {} and acceptance in QUERIES[stack]
    for title, panel in panels.items():
        assert title in notes or panel["targets"], title


def test_the_plugins_itl_name_is_stored_for_its_profiles_only(store):
    """The finding of issue 35: vLLM 0.9.1 has no vllm:inter_token_latency_seconds, so a legacy-v0 panel reading
    vLLM 0.29.0's name reads nothing, while the same query on a vllm-neuron profile has its series."""

    def itl(stack: str) -> dict[str, list[str]]:
        sel = f'{{namespace="{CONFIGS[stack].namespace}",profile="{SPEC[stack]}"}}'
        return {
            "ITL": [f"histogram_quantile(0.5, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket{sel}[2m])))"]
        }

    assert "ITL" in unscraped(itl("legacy-v0"), store["legacy-v0"])
    assert unscraped(itl("vllm-neuron"), store["vllm-neuron"]) == {}


@pytest.mark.parametrize("stack", STACK_IDS)
def test_the_envoy_job_keeps_few_series_per_router_pod(envoy_series, stack):
    """The keep-filter is what the docs cost: three counters of each profile's own and capped clusters."""
    (job,) = [j for j in rendered_jobs(CONFIGS[stack]) if j["job_name"] == "endpoint"]
    kept_series = kept(job, envoy_series[stack])
    assert len(envoy_series[stack]) > 300
    assert {(s["__name__"], s["envoy_cluster_name"]) for s in kept_series} == {
        (m, c)
        for m in (
            "envoy_cluster_upstream_rq_total",
            "envoy_cluster_upstream_rq_active_overflow",
            "envoy_cluster_upstream_rq_pending_overflow",
        )
        for c in ("baseline", SPEC[stack], f"{SPEC[stack]}-capped")
    }
    assert job["metrics_path"] == "/stats/prometheus"


def _read(queries: dict[str, dict[str, list[str]]]) -> list[tuple[str, str, str]]:
    return sorted(
        {
            (stack, title, sel.name)
            for stack, by_title in queries.items()
            for title, exprs in by_title.items()
            for e in exprs
            for sel in selectors(promql.parse(e))
        }
    )


PANEL_SERIES = _read(QUERIES)


@pytest.mark.parametrize(
    ("stack", "title", "series"), PANEL_SERIES, ids=[f"{st}:{t}<-{s}" for st, t, s in PANEL_SERIES]
)
def test_a_panel_whose_series_is_not_kept_is_flagged(store, stack, title, series):
    """Each panel's query broken once: its series gone from the store, the check names that panel."""
    without = [s for s in store[stack] if s["__name__"] != series]
    assert title in unscraped(QUERIES[stack], without)


def test_a_keep_rule_that_drops_envoys_counters_is_seen(envoy_series):
    """The keep rules are read, not assumed: a job that keeps no Envoy counter leaves the endpoint panels bare."""
    jobs = rendered_jobs(CONFIG)
    (job,) = [j for j in jobs if j["job_name"] == "endpoint"]
    job["metric_relabel_configs"][0]["regex"] = "envoy_server_live"
    store = [s for j in jobs if j["job_name"] == "endpoint" for s in kept(j, envoy_series["legacy-v0"])]
    assert "requests/s per arm" in unscraped({"requests/s per arm": QUERIES["legacy-v0"]["requests/s per arm"]}, store)


def test_a_vllm_keep_rule_that_drops_a_series_read_is_seen():
    """The vLLM job's name filter is applied too: one that keeps only the queue gauges leaves the latency panels bare."""
    jobs = rendered_jobs(CONFIG)
    (job,) = [j for j in jobs if j["job_name"] == "vllm"]
    job["metric_relabel_configs"][0]["regex"] = "vllm:num_requests_(waiting|running)"
    store = [{**s, "namespace": "*"} for s in kept(job, vllm_candidates(job, CONFIG))]
    flagged = unscraped(QUERIES["legacy-v0"], store)
    assert "speculative: time to first token p50 / p99" in flagged
    assert "speculative: requests waiting / running" not in flagged


# --- the JSON model: no Grafana runs here and no JSON schema of its dashboard model at 13.x was found offline (its
# schema is CUE, grafana/grafana kinds/dashboard); these structural checks stand in. ---


def _panels(stack: str) -> list[dict[str, Any]]:
    return DASHBOARDS[stack]["panels"]


@pytest.mark.parametrize("stack", STACK_IDS)
def test_panel_ids_are_unique_and_refids_unique_per_panel(stack):
    ids = [p["id"] for p in _panels(stack)]
    assert len(ids) == len(set(ids))
    for p in _panels(stack):
        refs = [t["refId"] for t in p.get("targets", [])]
        assert len(refs) == len(set(refs)), p["title"]


@pytest.mark.parametrize("stack", STACK_IDS)
def test_panels_sit_on_the_24_column_grid_without_overlap(stack):
    cells: set[tuple[int, int]] = set()
    for p in _panels(stack):
        g = p["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, p["title"]
        cells |= mine


@pytest.mark.parametrize("stack", STACK_IDS)
def test_every_target_names_a_provisioned_data_source(stack):
    provisioned = {d["uid"] for d in datasources("https://example.invalid/workspaces/ws-1", "us-east-2")["datasources"]}
    assert provisioned == {PROMETHEUS_UID, CLOUDWATCH_UID}
    for p in _panels(stack):
        for t in p.get("targets", []):
            assert t["datasource"]["uid"] in provisioned | {"__expr__"}, (p["title"], t)
    for a in DASHBOARDS[stack]["annotations"]["list"]:
        assert a["datasource"]["uid"] == PROMETHEUS_UID


@pytest.mark.parametrize("stack", STACK_IDS)
def test_the_benchmark_speedup_reads_the_benchmarks_itl_per_variant(stack):
    spec_name, config = SPEC[stack], CONFIGS[stack]
    (panel,) = [p for p in _panels(stack) if p["title"] == f"{spec_name}: last benchmark's ITL speedup"]
    base, spec, ratio = panel["targets"]
    assert f'MetricName="{ITL}"' in base["expression"] and f'{VARIANT}="baseline"' in base["expression"]
    assert f'{VARIANT}="{spec_name}"' in spec["expression"]
    assert config.observability.metrics_namespace in base["expression"]
    assert ratio["expression"] == f"${base['refId']} / ${spec['refId']}" and base["hide"] and spec["hide"]


@pytest.mark.parametrize("stack", STACK_IDS)
def test_a_profile_without_speculation_has_no_acceptance_panel(stack):
    titles = [p["title"] for p in _panels(stack)]
    assert f"{SPEC[stack]}: draft acceptance rate" in titles
    assert "baseline: draft acceptance rate" not in titles


def test_the_live_speedup_weighs_each_profile_by_its_own_stacks_tokens():
    """Like with like: the token-weighted ITL of each side, decode time over tokens after the first, from each
    profile's own series (vLLM's ITL histogram observes steps, which speculation makes longer)."""
    for stack, config in CONFIGS.items():
        (expr,) = QUERIES[stack][f"{SPEC[stack]}: live ITL speedup (token-weighted)"]
        m = config.profile(SPEC[stack]).live_metrics
        for name in (f"{m.request_decode_time}_sum", f"{m.request_generation_tokens}_sum"):
            assert {sel.name for sel in selectors(promql.parse(expr))} >= {name}
        assert m.itl not in expr


def test_the_json_round_trips_through_the_viewers_values(tmp_path: Path):
    """What the chart provisions is this dashboard, byte for byte after JSON parsing."""
    import json

    from stacks.constructs.grafana import grafana_values

    values = grafana_values(CONFIG, "https://example.invalid/workspaces/ws-1", "us-east-2")
    (provider,) = values["dashboards"].values()
    assert json.loads(provider["serving"]["json"]) == DASHBOARD


# --- the alerts on what the dashboard shows (stacks/constructs/serving_alert_rules.py) ---


def test_spill_and_acceptance_alerts_read_the_dashboards_queries_for_15_minutes():
    stack = "vllm-neuron"  # the stack that reports acceptance
    spec = SPEC[stack]
    rules = {r["alert"]: r for g in alert_rules(CONFIGS[stack])["groups"] for r in g["rules"]}
    spill, acceptance = rules[f"SpillAboveShare-{spec}"], rules[f"AcceptanceBelowTuned-{spec}"]
    share = QUERIES[stack]["spilled to the baseline (share of the arm's requests)"][0]
    assert spill["expr"] == f"{share} > {SPILL_SHARE}"
    assert acceptance["expr"] == f"{QUERIES[stack][f'{spec}: draft acceptance rate'][0]} < {TUNED}"
    assert spill["for"] == acceptance["for"] == DRIFT_FOR == "15m"
    assert "AcceptanceBelowTuned-baseline" not in rules and "SpillAboveShare-baseline" not in rules


def test_no_acceptance_alert_on_a_stack_that_reports_none():
    """legacy-v0's vLLM sets no acceptance series, so AcceptanceBelowTuned could never fire there: the config refuses
    a tuned rate on it (tests/config/test_schema.py), and a config that had one anyway renders no such rule."""
    legacy = CONFIGS["legacy-v0"]
    tuned = legacy.model_copy(
        update={
            "profiles": [
                p.model_copy(update={"decoding": p.decoding.model_copy(update={"tuned_acceptance_rate": TUNED})})
                if p.speculative
                else p
                for p in legacy.profiles
            ]
        }
    )
    assert tuned.profile("speculative").decoding.tuned_acceptance_rate == TUNED
    assert not [a for a in alerts(tuned) if a.startswith("AcceptanceBelowTuned")]
    assert "SpillAboveShare-speculative" in ALERTS["legacy-v0"]


def test_without_a_tuned_rate_or_spill_there_is_no_drift_alert():
    for data in (default_config_dict(), plugin_data()):
        plain = set(alerts(parse_config(data)))
        assert not any(a.startswith(("SpillAboveShare", "AcceptanceBelowTuned")) for a in plain)


@pytest.mark.parametrize("stack", STACK_IDS)
def test_every_alert_parses_and_reads_only_series_its_profiles_vllm_serves(store, stack):
    for exprs in ALERTS[stack].values():
        promql.parse(exprs[0])
    assert unscraped(ALERTS[stack], store[stack]) == {}


ALERT_SERIES = _read(ALERTS)


@pytest.mark.parametrize(
    ("stack", "alert", "series"), ALERT_SERIES, ids=[f"{st}:{a}<-{s}" for st, a, s in ALERT_SERIES]
)
def test_an_alert_whose_series_is_not_kept_is_flagged(store, stack, alert, series):
    assert alert in unscraped(ALERTS[stack], [s for s in store[stack] if s["__name__"] != series])


def test_a_tuned_rate_outside_0_to_1_is_refused_with_the_field_named():
    from config import ConfigError

    data = plugin_data()
    (spec,) = [p for p in data["profiles"] if p["name"] == "eagle3"]
    spec["decoding"]["tuned_acceptance_rate"] = 62
    with pytest.raises(ConfigError, match=r"profiles\[1\]\.decoding\.tuned_acceptance_rate=62"):
        parse_config(data)


@pytest.mark.parametrize("stack", STACK_IDS)
def test_tokens_per_second_counts_tokens_where_the_counter_counts_steps(stack):
    """vLLM 0.9.1's V0 counts one generated token per request per step: a speculative profile's tokens/s reads its
    finished requests' token counts there, the generation counter elsewhere."""
    config = CONFIGS[stack]
    for p in config.profiles:
        m = p.live_metrics
        (expr,) = QUERIES[stack][f"{p.name}: output tokens/s"]
        (sel,) = selectors(promql.parse(expr))
        steps = p.speculative and m.generation_counts_steps
        assert sel.name == (f"{m.request_generation_tokens}_sum" if steps else f"{m.generation_tokens}_total"), p.name
    assert any(p.speculative and p.live_metrics.generation_counts_steps for p in CONFIGS["legacy-v0"].profiles)
