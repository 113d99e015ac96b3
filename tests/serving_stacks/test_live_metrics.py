"""Each stack's LIVE_METRICS against the vLLM it pins, read from that vLLM's installed source (tests/vllm_metrics.py):
every name is a series of the declared kind that vLLM serves, acceptance is declared exactly where its engine sets
the speculative-decoding series on Neuron, and the sources are those of the engine the rendered Deployment starts."""

from __future__ import annotations

import dataclasses
import re

import pytest

from charts import render_serving
from config import DeploymentConfig
from serving_stacks import STACKS, stack_named
from serving_stacks.contract import LiveMetrics
from tests.vllm_metrics import V0_ENGINE_METRICS, neuron_sets_spec_decode_series, package, served, source


def members(m: LiveMetrics) -> list[tuple[str, str, str]]:
    """(member, base name, kind) of everything the stack declares."""
    out = [
        ("ttft", m.ttft, "histogram"),
        ("itl", m.itl, "histogram"),
        ("request_decode_time", m.request_decode_time, "histogram"),
        ("request_generation_tokens", m.request_generation_tokens, "histogram"),
        ("generation_tokens", m.generation_tokens, "counter"),
        ("requests_waiting", m.requests_waiting, "gauge"),
        ("requests_running", m.requests_running, "gauge"),
    ]
    if m.acceptance is not None:
        a = m.acceptance
        out += [
            ("acceptance.drafts", a.drafts, "counter"),
            ("acceptance.draft_tokens", a.draft_tokens, "counter"),
            ("acceptance.accepted_tokens", a.accepted_tokens, "counter"),
            ("acceptance.accepted_per_position", a.accepted_per_position, "counter"),
        ]
    return out


@pytest.mark.parametrize("stack", STACKS, ids=lambda s: s.NAME)
def test_every_name_is_a_series_its_vllm_serves_with_that_kind(stack):
    m = stack.LIVE_METRICS
    kinds = served(m)
    wrong = {member: (name, kind, kinds.get(name)) for member, name, kind in members(m) if kinds.get(name) != kind}
    assert not wrong, (
        f"{stack.NAME}.LIVE_METRICS names series vLLM {m.vllm_version} does not serve as declared "
        f"(member: (name, declared kind, kind in {', '.join(m.sources)})): {wrong}"
    )


@pytest.mark.parametrize("stack", STACKS, ids=lambda s: s.NAME)
def test_acceptance_is_declared_exactly_where_the_engine_sets_it_on_neuron(stack):
    m = stack.LIVE_METRICS
    assert (m.acceptance is not None) == neuron_sets_spec_decode_series(m.vllm_version, m.sources)
    assert bool(m.no_acceptance) == (m.acceptance is None)


def test_vllm_0_9_1_names_no_inter_token_latency_and_its_neuron_worker_fills_no_spec_decode_metrics():
    """Issue 35, finding 2, as the installed vLLM 0.9.1 shows it: V0 and V1 both call the histogram
    time_per_output_token_seconds; only vllm/spec_decode assigns the worker's spec-decode metrics; Neuron always runs
    NeuronWorker."""
    pkg = package("0.9.1")
    assert not [p for p in pkg.rglob("*.py") if "inter_token_latency" in p.read_text(errors="replace")]
    for relative in (V0_ENGINE_METRICS, "vllm/v1/metrics/loggers.py"):
        assert 'name="vllm:time_per_output_token_seconds"' in source("0.9.1", relative), relative
    assert not neuron_sets_spec_decode_series("0.9.1", (V0_ENGINE_METRICS,))
    assert 'name="vllm:inter_token_latency_seconds"' in source("0.29.0", "vllm/v1/metrics/loggers.py")


def _vllm_env(config: DeploymentConfig) -> dict[str, dict[str, str]]:
    """Each rendered vLLM container's environment, by profile."""
    out = {}
    for o in render_serving(config, "bucket"):
        if o["kind"] == "Deployment" and o["metadata"]["name"] in {p.name for p in config.profiles}:
            (vllm,) = [c for c in o["spec"]["template"]["spec"]["containers"] if c["name"] == "vllm"]
            out[o["metadata"]["name"]] = {e["name"]: e.get("value", "") for e in vllm.get("env", [])}
    return out


def test_the_sources_are_those_of_the_engine_the_rendered_deployments_start(default_config, plugin_config):
    """vLLM 0.9.1 runs V1 unless VLLM_USE_V1=0 (vllm/envs.py reads it, default "1"); 0.29.0 has no V0 engine. The
    legacy-v0 Deployments set it to 0, so their series are V0's (vllm/engine/metrics.py); vllm-neuron's are V1's."""
    assert re.search(
        r'"VLLM_USE_V1":\s*lambda: bool\(int\(os\.getenv\("VLLM_USE_V1", "1"\)\)\)', source("0.9.1", "vllm/envs.py")
    )
    assert not (package("0.29.0") / "engine" / "metrics.py").exists()
    for cfg in (default_config, plugin_config):
        for profile, env in _vllm_env(cfg).items():
            m = stack_named(cfg.profile(profile).image.stack).LIVE_METRICS
            v0 = env.get("VLLM_USE_V1") == "0"
            assert v0 == (V0_ENGINE_METRICS in m.sources), (profile, env.get("VLLM_USE_V1"), m.sources)


@pytest.mark.parametrize("stack", STACKS, ids=lambda s: s.NAME)
def test_generation_counts_steps_where_the_engine_counts_one_token_per_decode_step(stack):
    """V0's generated tokens are batched tokens less prompt tokens, and a decode sequence is one batched token
    (vllm/core/scheduler.py); V1 adds len(output.new_token_ids) (vllm/v1/metrics/stats.py)."""
    m = stack.LIVE_METRICS
    if V0_ENGINE_METRICS in m.sources:
        scheduler = source(m.vllm_version, "vllm/core/scheduler.py")
        counts_steps = bool(
            re.search(
                r"if not seq\.is_prefill\(\):\s*#[^\n]*\n(\s*#[^\n]*\n)*\s*num_uncached_new_tokens \+= 1", scheduler
            )
        )
    else:
        stats = source(m.vllm_version, "vllm/v1/metrics/stats.py")
        counts_steps = "num_new_generation_tokens = len(output.new_token_ids)" not in stats
    assert m.generation_counts_steps == counts_steps


@pytest.mark.parametrize("stack", STACKS, ids=lambda s: s.NAME)
def test_a_stack_without_acceptance_must_say_why(stack):
    with pytest.raises(ValueError, match="no_acceptance"):
        dataclasses.replace(stack.LIVE_METRICS, acceptance=None, no_acceptance="")
