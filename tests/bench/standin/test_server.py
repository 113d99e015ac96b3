from __future__ import annotations

import json
import urllib.request

import pytest

from bench.standin.selfcheck import loopback_server
from bench.standin.server import Script, _count_step, _exposition, _State
from serving_stacks import STACKS
from serving_stacks.contract import POSITION_LABEL, total
from tests.vllm_metrics import exposed as vllm_exposed
from tests.vllm_metrics import parse_with_prometheus_client, served


def test_chunks_cycle_the_pattern_and_sum_to_the_request() -> None:
    script = Script(pattern=(1, 3, 2), prompt_patterns=(("life", (1, 1)),))
    assert script.chunk_sizes(10) == [1, 3, 2, 1, 3]
    assert script.chunk_sizes(4, "meaning of life") == [1, 1, 1, 1]


def test_truth_of_a_multi_token_schedule() -> None:
    script = Script(ttft_s=0.2, step_s=0.04, pattern=(1, 3))
    assert script.chunk_sizes(7) == [1, 3, 1, 2]  # sent at 0.2, 0.24, 0.28, 0.32
    truth = script.truth(7)
    assert truth["ttft"] == 0.2 and truth["e2e"] == pytest.approx(0.32)
    assert truth["tpot"] == pytest.approx(0.12 / 6) == pytest.approx(truth["itl_mean"])


def test_acceptance_counters_count_one_draft_per_chunk_after_the_first() -> None:
    state = _State(per_pos=[0, 0, 0])
    for size in (3, 1, 4):  # 4 > k + 1 is capped at k accepted
        _count_step(state, size, 3)
    assert (state.drafts, state.draft_tokens, state.accepted, state.per_pos) == (3, 9, 5, [2, 2, 1])
    text = _exposition(Script(num_speculative_tokens=3, stack="vllm-neuron"), state)
    assert (
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="loopback-model",engine="0",position="2"} 1.0'
        in text
    )
    assert "# TYPE vllm:spec_decode_num_drafts_total counter" in text


def test_with_a_step_curve_the_step_is_the_measured_time_at_the_running_batch() -> None:
    script = Script(step_s=1.0, step_per_seq_s=1.0, step_curve=((1, 0.02), (16, 0.02), (32, 0.04)))
    assert script.step_at(1) == script.step_at(16) == 0.02  # the memory-bound floor, not the linear model
    assert script.step_at(24) == pytest.approx(0.03)


