"""The measured step-time table as a stand-in's load curve (bench/standin/step_table.py), on the H100 file kept as test
data (tests/bench/fixtures/step-times-h100-qwen3-32b.json; its provenance is in its `what` and `caveat`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.standin.step_table import StepTable, StepTableError, acceptance_pattern, step_at, tokens_per_step
from tests.bench.conftest import FIXTURES

H100 = FIXTURES / "step-times-h100-qwen3-32b.json"
PAIRS = [(k, a) for k in (3, 5, 7) for a in (0.6, 0.7, 0.8)]


def _speedup(table: StepTable, k: int, alpha: float, batch: int) -> float:
    pattern = acceptance_pattern(alpha, k)
    return sum(pattern) / len(pattern) * step_at(table.curve(0), batch) / step_at(table.curve(k), batch)


@pytest.mark.parametrize(("k", "alpha"), PAIRS)
def test_stand_in_curves_reproduce_the_files_speedups_and_crossovers(k: int, alpha: float):
    """The file's own numbers (its `speedup` and `crossover_batch_below_1_05`), recomputed from its step times
    and the stand-in's chunk pattern: the curves a sweep runs on are the measured ones."""
    table = StepTable.load(H100)
    raw = json.loads(H100.read_text())
    key = f"k{k}_a{alpha}"
    for batch in table.batches:
        assert _speedup(table, k, alpha, batch) == pytest.approx(raw["speedup"][str(batch)][key], rel=0.01)
    crossover = next(b for b in table.batches if _speedup(table, k, alpha, b) < 1.05)
    assert crossover == raw["crossover_batch_below_1_05"][key]


def test_a_speculative_step_is_k_draft_steps_plus_one_verify_step_of_k_plus_1_tokens():
    table = StepTable.load(H100)
    raw = json.loads(H100.read_text())["step_ms"]
    assert dict(table.curve(7))[32] == pytest.approx((7 * raw["draft"]["q1"]["32"] + raw["target"]["q8"]["32"]) / 1000)
    assert dict(table.curve(0, scale=0.1))[1] == pytest.approx(raw["target"]["q1"]["1"] / 10_000)


def test_between_batches_the_step_is_interpolated_and_above_the_last_it_follows_the_slope():
    curve = ((1, 0.02), (16, 0.02), (32, 0.04))
    assert step_at(curve, 0) == step_at(curve, 1) == 0.02
    assert step_at(curve, 24) == pytest.approx(0.03)
    assert step_at(curve, 48) == pytest.approx(0.06)


@pytest.mark.parametrize(("k", "alpha"), PAIRS)
def test_the_chunk_pattern_has_the_models_mean_tokens_per_step(k: int, alpha: float):
    pattern = acceptance_pattern(alpha, k)
    assert max(pattern) <= k + 1 and min(pattern) == 1
    assert sum(pattern) / len(pattern) == pytest.approx(tokens_per_step(alpha, k), abs=k / 100)


def test_a_missing_table_or_k_is_a_sentence(tmp_path: Path):
    with pytest.raises(StepTableError, match="cannot be read"):
        StepTable.load(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text('{"batches": [1]}')
    with pytest.raises(StepTableError, match=r"needs `batches` and `step_ms\.target\.q1`"):
        StepTable.load(tmp_path / "bad.json")
    with pytest.raises(StepTableError, match="no target step times at 3 token"):
        StepTable.load(H100).curve(2)
