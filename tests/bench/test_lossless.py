"""The lossless check: speculative outputs against the baseline's, request by request, from real loopback runs."""

from __future__ import annotations

import asyncio

from bench.lossless import check, first_divergence, format_lossless
from bench.prompts import TestCase, variations
from bench.results import BenchResults, RequestRecord
from bench.runner import Endpoint, format_table, run_benchmark
from bench.standin.selfcheck import loopback_server
from bench.standin.server import DIVERGED_ID_OFFSET, Script
from tests.bench.builders import quiet, run_settings
from tests.bench.conftest import CASES, DIVERGES_AT, REQUESTS


def test_a_scripted_divergence_is_found_at_its_token_and_identical_outputs_pass(bench_results: BenchResults) -> None:
    checks = {c.test_case: c for c in check(bench_results)}
    assert sorted(checks) == sorted(CASES)
    for case, c in checks.items():
        assert (c.variant, c.baseline, c.stop, c.compared) == ("speculative", "baseline", "fixed", REQUESTS)
        if case != "json":
            assert c.divergences == [] and c.rate == 0.0
            continue
        assert c.rate == 1.0
        for i, d in enumerate(c.divergences):  # the baseline streams one token per chunk: exact positions
            assert (d.request, d.position, d.exact, d.by) == (i, DIVERGES_AT, True, "text")
            assert (d.baseline, d.variant) == (" beta", " zeta")


def test_the_console_shows_the_rate_and_the_first_divergence(bench_results: BenchResults) -> None:
    text = format_lossless(bench_results)
    assert f"speculative: {REQUESTS} of {REQUESTS * len(CASES)} outputs diverge from baseline (25.0%)" in text
    assert f"request 0, token {DIVERGES_AT}: baseline ' beta' vs ' zeta' (text)" in text


def _record(texts: list[str], tokens: list[int], ids: list[int] | None = None) -> RequestRecord:
    times = [0.1 * (i + 1) for i in range(len(texts))]
    return RequestRecord(
        start_s=0.0,
        ttft_s=times[0],
        e2e_s=times[-1],
        output_tokens=sum(tokens),
        chunk_times_s=times,
        chunk_tokens=tokens,
        chunk_texts=texts,
        output_token_ids=ids,
    )


def test_token_ids_are_compared_when_both_sides_have_them() -> None:
    base = _record([" a", " b", " c"], [1, 1, 1], ids=[5, 6, 7])
    same_text_other_ids = _record([" a", " b c"], [1, 2], ids=[5, 6, 8])
    d = first_divergence(base, same_text_other_ids)
    assert d is not None and (d.position, d.baseline, d.variant, d.by) == (2, "7", "8", "token ids")
    shorter = _record([" a", " b"], [1, 1], ids=[5, 6])
    d = first_divergence(base, shorter)
    assert d is not None and (d.position, d.baseline, d.variant) == (2, "7", "(end)")
    assert first_divergence(base, _record([" a b c"], [3], ids=[5, 6, 7])) is None


def test_text_divergence_inside_a_multi_token_baseline_chunk_is_marked_approximate() -> None:
    base = _record([" one", " two three", " four"], [1, 2, 1])
    other = _record([" one two", " thr33", " four"], [2, 1, 1])
    d = first_divergence(base, other)
    assert d is not None and (d.position, d.exact, d.baseline, d.variant) == (1, False, " two three", " two thr33")
    after_a_multi_token_chunk = _record([" one two", " three", " four"], [2, 1, 1])
    d = first_divergence(after_a_multi_token_chunk, _record([" one two three f0ur"], [4]))
    assert d is not None and (d.position, d.exact, d.baseline, d.variant) == (3, True, " four", " f0ur")
    ended = _record([" one"], [1])
    d = first_divergence(ended, base)
    assert d is not None and (d.position, d.baseline, d.variant) == (1, "(end)", " two three four")


def test_natural_stop_runs_beside_fixed_length_and_token_ids_are_compared_per_stop() -> None:
    """Servers that send token ids and stop at end-of-sequence unless told not to: each case runs in both
    stop modes, speedups and the lossless check pair runs of the same stop, the table says which is which."""
    cases = [TestCase(name="c", prompt="count to ten", kind="structured")]
    second = variations(cases[0], 2, seed=0)[1].splitlines()[0]  # request 1's tag: only its outputs differ
    common = {"ttft_s": 0.02, "step_s": 0.005, "token_ids": True, "eos_after": 12}
    base_script = Script(pattern=(1,), **common)  # type: ignore[arg-type]
    spec_script = Script(pattern=(1, 3), diverge=((second, 4),), **common)  # type: ignore[arg-type]
    settings = run_settings(suite="test", api="completions", concurrency=2, requests=2, max_tokens=20, continuous_usage=False, stops=["fixed", "natural"])  # fmt: skip
    with loopback_server(base_script, 120) as base, loopback_server(spec_script, 120) as spec:
        endpoints = [Endpoint("plain", base), Endpoint("spec", spec)]
        results = asyncio.run(run_benchmark(endpoints, cases, settings, options=quiet()))
    assert [(r.variant, r.stop) for r in results.runs] == [
        ("plain", "fixed"), ("spec", "fixed"), ("plain", "natural"), ("spec", "natural"),
    ]  # fmt: skip
    for run in results.runs:
        assert [r.output_tokens for r in run.records] == [20 if run.stop == "fixed" else 12] * 2
        assert run.summary.short_outputs == 0
    assert sorted((s.stop, s.variant) for s in results.speedups()) == [("fixed", "spec"), ("natural", "spec")]
    for sp in results.speedups():  # against the baseline's run of the same stop mode
        base, spec = results.run("plain", "c", sp.stop), results.run("spec", "c", sp.stop)
        assert base and spec and sp.tpot == base.summary.tpot_s.p50 / spec.summary.tpot_s.p50  # type: ignore[operator]
    for c in check(results):
        assert c.compared == 2 and [(d.request, d.position) for d in c.divergences] == [(1, 4)]
        assert {(d.by, d.baseline, d.variant) for d in c.divergences} == {
            ("token ids", "4", str(DIVERGED_ID_OFFSET + 4))
        }
    table = format_table(results)
    assert [line.split()[:3] for line in table.splitlines()[2:6]] == [
        ["c", "structured", "fixed"], ["c", "structured", "fixed"], ["c", "structured", "natural"], ["c", "structured", "natural"],
    ]  # fmt: skip
