from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.spec_metrics import (
    acceptance,
    expected_speedup,
    expected_tokens_per_step,
    parse_prometheus,
)
from serving_stacks import stack_named
from serving_stacks.contract import total

Text = Callable[[str], str]
LEGACY = stack_named("legacy-v0").LIVE_METRICS  # reports no acceptance
PLUGIN = stack_named("vllm-neuron").LIVE_METRICS  # vLLM 0.29.0's V1 counters
assert PLUGIN.acceptance is not None
V1_DRAFTS = total(PLUGIN.acceptance.drafts)


@pytest.mark.parametrize("metrics", [PLUGIN, None], ids=["the variant's stack", "any stack's counters"])
def test_v1_counters_give_windowed_acceptance(fixture_text: Text, metrics) -> None:
    result = acceptance(fixture_text("vllm_v1_before.prom"), fixture_text("vllm_v1_after.prom"), metrics=metrics)
    assert result.engine == "v1" and result.exposed and result.scope == "window"
    assert (result.drafts, result.draft_tokens, result.accepted_tokens) == (600, 2400, 1500)
    assert result.acceptance_rate == pytest.approx(1500 / 2400)
    assert result.mean_acceptance_length == pytest.approx(1 + 1500 / 600)
    assert result.per_position == pytest.approx([540 / 600, 420 / 600, 310 / 600, 230 / 600])


def test_v1_without_a_before_scrape_says_so(fixture_text: Text) -> None:
    result = acceptance(None, fixture_text("vllm_v1_after.prom"))
    assert result.engine == "v1" and result.acceptance_rate is None and "no scrape before" in result.note


def test_v1_idle_window_and_restart(fixture_text: Text) -> None:
    after = fixture_text("vllm_v1_after.prom")
    idle = acceptance(after, after)
    assert idle.exposed and idle.drafts == 0 and idle.acceptance_rate is None and "no speculative steps" in idle.note
    restarted = acceptance(after, fixture_text("vllm_v1_before.prom"))
    assert restarted.acceptance_rate is None and "restarted" in restarted.note


def test_a_stack_without_acceptance_says_why_whatever_the_server_serves(fixture_text: Text) -> None:
    """legacy-v0: its vLLM sets no vllm:spec_decode_* series on Neuron; the result carries the stack's reason."""
    after = fixture_text("vllm_v1_after.prom")
    for before, later in ((after, after), (None, None)):
        result = acceptance(before, later, metrics=LEGACY)
        assert result.engine == "none" and not result.exposed
        assert result.note == f"not exposed: {LEGACY.no_acceptance}"


def test_v0_gauges_are_not_read(fixture_text: Text) -> None:
    """V0's acceptance gauges are no stack's series (legacy-v0's engine never sets them on Neuron): set or only
    declared, a page with them and no stack's counters is not exposed."""
    for name in ("vllm_v0_spec.prom", "vllm_v0_spec_unset.prom"):
        text = fixture_text(name)
        result = acceptance(text, text)
        assert result.engine == "none" and not result.exposed and V1_DRAFTS in result.note, name


def test_absent_metrics_and_unreachable_endpoint_are_not_exposed(fixture_text: Text) -> None:
    baseline = fixture_text("vllm_v1_baseline.prom")
    result = acceptance(baseline, baseline)
    assert result.engine == "none" and not result.exposed and "not exposed" in result.note
    assert not acceptance(None, None).exposed


def test_parser_reads_labels_types_and_special_values() -> None:
    text = "\n".join(
        [
            "# TYPE a counter",
            'a_total{path="C:\\\\x",quote="say \\"hi\\"",nl="l1\\nl2"} 3.0 1700000000',  # a trailing timestamp (ms) is ignored
            'b{le="+Inf"} +Inf',
            "c NaN",
            "garbage line without value",
        ]
    )
    parsed = parse_prometheus(text)
    a = next(s for s in parsed.samples if s.name == "a_total")
    assert a.labels == {"path": "C:\\x", "quote": 'say "hi"', "nl": "l1\nl2"} and a.value == 3.0
    assert parsed.total("b") == float("inf")
    assert "a_total" in parsed.declared and len(parsed.samples) == 3


def test_sums_over_engines_and_filters_by_model() -> None:
    text = "\n".join(
        f'{V1_DRAFTS}{{engine="{e}",model_name="{m}"}} {v}'
        for e, m, v in [(0, "x", 10.0), (1, "x", 5.0), (0, "y", 7.0)]
    )
    parsed = parse_prometheus(text)
    assert parsed.total(V1_DRAFTS) == 22.0
    assert parsed.total(V1_DRAFTS, model="x") == 15.0


def test_leviathan_speedup_matches_the_paper_check() -> None:
    assert expected_speedup(0.8, 4, 0.05) == pytest.approx(2.801, abs=5e-4)
    assert expected_tokens_per_step(1.0, 7) == 8.0
    assert expected_tokens_per_step(0.0, 7) == 1.0
    with pytest.raises(ValueError, match=r"outside 0\.\.1"):
        expected_speedup(1.2, 4, 0.05)
    with pytest.raises(ValueError, match="k="):
        expected_speedup(0.5, -1, 0.05)


@given(alpha=st.floats(0, 0.999), k=st.integers(0, 15))
def test_tokens_per_step_is_the_geometric_sum(alpha: float, k: int) -> None:
    assert expected_tokens_per_step(alpha, k) == pytest.approx(sum(alpha**i for i in range(k + 1)))
