"""The workspace's alert rules through the pinned promtool (Prometheus 2.42, tools/prometheus_tool.py): `promtool check
rules` on every synthesized rule group, and `promtool test rules` on every rendered alert with input series: a case
where it fires (with its labels and annotations) and cases where it stays silent (the values on the safe side of its
threshold, and the bad values for less than its `for:`).

The cases are generated per rule from the config (thresholds, profile names, `for:` durations), keyed on the alert
name's prefix (`<Kind>-<profile or arm>`); series names and label matchers are read from the rule's own expression, so
a serving stack that names a series differently gets cases under its own names. A rendered alert of a kind with no
case generator fails the coverage test."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import promql_parser as promql
import pytest
import yaml

from config import DeploymentConfig, load_config, node_scaling, parse_config
from config.scaling import max_replicas, waiting_threshold
from stacks.constructs.serving_alert_rules import DRIFT_FOR, SATURATED_FOR, SPILL_SHARE, alert_rules
from tests.conftest import ROOT, readme_spec_k5_config_dict
from tests.prometheus import promtool, vector_selectors
from tests.stacks.test_metrics_and_scaling import prometheus_seconds

STEP_S = 30  # between input samples and between rule evaluations: the managed collector's scrape interval
AFTER_FOR_S = 300  # a firing case is evaluated this long after the alert's `for:` has passed
# Fractional thresholds are tested this close on either side (a relative margin): a threshold moved further fails.
MARGIN = 0.1
Series = dict[str, str]  # one promtool input series: {"series": 'name{label="value"}', "values": "..."}


@dataclass(frozen=True)
class Case:
    """One promtool test group for one alert: input series and whether the alert fires at `eval_s`."""

    why: str
    fires: bool
    series: list[Series]
    eval_s: int


@dataclass(frozen=True)
class Selector:
    """A vector selector of a rule's expression: metric name and the labels a matching series carries."""

    name: str
    labels: dict[str, str]


def _literal(regex: str) -> str:
    """A label value a regex matcher accepts: its first `|` alternative that it matches whole (ours are names)."""
    found = [alt for alt in regex.split("|") if re.fullmatch(regex, alt)]
    assert found, f"no literal alternative of {regex!r} matches it: give this matcher a value by hand"
    return found[0]


def selectors(expr: Any) -> list[Selector]:
    """Every distinct vector selector in a parsed expression, in order, as the series that would match it."""
    out: list[Selector] = []
    for s in vector_selectors(expr):
        labels = {}
        for m in s.matchers.matchers:
            op = str(m.op).removeprefix("MatchOp.")
            assert op in ("Equal", "Re"), f"{s}: a {op} matcher needs its own input series"
            labels[m.name] = m.value if op == "Equal" else _literal(m.value)
        found = Selector(s.name, labels)
        if found not in out:
            out.append(found)
    return out


def series(sel: Selector, values: str, **extra: str) -> Series:
    labels = ",".join(f'{k}="{v}"' for k, v in sorted({**sel.labels, **extra}.items()))
    return {"series": f"{sel.name}{{{labels}}}", "values": values}


def constant(value: float, steps: int) -> str:
    return f"{value}+0x{steps}"


def counter(per_second: float, steps: int) -> str:
    """A counter growing at `per_second` (promtool's expanding notation: start+increment x samples)."""
    return f"0+{per_second * STEP_S:g}x{steps}"


# What a generator returns: the alert's `for:` in seconds, the series that make it fire, and the silent variants.
Generated = tuple[int, Callable[[int], list[Series]], dict[str, Callable[[int], list[Series]]]]


def pending_pods(expr: Any, config: DeploymentConfig, _: str) -> Generated:
    (pending,) = selectors(expr)
    return (
        node_scaling.node_overdue_seconds(config),
        lambda n: [series(pending, constant(1, n))],
        {"no pod pending": lambda n: [series(pending, constant(0, n))]},
    )


