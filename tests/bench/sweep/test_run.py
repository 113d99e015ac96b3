"""`bench sweep` against two loopback stand-ins with a known model of load.

The stand-ins (bench/standin/server.py Script): a step takes step_s + step_per_seq_s x (requests running), at
most max_num_seqs run, the rest queue. The speculative one streams 2 or 3 tokens per step (mean 2.5) but its
step grows five times faster with the batch, as verifying k+1 tokens per sequence fills the accelerator. So its
TPOT speedup falls with concurrency, and Script.tpot_at gives where it crosses the floor in closed form.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.prompts import DEFAULT_SUITE
from bench.results import CaseRun, RequestRecord, summarize
from bench.runner import Endpoint
from bench.spec_metrics import SpecDecodeResult
from bench.standin.selfcheck import loopback_server
from bench.standin.server import Script
from bench.sweep.analysis import Slo, all_stats, best_goodput, crossovers, goodput, is_saturated
from bench.sweep.report import CrossoverFile, peer_record, prediction_section, write_sweep_report
from bench.sweep.run import (
    LoadPoint,
    SweepResults,
    SweepSettings,
    concurrency_grid,
    load_sweep,
    point_settings,
    run_sweep,
    start_sweep,
)
from tests.bench.builders import quiet, record, run_settings, sweep_settings
from tests.bench.conftest import ROOT
from tests.conftest import EXAMPLE_ACCOUNT

MAX_NUM_SEQS = 4
TOKENS = 16
FLOOR = 1.05
BASE = Script(ttft_s=0.01, step_s=0.004, step_per_seq_s=0.001, max_num_seqs=MAX_NUM_SEQS)
SPEC = Script(
    ttft_s=0.01,
    step_s=0.003,
    step_per_seq_s=0.005,
    pattern=(2, 3),
    max_num_seqs=MAX_NUM_SEQS,
    num_speculative_tokens=4,
    stack="vllm-neuron",
)
CASES = [next(c for c in DEFAULT_SUITE if c.kind == kind) for kind in ("structured", "open-ended")]
GRID = concurrency_grid(MAX_NUM_SEQS)[:-1]  # 1, 2, 4, 8: the 4x point adds time, not information here


def _settings(concurrencies: list[int], rates: list[float] | None, repeats: int, requests: int) -> SweepSettings:
    return sweep_settings(
        run=run_settings(requests=requests, max_tokens=TOKENS),
        concurrencies=concurrencies,
        rates=rates,
        repeats=repeats,
        requests_per_point=requests,
        max_num_seqs=MAX_NUM_SEQS,
    )


@pytest.fixture(scope="module")
def stand_ins() -> Iterator[dict[str, str]]:
    with loopback_server(BASE, 300) as base, loopback_server(SPEC, 300) as spec:
        yield {"baseline": base, "speculative": spec}


@pytest.fixture(scope="module")
def sweep(stand_ins: dict[str, str]) -> SweepResults:
    """The concurrency grid, two runs per point, both prompt kinds: about 20 s on 127.0.0.1."""
    endpoints = [Endpoint(name, url) for name, url in stand_ins.items()]
    settings = _settings(GRID, [], repeats=2, requests=4)
    return asyncio.run(run_sweep(endpoints, CASES, settings, options=quiet()))


def expected_crossover(grid: list[int]) -> int | None:
    """Closed form: at concurrency c the batch is min(c, max_num_seqs); speedup = TPOT_base / TPOT_spec."""
    for c in grid:
        batch = min(c, MAX_NUM_SEQS)
        if BASE.tpot_at(batch, TOKENS) / SPEC.tpot_at(batch, TOKENS) < FLOOR:
            return c
    return None


def test_concurrency_grid_doubles_up_to_max_num_seqs_then_shows_queueing_at_2x_and_4x():
    assert concurrency_grid(4) == [1, 2, 4, 8, 16]
    assert concurrency_grid(6) == [1, 2, 4, 6, 12, 24]
    assert concurrency_grid(1) == [1, 2, 4]
    with pytest.raises(ValueError, match="max_num_seqs=0 must be >= 1"):
        concurrency_grid(0)


@pytest.mark.timing
def test_the_sweep_finds_the_stand_ins_crossover_within_one_grid_step(sweep: SweepResults):
    truth = expected_crossover(GRID)
    assert truth is not None and truth != GRID[0]  # the stand-ins are built to cross inside the grid
    found = crossovers(sweep, FLOOR)
    assert {(c.variant, c.kind, c.load) for c in found} == {
        ("speculative", "structured", "concurrency"),
        ("speculative", "open-ended", "concurrency"),
    }
    for c in found:
        assert c.value is not None and abs(GRID.index(int(c.value)) - GRID.index(truth)) <= 1
        assert c.speedup is not None and c.speedup.low <= c.speedup.median <= c.speedup.high
        assert c.speedup.repeats == 2 and c.speedup.median < FLOOR
        assert c.last_paying_speedup is None or c.last_paying_speedup.median >= FLOOR


@pytest.mark.timing
def test_goodput_drops_where_requests_queue_past_the_ttft_slo(sweep: SweepResults):
    """TTFT limit 60 ms: at concurrency 1 nothing queues (TTFT 10 ms) and every request is good; at 2x
    max_num_seqs each request but the first max_num_seqs waits a whole response (>= 130 ms) for a slot. Margins
    of 40 ms and more, because the limit between the two stand-ins' TPOTs (1.8 ms apart) failed at load 18 on
    this shared machine; the exact count, TPOT included, is the records test below."""
    slo = Slo(ttft_s=0.06, tpot_s=1.0)
    stats = {(s.point.value, s.variant): s for s in all_stats(sweep, slo)}
    for variant in ("baseline", "speculative"):
        idle, queued = stats[(1, variant)], stats[(2 * MAX_NUM_SEQS, variant)]
        assert idle.goodput_rps >= 0.9 * idle.request_rps > 0
        assert queued.goodput_rps <= 0.25 * queued.request_rps and not queued.meets_slo
        assert queued.request_rps > 0


def _run(records: list[RequestRecord], duration: float) -> CaseRun:
    return CaseRun(
        variant="v",
        test_case="json",
        kind="structured",
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        duration_s=duration,
        records=records,
        summary=summarize(records, duration_s=duration, max_tokens=11),
        spec_decode=SpecDecodeResult(engine="none", exposed=False),
    )


def test_goodput_is_good_requests_per_second_as_vllm_counts_them():
    slo = Slo(ttft_s=0.2, tpot_s=0.05)
    records = [
        record(0.0, 0.1, 0.04),  # good
        record(0.1, 0.2, 0.05),  # good: the limits are inclusive
        record(0.2, 0.25, 0.01),  # TTFT over
        record(0.3, 0.1, 0.06),  # TPOT over
        RequestRecord(start_s=0.4, error="HTTP 503"),
    ]
    assert goodput([_run(records, 2.0)], slo) == pytest.approx(2 / 2.0)


def test_a_run_whose_ttft_keeps_growing_is_saturated_and_a_steady_one_is_not():
    steady = [record(i * 0.1, 0.05 + 0.002 * (i % 3), 0.02) for i in range(12)]
    growing = [record(i * 0.1, 0.05 + 0.06 * i, 0.02) for i in range(12)]
    jitter = [record(i * 0.1, 0.002 + 0.003 * (i > 6), 0.02) for i in range(12)]  # triples, but by 3 ms
    assert not is_saturated(_run(steady, 2.0))
    assert is_saturated(_run(growing, 2.0))
    assert not is_saturated(_run(jitter, 2.0))


@pytest.mark.timing
def test_a_rate_past_the_stand_ins_capacity_is_flagged_saturated_and_left_out(stand_ins: dict[str, str]):
    """Capacity is max_num_seqs / E2E; at a quarter of it the queue stays empty, at three times it grows."""
    e2e = BASE.ttft_s + (TOKENS - 1) * BASE.step_at(MAX_NUM_SEQS)
    capacity = MAX_NUM_SEQS / e2e
    low, high = round(capacity / 4, 1), round(capacity * 3, 1)
    endpoints = [Endpoint("baseline", stand_ins["baseline"])]
    settings = _settings([], [low, high], repeats=1, requests=16)
    result = asyncio.run(run_sweep(endpoints, CASES[:1], settings, options=quiet()))
    stats = {s.point.value: s for s in all_stats(result, Slo(0.2, 0.05))}
    assert not stats[low].saturated and stats[high].saturated
    assert best_goodput(list(stats.values()))[("baseline", "rate")].point.value == low


@pytest.mark.timing
def test_the_report_crossover_file_peer_files_and_plots(sweep: SweepResults, tmp_path: Path):
    paths = write_sweep_report(sweep, tmp_path, FLOOR, Slo(0.2, 0.05))
    names = {p.relative_to(tmp_path).as_posix() for p in paths}
    assert names == {
        "report.md", "crossover.json", "speedup_vs_concurrency.png", "pareto.png", "goodput_vs_rate.png",
        "peer/baseline.jsonl", "peer/speculative.jsonl",
    }  # fmt: skip
    for png in ("speedup_vs_concurrency.png", "pareto.png", "goodput_vs_rate.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    crossover = CrossoverFile.model_validate_json((tmp_path / "crossover.json").read_text())
    assert crossover.threshold("speculative", "structured") == crossovers(sweep, FLOOR)[0].value
    assert "falls below 1.05x at concurrency" in (tmp_path / "report.md").read_text()
    lines = (tmp_path / "peer" / "speculative.jsonl").read_text().splitlines()
    assert len(lines) == len(GRID) * 2 * len(CASES)  # one per (point, repeat, case)
    first = json.loads(lines[0])
    assert first["max_concurrency"] == 1 and first["request_rate"] == "inf" and first["completed"] == 4


def _vllm_saved_keys() -> set[str]:
    """The keys `vllm bench serve --save-result --save-detailed` writes for a generation run without goodput
    extras, read from vLLM 0.29.0's own source (its result dict and result_json assignments)."""
    import ast

    source = ROOT / ".venv-vllm-0.29.0/lib/python3.11/site-packages/vllm/benchmarks/serve.py"
    if not source.exists():
        pytest.skip("the vLLM 0.29.0 environment is not built (make test builds it)")
    tree = ast.parse(source.read_text())
    keys: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            literal = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            if {"duration", "completed", "ttfts", "itls"} <= literal:
                keys |= literal  # the generation result of benchmark()
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "result_json"
                    and isinstance(target.slice, ast.Constant)
                ):
                    keys.add(target.slice.value)
    conditional = {"ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps"}  # only with --ramp-up-strategy
    per_metric = {f"{s}_{m}_ms" for s in ("mean", "median", "std", "p99") for m in ("ttft", "tpot", "itl", "e2el")}
    return (keys - conditional) | per_metric