def test_the_cli_builds_the_curve_from_the_table_and_refuses_a_bad_one(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.standin.server import _parse_args
    from tests.bench.conftest import FIXTURES

    table = str(FIXTURES / "step-times-h100-qwen3-32b.json")
    script, _, _ = _parse_args(["--step-table", table, "--table-k", "7", "--time-scale", "0.5"])
    assert script.step_at(1) == pytest.approx(0.5 * (7 * 2.407 + 26.836) / 1000)
    script, _, _ = _parse_args(["--step-curve", "1:20,32:40"])
    assert script.step_curve == ((1, 0.02), (32, 0.04))
    with pytest.raises(SystemExit):
        _parse_args(["--step-curve", "1:20,x"])
    assert "--step-curve '1:20,x' is not batch:ms pairs" in capsys.readouterr().err


# --- /metrics per serving stack: exactly the series we read of that stack's vLLM, valid, driven by the requests ---

TOKENS = 10
PATTERN = (1, 3, 2)  # chunks of 1, 3, 2, 3, 1 tokens: 5 steps for 10 tokens
REQUESTS = 3


def _served(stack: str | None) -> str:
    """The stand-in's /metrics after REQUESTS completions of TOKENS tokens, from its own process."""
    script = Script(ttft_s=0.005, step_s=0.002, pattern=PATTERN, num_speculative_tokens=3, stack=stack)
    body = json.dumps({"model": script.model, "prompt": "hi", "max_tokens": TOKENS, "stream": True}).encode()
    with loopback_server(script, lifetime_s=60) as url:
        for _ in range(REQUESTS):
            request = urllib.request.Request(url + "/v1/completions", body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as response:  # loopback only
                assert b"[DONE]" in response.read()
        with urllib.request.urlopen(url + "/metrics", timeout=10) as response:  # loopback only
            assert response.headers.get_content_type() == "text/plain"
            return response.read().decode()


@pytest.fixture(scope="module")
def expositions() -> dict[str, str]:
    return {s.NAME: _served(s.NAME) for s in STACKS}


@pytest.mark.parametrize("stack", STACKS, ids=lambda s: s.NAME)
def test_each_stack_serves_exactly_the_series_we_read_of_its_vllm(expositions, stack) -> None:
    """Valid for prometheus_client's own parser; the series are the stack's LIVE_METRICS, each of them a series
    that stack's vLLM serves (read from its source), with its type and that vLLM's labels."""
    m = stack.LIVE_METRICS
    samples = parse_with_prometheus_client(expositions[stack.NAME])
    names = {name for _, _, name, _, _ in samples}
    assert names == set(m.exposed())
    assert names <= vllm_exposed(m)
    kinds = served(m)
    for family, kind, _, labels, _ in samples:
        assert kinds[family] == kind, family
        assert set(labels) - {"le", POSITION_LABEL} == set(m.labels), (family, labels)
    for histogram in (h for h, kind in kinds.items() if kind == "histogram" and f"{h}_count" in names):
        # what histogram_quantile needs: cumulative buckets ending in +Inf, which equals _count
        buckets = [(labels["le"], v) for _, _, n, labels, v in samples if n == f"{histogram}_bucket"]
        count = next(v for _, _, n, _, v in samples if n == f"{histogram}_count")
        assert buckets[-1] == ("+Inf", count), histogram
        assert [v for _, v in buckets] == sorted(v for _, v in buckets), histogram


@pytest.mark.parametrize("stack", STACKS, ids=lambda s: s.NAME)
def test_the_values_follow_the_requests_served(expositions, stack) -> None:
    m = stack.LIVE_METRICS
    values: dict[str, float] = {}
    for _, _, name, labels, value in parse_with_prometheus_client(expositions[stack.NAME]):
        if labels.get("le") in (None, "+Inf") and POSITION_LABEL not in labels:
            values[name] = value
    steps = len(Script(pattern=PATTERN).chunk_sizes(TOKENS))
    assert values[f"{m.ttft}_count"] == REQUESTS and values[f"{m.ttft}_bucket"] == REQUESTS
    assert values[f"{m.itl}_count"] == REQUESTS * (steps - 1)  # one interval per request per step
    assert values[total(m.generation_tokens)] == REQUESTS * (steps if m.generation_counts_steps else TOKENS)
    assert values[f"{m.request_generation_tokens}_sum"] == REQUESTS * TOKENS
    assert values[f"{m.request_decode_time}_count"] == REQUESTS
    assert 0 < values[f"{m.request_decode_time}_sum"] < REQUESTS * 5
    assert values[m.requests_running] == 0 and values[m.requests_waiting] == 0
    if m.acceptance is not None:
        assert values[total(m.acceptance.drafts)] == REQUESTS * (steps - 1)
        assert values[total(m.acceptance.accepted_tokens)] == REQUESTS * (TOKENS - steps)
    else:
        assert not [n for n in values if "spec_decode" in n]


def test_without_a_stack_metrics_serves_no_vllm_series() -> None:
    assert _exposition(Script(), _State()) == ""


def test_the_cli_takes_a_stack_by_name_and_refuses_others(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.standin.server import _parse_args

    for stack in STACKS:
        script, _, _ = _parse_args(["--stack", stack.NAME])
        assert script.live_metrics == stack.LIVE_METRICS
    assert _parse_args([])[0].live_metrics is None
    with pytest.raises(SystemExit):
        _parse_args(["--stack", "v1"])
    assert "invalid choice: 'v1'" in capsys.readouterr().err