def replica_not_ready(expr: Any, config: DeploymentConfig, profile: str) -> Generated:
    (up,) = selectors(expr)
    return (
        2 * config.scaling.time_to_ready_seconds,
        lambda n: [series(up, constant(0, n), pod=f"{profile}-new"), series(up, constant(1, n), pod=f"{profile}-old")],
        {"every replica serves /metrics": lambda n: [series(up, constant(1, n), pod=f"{profile}-{i}") for i in (0, 1)]},
    )


def queue_at_max_replicas(expr: Any, config: DeploymentConfig, profile: str) -> Generated:
    p = config.profile(profile)
    threshold, cap = waiting_threshold(config.scaling, p), max_replicas(config, p)
    (up,) = [s for s in selectors(expr) if s.name == "up"]
    (waiting,) = [s for s in selectors(expr) if s.name != "up"]

    def replicas(count: int, waiting_each: int) -> Callable[[int], list[Series]]:
        return lambda n: [
            s
            for i in range(count)
            for s in (series(up, constant(1, n), pod=f"{profile}-{i}"), series(waiting, constant(waiting_each, n), pod=f"{profile}-{i}"))
        ]  # fmt: skip

    silent = {f"{threshold} waiting per replica (the threshold) at {cap} replicas": replicas(cap, threshold)}
    if cap > 1:
        silent[f"{threshold + 1} waiting per replica at {cap - 1} replicas, below the maximum"] = replicas(
            cap - 1, threshold + 1
        )
    return int(prometheus_seconds(SATURATED_FOR)), replicas(cap, threshold + 1), silent


def _ratio(expr: Any) -> tuple[list[Selector], list[Selector]]:
    """`<ratio> <comparison> <number>`: the ratio's numerator selectors and the denominator's other selectors."""
    assert isinstance(expr, promql.BinaryExpr) and isinstance(expr.rhs, promql.NumberLiteral), expr
    ratio = expr.lhs
    assert isinstance(ratio, promql.BinaryExpr) and str(ratio.op) == "/", ratio
    numerator = selectors(ratio.lhs)
    return numerator, [s for s in selectors(ratio.rhs) if s not in numerator]


def spill_above_share(expr: Any, config: DeploymentConfig, arm: str) -> Generated:
    """spilled / (spilled + sent through the cap): each spill counter at 1/s, the sent counter set for the share."""
    spilled, rest = _ratio(expr)
    (sent,) = rest

    def at_share(share: float) -> Callable[[int], list[Series]]:
        sent_rate = len(spilled) * (1 - share) / share
        return lambda n: [*(series(s, counter(1, n)) for s in spilled), series(sent, counter(sent_rate, n))]

    below = SPILL_SHARE * (1 - MARGIN)
    return (
        int(prometheus_seconds(DRIFT_FOR)),
        at_share(SPILL_SHARE * (1 + MARGIN)),
        {f"a share of {below:.1%} spilled, just below {SPILL_SHARE:.0%}": at_share(below)},
    )


def acceptance_below_tuned(expr: Any, config: DeploymentConfig, profile: str) -> Generated:
    """accepted / drafted draft tokens (counters), or one acceptance gauge, against the tuned rate."""
    tuned = config.profile(profile).decoding.tuned_acceptance_rate  # type: ignore[union-attr]
    assert tuned is not None

    def at_rate(rate: float) -> Callable[[int], list[Series]]:
        if isinstance(expr.lhs, promql.BinaryExpr):
            accepted, drafted = _ratio(expr)
            return lambda n: [*(series(s, counter(10 * rate, n)) for s in accepted), *(series(s, counter(10, n)) for s in drafted)]  # fmt: skip
        (gauge,) = selectors(expr)
        return lambda n: [series(gauge, constant(rate, n))]

    above = min(1.0, tuned * (1 + MARGIN))
    return (
        int(prometheus_seconds(DRIFT_FOR)),
        at_rate(tuned * (1 - MARGIN)),
        {f"acceptance {above:.1%}, just above the tuned {tuned:.0%}": at_rate(above)},
    )