def test_no_prediction_section_when_the_baseline_has_no_tpot_at_any_concurrency(stand_ins: dict[str, str]):
    """Before: loads[0] of an empty list raised IndexError and `bench sweep-report` ended in a traceback. A real
    sweep of two concurrencies, one request each: the module's full `sweep` (20-30 s) runs only in the timing
    phase, where its timing tests need it, not a second time in the concurrent shard for this test."""
    endpoints = [Endpoint(name, url) for name, url in stand_ins.items()]
    settings = _settings([1, 2], [], repeats=1, requests=1)
    two_points = asyncio.run(run_sweep(endpoints, CASES[:1], settings, options=quiet()))
    assert {p.point.value for p in two_points.points} == {1, 2}
    assert prediction_section(two_points, FLOOR, []) == []


def test_peer_records_carry_every_key_vllm_bench_serve_saves():
    records = [record(0.0, 0.1, 0.04), record(0.1, 0.12, 0.03)]
    from bench.results import BenchResults, VariantInfo
    from bench.sweep.run import LoadPoint, PointRun

    settings = _settings([2], [], 1, 2).run.model_copy(update={"concurrency": 2})
    variant = VariantInfo(name="v", base_url="http://127.0.0.1:1", model="m")
    results = BenchResults(created_at=datetime(2026, 1, 1, tzinfo=UTC), settings=settings, variants=[variant], runs=[])
    point = PointRun(point=LoadPoint(kind="concurrency", value=2), repeat=0, results=results)
    peer = peer_record(point, _run(records, 1.0), variant, "chat", Slo(0.2, 0.05))
    missing = _vllm_saved_keys() - set(peer)
    assert not missing, f"the peer record lacks vLLM's keys {sorted(missing)}"
    assert peer["median_tpot_ms"] == pytest.approx(35.0) and peer["request_goodput"] == pytest.approx(2.0)


