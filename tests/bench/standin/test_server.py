from __future__ import annotations

import pytest

from bench.standin.server import Script, _count_step, _exposition, _State


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


def test_v1_counters_count_one_draft_per_chunk_after_the_first() -> None:
    state = _State(per_pos=[0, 0, 0])
    for size in (3, 1, 4):  # 4 > k + 1 is capped at k accepted
        _count_step(state, size, 3)
    assert (state.drafts, state.draft_tokens, state.accepted, state.per_pos) == (3, 9, 5, [2, 2, 1])
    text = _exposition(Script(num_speculative_tokens=3), state)
    assert (
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="loopback-model",position="2"} 1.0'
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