GENERATORS: dict[str, Callable[[Any, DeploymentConfig, str], Generated]] = {
    "ReplicasPendingAboveTrn2Capacity": pending_pods,
    "ScaleUpWithoutReadyReplica": replica_not_ready,
    "QueueAboveThresholdAtMaxReplicas": queue_at_max_replicas,
    "SpillAboveShare": spill_above_share,
    "AcceptanceBelowTuned": acceptance_below_tuned,
}


def cases(rule: dict[str, Any], config: DeploymentConfig) -> list[Case]:
    """The generated cases of one rendered alert rule; none if its kind has no generator."""
    kind, _, name = rule["alert"].partition("-")
    if kind not in GENERATORS:
        return []
    for_s, firing, silent = GENERATORS[kind](promql.parse(rule["expr"]), config, name)
    late = for_s + AFTER_FOR_S
    steps = (late + AFTER_FOR_S) // STEP_S
    return [
        Case(f"fires after {for_s} s", True, firing(steps), late),
        Case(f"still pending {STEP_S} s before its {for_s} s", False, firing(steps), for_s - STEP_S),
        *(Case(why, False, make(steps), late) for why, make in silent.items()),
    ]


def expected_alert(rule: dict[str, Any], config: DeploymentConfig) -> dict[str, Any]:
    """The firing alert: the deployment's name and the profile the alert names (from the config), the rule's
    severity and its annotations (plain text: promtool compares them whole)."""
    _, _, name = rule["alert"].partition("-")
    labels = {"severity": rule["labels"]["severity"], "deployment": config.name}
    if name:
        assert name in {p.name for p in config.profiles}, rule["alert"]
        labels["profile"] = name
    assert not any("{{" in text for text in rule["annotations"].values()), "templated annotations: expand them here"
    return {"exp_labels": labels, "exp_annotations": rule["annotations"]}


def unit_tests(rules_file: str, rules: dict[str, Any], config: DeploymentConfig) -> dict[str, Any]:
    """promtool's unit-test file: one test group per case (its own input series), evaluated every STEP_S."""
    groups = []
    for group in rules["groups"]:
        for rule in group["rules"]:
            for case in cases(rule, config):
                alerts = [expected_alert(rule, config)] if case.fires else []
                groups.append(
                    {
                        "name": f"{rule['alert']}: {case.why}",
                        "interval": f"{STEP_S}s",
                        "input_series": case.series,
                        "alert_rule_test": [
                            {"eval_time": f"{case.eval_s}s", "alertname": rule["alert"], "exp_alerts": alerts}
                        ],
                    }
                )
    return {"rule_files": [rules_file], "evaluation_interval": f"{STEP_S}s", "tests": groups}


def ab_config(data: dict[str, Any]) -> DeploymentConfig:
    """`data` with an A/B split over every profile, each speculative arm spilling, and a tuned acceptance rate on
    each speculative profile whose stack reports acceptance: every kind of alert the stack can have is rendered."""
    arms = [p["name"] for p in data["profiles"]]
    share = 100 // len(arms)
    data["endpoint"] = {"weights": {name: share for name in arms} | {arms[0]: 100 - share * (len(arms) - 1)}}
    reporting = {p.name for p in parse_config(data).profiles if p.live_metrics.acceptance is not None}
    for p in data["profiles"]:
        if p["decoding"]["method"] != "none" and p["name"] in reporting:
            p["decoding"]["tuned_acceptance_rate"] = 0.62
    return parse_config(data)