@pytest.mark.timing
def test_crossover_series_are_published_under_the_dashboards_names(sweep: SweepResults):
    from bench.cloudwatch import build_datums
    from bench.sweep.report import sweep_series

    datums = build_datums(sweep_series(sweep, FLOOR, Slo(0.2, 0.05)))
    names = {(d["MetricName"], d["Unit"], tuple((x["Name"], x["Value"]) for x in d["Dimensions"])) for d in datums}
    assert (
        "SpeculationCrossoverConcurrency",
        "Count",
        (("Variant", "speculative"), ("TestCase", "sweep/structured")),
    ) in names


@pytest.mark.timing
def test_a_concurrency_point_sends_four_requests_per_worker_and_a_rate_point_requests_per_point():
    settings = sweep_settings(requests_per_point=10)
    wide = point_settings(settings, LoadPoint(kind="concurrency", value=8))
    assert (wide.concurrency, wide.requests, wide.warmup) == (8, 32, 8)
    assert point_settings(settings, LoadPoint(kind="concurrency", value=2)).requests == 10
    rate = point_settings(settings, LoadPoint(kind="rate", value=50.0))
    assert (rate.rate, rate.concurrency, rate.requests, rate.warmup) == (50.0, None, 10, 8)


def test_a_resume_file_run_with_other_settings_is_refused_before_any_point_runs():
    """Both sweeps start through start_sweep: runs at other settings would not compare with the new ones."""
    earlier = start_sweep(sweep_settings(repeats=2), None)
    with pytest.raises(ValueError, match=r"^--resume: the sweep file was run with other settings .*a new --out$"):
        start_sweep(sweep_settings(repeats=3), earlier)
    assert start_sweep(sweep_settings(repeats=2), earlier).settings == earlier.settings


