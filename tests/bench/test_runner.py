"""The runner against two loopback servers: identical load, per-window acceptance, speedups, the table."""

from __future__ import annotations

import asyncio

import pytest

from bench.prompts import DEFAULT_SUITE
from bench.results import BenchResults
from bench.runner import Endpoint, RunOptions, format_table, parse_endpoint, run_benchmark
from tests.bench.builders import quiet, run_settings
from tests.bench.conftest import CASES, MAX_TOKENS, REQUESTS, SPECULATIVE


def test_parse_endpoint() -> None:
    assert parse_endpoint("baseline=http://127.0.0.1:8000/") == Endpoint("baseline", "http://127.0.0.1:8000")
    for bad, words in [
        ("http://127.0.0.1:8000", "NAME=URL"),
        ("base line=http://x", "must be 1-64"),
        ("b=127.0.0.1:8000", "http://"),
    ]:
        with pytest.raises(ValueError, match=words):
            parse_endpoint(bad)


def test_every_variant_ran_every_case_under_the_same_load(bench_results: BenchResults) -> None:
    r = bench_results
    assert [v.name for v in r.variants] == ["baseline", "speculative"]
    assert all(v.model == "loopback-model" for v in r.variants)  # discovered from /v1/models
    assert [(run.test_case, run.variant) for run in r.runs] == [
        (c, v) for c in CASES for v in ("baseline", "speculative")
    ]
    for run in r.runs:
        assert run.summary.ok == REQUESTS and run.summary.errors == 0
        assert all(rec.output_tokens == MAX_TOKENS and rec.token_source == "usage_per_chunk" for rec in run.records)
    kinds = {run.test_case: run.kind for run in r.runs}
    assert kinds == {
        "counting": "structured",
        "json": "structured",
        "sonnet": "open-ended",
        "meaning-of-life": "open-ended",
    }


def test_acceptance_is_differenced_per_variant_and_case(bench_results: BenchResults) -> None:
    """The speculative server counts one draft per chunk after the first, (size - 1) accepted: the counters
    of each window must equal exactly what that case's REQUESTS responses carried (warm-up excluded)."""
    k = SPECULATIVE.num_speculative_tokens
    for run in bench_results.runs:
        spec = run.spec_decode
        if run.variant == "baseline":
            assert not spec.exposed and "not exposed" in spec.note
            continue
        prompt = next(c.prompt for c in DEFAULT_SUITE if c.name == run.test_case)
        steps = SPECULATIVE.chunk_sizes(MAX_TOKENS, prompt)[1:]
        drafts = REQUESTS * len(steps)
        accepted = REQUESTS * sum(min(s - 1, k) for s in steps)
        assert spec.engine == "v1" and spec.scope == "window"
        assert (spec.drafts, spec.draft_tokens, spec.accepted_tokens) == (drafts, drafts * k, accepted)
        assert spec.mean_acceptance_length == pytest.approx(1 + accepted / drafts)
        assert spec.acceptance_rate == pytest.approx(accepted / (drafts * k))
        assert len(spec.per_position) == k and spec.per_position[0] >= spec.per_position[-1]


@pytest.mark.timing
def test_speedups_follow_the_chunking(bench_results: BenchResults) -> None:
    speedups = {s.test_case: s for s in bench_results.speedups()}
    assert set(speedups) == set(CASES)
    for case, sp in speedups.items():
        prompt = next(c.prompt for c in DEFAULT_SUITE if c.name == case)
        chunks = len(SPECULATIVE.chunk_sizes(MAX_TOKENS, prompt))
        assert sp.baseline == "baseline" and sp.tpot is not None
        # same step time, fewer steps: decode speedup = baseline steps / speculative steps
        assert sp.tpot == pytest.approx((MAX_TOKENS - 1) / (chunks - 1), rel=0.15)
    assert min(speedups[c].tpot or 0 for c in ("counting", "json")) > max(
        speedups[c].tpot or 0 for c in ("sonnet", "meaning-of-life")
    )


def test_console_table_lists_every_run_with_speedups(bench_results: BenchResults) -> None:
    table = format_table(bench_results)
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["test", "case", "kind"]
    for case in CASES:
        rows = [line for line in lines if line.startswith(case + " ")]
        assert len(rows) == 2
        assert rows[0].rstrip().endswith("-") and rows[1].rstrip().endswith("x")
    assert "speedups are against `baseline`" in table
    assert "baseline: not exposed" in table


@pytest.mark.timing
def test_simultaneous_mode_and_rate_mode(two_servers: dict[str, str]) -> None:
    settings = run_settings(
        api="completions",
        mode="simultaneous",
        concurrency=None,
        rate=50.0,
        requests=3,
        max_tokens=8,
        seed=1,
        continuous_usage=False,
    )
    endpoints = [Endpoint(n, u) for n, u in two_servers.items()]
    cases = [DEFAULT_SUITE[0]]
    r = asyncio.run(run_benchmark(endpoints, cases, settings, options=quiet(model="m")))
    assert [run.variant for run in r.runs] == ["baseline", "speculative"]
    assert all(run.summary.ok == 3 for run in r.runs)
    assert all(rec.token_source == "usage_text_share" for run in r.runs for rec in run.records)
    b, s = (sorted(rec.start_s for rec in run.records) for run in r.runs)
    assert b == pytest.approx(s, abs=0.05)  # the same seeded arrival schedule for both


def test_duplicate_names_are_refused() -> None:
    settings = run_settings(max_tokens=1)
    with pytest.raises(ValueError, match="unique names"):
        asyncio.run(run_benchmark([Endpoint("a", "http://x"), Endpoint("a", "http://y")], [], settings))


def test_every_request_of_a_case_sends_its_own_prompt_and_every_variant_the_same_ones(
    bench_results: BenchResults, two_servers: dict[str, str]
) -> None:
    import json
    import urllib.request

    def prompts(url: str) -> list[str]:
        with urllib.request.urlopen(url + "/debug/requests", timeout=10) as resp:
            bodies = [log["body"] for log in json.loads(resp.read())]
        return [b["messages"][-1]["content"] if "messages" in b else b["prompt"] for b in bodies]

    base, spec = prompts(two_servers["baseline"]), prompts(two_servers["speculative"])
    measured = [p for p in base if "meaning of life" in p][-REQUESTS:]
    assert len(set(measured)) == REQUESTS and all(p.endswith("I believe the meaning of life is") for p in measured)
    assert measured == [p for p in spec if "meaning of life" in p][-REQUESTS:]
    warm = [p for p in base if "meaning of life" in p][:-REQUESTS]
    assert warm and not set(warm) & set(measured)  # warm-up prompts are not reused


def test_a_silent_endpoint_stops_the_run_in_the_probe_timeout_even_with_a_model_given() -> None:
    """With --model the run skipped GET /v1/models and waited --request-timeout for every request: 623 s per
    test case against a silent endpoint (about 104 minutes for the default suite)."""
    import time

    from tests.silent_endpoint import silent_server

    settings = run_settings()
    options = RunOptions(request_timeout_s=600, model="Qwen/Qwen3-32B", probe_timeout_s=0.5, log=print)
    with silent_server() as port:
        started = time.monotonic()
        with pytest.raises(ConnectionError, match="cannot reach"):
            asyncio.run(
                run_benchmark([Endpoint("solo", f"http://127.0.0.1:{port}")], DEFAULT_SUITE, settings, options=options)
            )
        assert time.monotonic() - started < 5