def yaml_dict(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


AB_CONFIGS: dict[str, Callable[[], DeploymentConfig]] = {
    "default-ab": lambda: ab_config(yaml_dict(ROOT / "config" / "default.yaml")),
    "vllm-neuron-ab": lambda: ab_config(yaml_dict(ROOT / "config" / "vllm-neuron.yaml")),
    "readme-spec-k5-ab": lambda: ab_config(readme_spec_k5_config_dict()),
}
SYNTHESIZED = {"default": "synth", "vllm-neuron": "plugin_synth", "readme-spec-k5": "three_profile_synths"}


def synthesized_rules(synth: Any) -> dict[str, Any]:
    """The rule group the Observability stack deploys (AWS::APS::RuleGroupsNamespace's Data)."""
    (namespace,) = synth.resources("Observability", "AWS::APS::RuleGroupsNamespace").values()
    return yaml.safe_load(namespace["Properties"]["Data"])


def rules_and_config(which: str, request: pytest.FixtureRequest) -> tuple[dict[str, Any], DeploymentConfig]:
    """A config's rule file: from the synthesized template for the shipped and three-profile configs, from
    alert_rules (what the construct deploys: test_the_template_deploys_alert_rules_of_its_config) for the others."""
    if which in AB_CONFIGS:
        config = AB_CONFIGS[which]()
        return alert_rules(config), config
    synth = request.getfixturevalue(SYNTHESIZED[which])
    if which == "readme-spec-k5":
        synth = synth["readme-spec-k5"]
    return synthesized_rules(synth), synth.config


ALL_CONFIGS = [*SYNTHESIZED, *AB_CONFIGS]


@pytest.mark.parametrize("which", list(SYNTHESIZED))
def test_promtool_check_rules_accepts_every_synthesized_rule_group(which, request, tmp_path):
    rules, _ = rules_and_config(which, request)
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    done = promtool("check", "rules", str(path))
    count = sum(len(g["rules"]) for g in rules["groups"])
    assert done.returncode == 0 and f"SUCCESS: {count} rules found" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("which", list(SYNTHESIZED))
def test_the_template_deploys_alert_rules_of_its_config(which, request):
    """So alert_rules(config) is what the stack would deploy for the A/B configs tested without a synth."""
    rules, config = rules_and_config(which, request)
    assert rules == alert_rules(config)


@pytest.mark.parametrize("which", ALL_CONFIGS)
def test_every_rendered_alert_fires_and_stays_silent_as_its_config_says(which, request, tmp_path):
    rules, config = rules_and_config(which, request)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(unit_tests("rules.yaml", rules, config), sort_keys=False))
    done = promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("which", ALL_CONFIGS)
def test_every_rendered_alert_has_a_firing_and_a_silent_case(which, request):
    rules, config = rules_and_config(which, request)
    uncovered = [
        r["alert"] for g in rules["groups"] for r in g["rules"] if {c.fires for c in cases(r, config)} != {True, False}
    ]
    assert not uncovered, f"no firing and silent case for {uncovered}: add a generator to GENERATORS"


def test_the_configs_tested_render_every_kind_of_alert():
    """The A/B configs are what makes the spill and acceptance generators run: every generator meets a rule."""
    kinds = {
        r["alert"].partition("-")[0]
        for make in AB_CONFIGS.values()
        for g in alert_rules(make())["groups"]
        for r in g["rules"]
    }
    assert kinds == set(GENERATORS)


def test_a_rule_that_drifts_from_its_config_fails_its_cases(tmp_path):
    """The cases are not vacuous: a queue alert without its `for:`, or at another threshold, fails promtool."""
    config = load_config()
    rules = alert_rules(config)
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(unit_tests("rules.yaml", rules, config), sort_keys=False))
    queue = next(r for r in rules["groups"][0]["rules"] if r["alert"].startswith("QueueAboveThresholdAtMaxReplicas"))
    threshold = waiting_threshold(config.scaling, config.profiles[0])
    for broken in ({"for": "0s"}, {"expr": queue["expr"].replace(f"> {threshold}", f"> {threshold + 1}")}):
        others = [r for r in rules["groups"][0]["rules"] if r is not queue]
        drifted = {"groups": [{**rules["groups"][0], "rules": [*others, {**queue, **broken}]}]}
        (tmp_path / "rules.yaml").write_text(yaml.safe_dump(drifted, sort_keys=False))
        done = promtool("test", "rules", "tests.yaml", cwd=tmp_path)
        assert done.returncode == 1 and f"alertname: {queue['alert']}" in done.stderr, (broken, done.stderr)