def test_a_killed_sweep_resumes_without_losing_or_repeating_a_point(stand_ins: dict[str, str], tmp_path: Path):
    """SIGKILL once the sweep file holds a point, then --resume: every (point, repeat) of the full grid exactly once."""
    out = tmp_path / "sweep.json"
    args = [
        sys.executable, "-m", "bench", "sweep",
        "--endpoint", f"baseline={stand_ins['baseline']}", "--endpoint", f"speculative={stand_ins['speculative']}",
        "--cases", CASES[0].name, "--concurrency", "1,2", "--rates", "none", "--repeats", "2", "--requests", "4",
        "--max-tokens", str(TOKENS), "--max-num-seqs", str(MAX_NUM_SEQS), "--out", str(out), "--grid", "full",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and len(load_sweep(out).points) >= 1:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep finished before it could be killed; give it more points"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    kept = len(load_sweep(out).points)
    assert 1 <= kept < 4
    done = subprocess.run([*args, "--resume"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    points = [(p.point.kind, p.point.value, p.repeat) for p in load_sweep(out).points]
    assert sorted(points) == sorted(("concurrency", float(c), r) for c in (1, 2) for r in range(2))
    assert done.stderr.count("already in the sweep file; skipped") == kept


def test_a_sweep_whose_upload_and_publish_meet_a_silent_aws_ends_in_sentences(
    sweep: SweepResults, silent_aws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Each AWS call of `bench sweep` goes through a bounded client; a failure is a sentence and exit 1, never a
    traceback (the sweep's upload used an unbounded client and its publish error escaped the CLI)."""
    import argparse
    from functools import partial

    from bench.commands.command import Command, execute_and_report
    from bench.commands.sweep_report import sweep_outputs
    from bench.sweep.run import save_sweep
    from config import load_config

    source = save_sweep(sweep, tmp_path / "sweep.json")
    cfg = load_config(ROOT / "config" / "default.yaml")
    bucket = f"trn-specdec-models-{EXAMPLE_ACCOUNT}-us-east-2"  # the owner is in the name: no STS call first
    for upload, cloudwatch, words in (
        (f"s3://{bucket}/results/run/", False, f"upload to s3://{bucket}/results/run/ failed"),
        (None, True, "CloudWatch publish to"),
    ):
        args = argparse.Namespace(no_plots=True, upload=upload, cloudwatch=cloudwatch)
        outputs = partial(sweep_outputs, sweep, source, tmp_path / "report", cfg)
        assert execute_and_report(Command("sweep", "", lambda _: None, outputs), args) == 1
        err = capsys.readouterr().err
        assert words in err and "did not answer" in err and "Traceback" not in err
