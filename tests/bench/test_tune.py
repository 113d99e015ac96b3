"""k tuning: the fitted acceptance rate reproduces the measured speedup, and higher acceptance wants larger k."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.results import BenchResults
from bench.spec_metrics import expected_speedup
from bench.tune import CaseFit, fit_alpha, fit_cases, format_tuning, recommend
from config.speculation import K_RANGE


@settings(max_examples=200, deadline=None)
@given(
    alpha=st.floats(min_value=0.01, max_value=0.99),
    k=st.integers(min_value=1, max_value=15),
    c=st.floats(min_value=0.0, max_value=0.3),
)
def test_fit_alpha_inverts_the_speedup_model(alpha, k, c):
    assert abs(fit_alpha(expected_speedup(alpha, k, c), k, c) - alpha) < 1e-4


def test_fit_alpha_clamps_speedups_the_model_cannot_reach():
    assert fit_alpha(0.5, 7, 0.05) == 0.0  # slower than a draft that is always rejected
    assert fit_alpha(100.0, 7, 0.05) == 1.0


def _fit(kind: str, alpha: float) -> CaseFit:
    return CaseFit(
        "speculative", kind, kind, 7, alpha, "measured", {k: expected_speedup(alpha, k, 0.05) for k in K_RANGE}
    )


def test_structured_text_wants_more_draft_tokens_than_open_ended():
    best = recommend([_fit("structured", 0.9), _fit("open-ended", 0.4)])
    assert best["structured"] > best["open-ended"]
    assert best["structured"] == max(K_RANGE, key=lambda k: expected_speedup(0.9, k, 0.05))


def test_tune_reads_a_real_benchmark_run(bench_results: BenchResults):
    fits = fit_cases(bench_results, {"speculative": 7})
    assert fits and {f.variant for f in fits} == {"speculative"}
    for f in fits:
        assert 0.0 <= f.alpha <= 1.0 and f.best_k in K_RANGE
    text = format_tuning(fits, 0.05)
    assert "recommended k (all):" in text


def test_tune_without_a_k_for_the_variant_has_nothing_to_say(bench_results: BenchResults):
    assert fit_cases(bench_results, {}) == []
    assert "nothing to tune" in format_tuning([], 0.05)


def test_tune_command_prints_a_recommendation(bench_results: BenchResults, tmp_path, capsys):
    from bench.__main__ import main

    path = tmp_path / "results.json"
    path.write_text(bench_results.model_dump_json())
    assert main(["tune", str(path), "--cost-ratio", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "recommended k (all):" in out and "speculative" in out
