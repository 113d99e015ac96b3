"""The adaptive sweep (bench/sweep/adaptive.py): the full grid's crossover for a fraction of its requests.

Decisions are checked on measurements simulated from the measured H100 step-time curves for the 9 (k, alpha)
pairs (bench/sweep/sim.py: seconds, where loopback stand-ins would take minutes per curve), and end to end on
two loopback stand-ins that step at the same curves (scaled down in time).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.prompts import DEFAULT_SUITE
from bench.results import BenchResults, CaseRun, VariantInfo, summarize
from bench.runner import Endpoint
from bench.spec_metrics import SpecDecodeResult
from bench.standin.selfcheck import loopback_server
from bench.standin.server import Script
from bench.standin.step_table import StepTable, acceptance_pattern
from bench.sweep.adaptive import Action, AdaptiveSweep, Measurement, Planner, run_adaptive_sweep
from bench.sweep.analysis import Observation, Slo, crossovers
from bench.sweep.report import CrossoverFile, write_sweep_report
from bench.sweep.run import LoadPoint, SweepResults, concurrency_grid, start_sweep
from bench.sweep.sim import SimulatedPair, adaptive, full_grid
from tests.bench.builders import quiet, record, run_settings, sweep_settings
from tests.bench.conftest import FIXTURES

FLOOR = 1.05
TABLE = StepTable.load(FIXTURES / "step-times-h100-qwen3-32b.json")
PAIRS = [(k, a) for k in (3, 5, 7) for a in (0.6, 0.7, 0.8)]
MAX_NUM_SEQS = 256  # the H100 curves cross between batch 16 and 64
GRID = [float(c) for c in concurrency_grid(MAX_NUM_SEQS)]  # 1 .. 256, then 512 and 1024 as `make bench-sweep`
S = ("speculative", "structured")


@pytest.mark.parametrize(("k", "alpha"), PAIRS, ids=[f"k{k}-a{a}" for k, a in PAIRS])
def test_on_the_h100_curves_the_adaptive_sweep_finds_the_full_grids_crossover_for_a_quarter_of_its_requests(
    k: int, alpha: float
):
    """64 output tokens (fewer than the default 256, so each request's acceptance varies more: a harder case)."""
    pair = SimulatedPair(TABLE.curve(0), TABLE.curve(k), k, alpha, MAX_NUM_SEQS, tokens=64)
    full = full_grid(pair, GRID, repeats=3)
    found, planner = adaptive(pair, GRID, repeats=3, floor=FLOOR)
    assert full.crossover is not None and found.crossover is not None
    assert abs(GRID.index(found.crossover) - GRID.index(full.crossover)) <= 1
    assert found.uncertain == full.uncertain
    assert found.requests <= 0.25 * full.requests
    assert max(planner.measured) <= 2 * full.crossover  # nothing far above the crossover was paid for
    for series in planner.series():  # every series' crossover bracketed by neighbouring grid loads
        lo, hi = planner.bracket(series)
        assert lo is not None and hi is not None and GRID.index(hi) - GRID.index(lo) == 1, (series, lo, hi)


def _obs(speedup: float, spread: float = 0.01, base: float = 0.03) -> Observation:
    return Observation(speedup, speedup * (1 - spread), speedup * (1 + spread), base, base / speedup)


def _drive(planner: Planner, truth: dict[float, list[float]]) -> list[Action]:
    """Measure what the planner asks, each repeat's speedup from `truth` (TPOTs from the speedup)."""
    actions = []
    while (action := planner.next()) is not None:
        actions.append(action)
        speedup = truth[action.value][action.repeat % len(truth[action.value])]
        planner.record(action, Measurement({S: _obs(speedup)}, requests=10, seconds=1.0))
    return actions


CURVE = {1.0: [1.9], 2.0: [1.85], 4.0: [1.7], 8.0: [1.5], 16.0: [1.3], 32.0: [0.9], 64.0: [0.6], 128.0: [0.4]}


def test_a_clear_curve_takes_a_coarse_pass_one_bisection_and_two_repeats_at_each_end():
    planner = Planner(list(CURVE), FLOOR, max_repeats=3)
    actions = _drive(planner, CURVE)
    assert sorted(planner.measured) == [1.0, 4.0, 16.0, 32.0]  # 2 and 8: coarse steps; 64, 128: past it
    assert planner.crossover(S) == (32.0, False)
    assert [len(planner.measured[v]) for v in (1.0, 4.0, 16.0, 32.0)] == [1, 1, 2, 2]
    assert actions[0].reason == "coarse pass: the lowest load"
    assert any("repeat: speculative/structured first not paying" in a.reason for a in actions)
    decided = {d.point.value: d for d in planner.decisions("concurrency", undecided=False)}
    assert decided[64.0].status == "skipped" and "above its crossover 32" in decided[64.0].reason
    assert decided[8.0].status == "skipped" and decided[32.0].predicted  # predicted before it was measured


def test_the_bisection_ends_with_neighbouring_grid_loads_around_the_crossover_and_repeats_only_them():
    """The coarse pass steps from 4 over 8 to 16, which does not pay: the crossover (8) lies between loads two grid
    steps apart, and only a bisection to neighbours finds it and sends the repeats to its neighbours."""
    curve = {1.0: [1.9], 2.0: [1.85], 4.0: [1.7], 8.0: [1.0], 16.0: [0.8], 32.0: [0.6], 64.0: [0.4]}
    planner = Planner(list(curve), FLOOR, max_repeats=3)
    actions = _drive(planner, curve)
    assert [a.value for a in actions[:3]] == [1.0, 4.0, 16.0]  # the coarse pass jumps over the crossover
    assert any(a.value == 8.0 and a.reason.startswith("bisection") for a in actions)
    lo, hi = planner.bracket(S)
    assert (lo, hi) == (4.0, 8.0) and planner.crossover(S) == (8.0, False)
    assert {a.value for a in actions if a.repeat > 0} == {4.0, 8.0}  # neighbours of the crossover, not 16


def test_a_point_whose_repeats_hold_the_floor_gets_every_repeat_and_the_crossover_is_uncertain():
    curve = {**CURVE, 32.0: [1.06, 1.07, 1.03]}  # median 1.06 pays; the third repeat does not
    planner = Planner(list(curve), FLOOR, max_repeats=3)
    _drive(planner, curve)
    assert len(planner.measured[32.0]) == 3
    assert planner.crossover(S) == (64.0, True)


def test_a_model_that_predicts_the_crossover_far_away_still_steps_at_most_two_grid_loads():
    """Flat TPOTs at 1 and 2 predict no crossover at all: the coarse pass must not jump over the grid."""
    flat = {1.0: [1.9], 2.0: [1.9], 4.0: [1.9], 8.0: [1.9], 16.0: [1.0], 32.0: [0.8]}
    planner = Planner(list(flat), FLOOR, max_repeats=1)
    values = [a.value for a in _drive(planner, flat)]
    assert values[:3] == [1.0, 4.0, 16.0] and planner.crossover(S)[0] == 16.0


def test_speculation_that_pays_everywhere_measures_up_to_the_top_and_names_no_crossover():
    paying = {v: [1.5] for v in CURVE}
    planner = Planner(list(paying), FLOOR, max_repeats=3)
    _drive(planner, paying)
    assert max(planner.measured) == 128.0 and planner.crossover(S) == (None, False)


def _h100_script(k: int, alpha: float, scale: float, max_num_seqs: int) -> Script:
    common = {"ttft_s": 0.005, "max_num_seqs": max_num_seqs}
    if k == 0:
        return Script(**common, step_curve=TABLE.curve(0, scale))  # type: ignore[arg-type]
    return Script(
        **common,  # type: ignore[arg-type]
        step_curve=TABLE.curve(k, scale),
        pattern=acceptance_pattern(alpha, k),
        stack="vllm-neuron",
        num_speculative_tokens=k,
    )


@pytest.mark.timing
def test_end_to_end_on_loopback_stand_ins_stepping_at_the_h100_curves(tmp_path: Path):
    """k=5, alpha=0.6 (the file: 1.11x at batch 16, 0.87x at 32) at the H100 step times (a quarter of them left
    the client CPU-bound at 32 streams on this 2-core machine, which inflated the baseline's TPOT),
    max_num_seqs 32: the adaptive sweep names 32, skips 64 and 128 (above max_num_seqs), and its report says
    how each load was decided; crossover.json keeps schema_version 1."""
    mns, tokens = 32, 8
    base, spec = _h100_script(0, 0.0, 1.0, mns), _h100_script(5, 0.6, 1.0, mns)
    case = next(c for c in DEFAULT_SUITE if c.kind == "structured")
    settings = sweep_settings(
        run=run_settings(requests=4, max_tokens=tokens),
        concurrencies=concurrency_grid(mns),
        repeats=2,
        requests_per_point=4,
        max_num_seqs=mns,
    )
    with loopback_server(base, 300) as b, loopback_server(spec, 300) as s:
        endpoints = [Endpoint("baseline", b), Endpoint("speculative", s)]
        sweep = asyncio.run(
            run_adaptive_sweep(endpoints, [case], settings, FLOOR, options=quiet(k_by_variant={"speculative": 5}))
        )
        capped = settings.model_copy(update={"budget_minutes": 0.001})  # 60 ms: one run, then no more
        stopped = asyncio.run(run_adaptive_sweep(endpoints, [case], capped, FLOOR, options=quiet()))
    assert stopped.adaptive is not None and stopped.adaptive.budget_exhausted
    assert len(stopped.points) == 1 and stopped.adaptive.undecided[0].startswith("speculative/structured: crossover")
    [found] = crossovers(sweep, FLOOR)
    assert found.value is not None and found.value in (16.0, 32.0, 64.0)  # 32 within one grid step
    assert sweep.adaptive is not None
    decided = {d.point.value: d for d in sweep.adaptive.decisions}
    assert decided[64.0].status == "skipped" and "above max_num_seqs 32" in decided[64.0].reason
    assert decided[2.0].status == "skipped"  # the coarse pass steps 1 -> 4
    assert sum(d.requests for d in sweep.adaptive.decisions) == sum(
        len(r.records) for p in sweep.points for r in p.results.runs
    )
    write_sweep_report(sweep, tmp_path, FLOOR, Slo(0.2, 0.05), plots=False)
    report = (tmp_path / "report.md").read_text()
    assert "## How each load was decided (adaptive sweep)" in report and "coarse pass" in report
    assert "## Predicted before paying vs measured" in report  # bench tune's model from c=1 and two loads
    assert CrossoverFile.model_validate_json((tmp_path / "crossover.json").read_text()).schema_version == 1


def test_without_a_speculative_variant_every_load_runs_once():
    planner = Planner([1.0, 2.0, 4.0], FLOOR, max_repeats=3)
    while (action := planner.next()) is not None:
        planner.record(action, Measurement({}, requests=4, seconds=1.0))
    assert {v: len(ms) for v, ms in planner.measured.items()} == {1.0: 1, 2.0: 1, 4.0: 1}


def test_a_budget_stops_before_the_run_that_would_pass_it_and_says_what_is_undecided():
    planner = Planner(list(CURVE), FLOOR, max_repeats=3)
    planner.record(Action(1.0, 0, "coarse pass: the lowest load"), Measurement({S: _obs(1.9)}, 10, 60.0))
    planner.record(Action(4.0, 0, "coarse pass"), Measurement({S: _obs(1.7)}, 10, 60.0))
    assert planner.next() is not None
    [left] = planner.left_open()
    assert left.startswith("speculative/structured: crossover above 4 not settled (next: coarse pass")


class FakeNode:
    """A run of load v takes 10 v seconds of its clock (no sleeping), plus `setup_s` outside the case runs (model
    discovery, warm-up, metric scrapes): two cases, baseline and speculative (speedup from CURVE) one after the
    other (interleaved: four case runs of a quarter each) or each case's two at once (simultaneous: both variants'
    durations the whole half)."""

    def __init__(self, mode: str, setup_s: float = 0.0) -> None:
        self.mode = mode
        self.setup_s = setup_s
        self.now = 0.0
        self.runs = 0

    def clock(self) -> float:
        return self.now

    async def run_point(self, point: LoadPoint) -> BenchResults:
        wall, start = 10.0 * point.value, WHEN + timedelta(seconds=self.now + self.setup_s)
        cases = [c for c in DEFAULT_SUITE if c.kind == "structured"][:1] + [
            c for c in DEFAULT_SUITE if c.kind == "open-ended"
        ][:1]
        runs = []
        for case in cases:
            for variant, tpot in (("baseline", 0.02), ("speculative", 0.02 / CURVE[point.value][0])):
                records = [record(i * 0.01, 0.05, tpot) for i in range(4)]
                seconds = wall / 4 if self.mode == "interleaved" else wall / 2
                runs.append(
                    CaseRun(
                        variant=variant,
                        test_case=case.name,
                        kind=case.kind,
                        started_at=start,
                        duration_s=seconds,
                        records=records,
                        summary=summarize(records, duration_s=seconds, max_tokens=11),
                        spec_decode=SpecDecodeResult(engine="none", exposed=False),
                    )
                )
                start += timedelta(seconds=seconds) if self.mode == "interleaved" else timedelta()
            start += timedelta() if self.mode == "interleaved" else timedelta(seconds=wall / 2)
        self.now += self.setup_s + wall
        self.runs += 1
        variants = [VariantInfo(name=n, base_url="http://127.0.0.1:1", model="m") for n in ("baseline", "speculative")]
        return BenchResults(created_at=WHEN, settings=RUN, variants=variants, baseline_variant="baseline", runs=runs)


WHEN = datetime(2026, 1, 1, tzinfo=UTC)
RUN = run_settings(requests=4, max_tokens=11)
MODES = ["interleaved", "simultaneous"]


def _budgeted(node: FakeNode, resume: SweepResults | None = None) -> SweepResults:
    """CURVE's loads 1 to 32 with a budget of 150 s: load 1 (10 s), then the coarse pass's 4 (estimated 40 s, so
    50 s in all), then not the coarse pass's 16 (estimated 160 s; twice the budget would have let it start)."""
    run = RUN.model_copy(update={"mode": node.mode})
    settings = sweep_settings(
        run=run,
        concurrencies=[1, 2, 4, 8, 16, 32],
        rates=[],
        repeats=3,
        max_num_seqs=32,
        grid="adaptive",
        budget_minutes=2.5,
    )
    sweep = AdaptiveSweep(
        start_sweep(settings, resume), FLOOR, node.run_point, lambda _: None, lambda _: None, clock=node.clock
    )
    return asyncio.run(sweep.run())


@pytest.mark.parametrize("mode", MODES)
def test_the_budget_is_wall_time_whatever_the_mode(mode: str):
    """What the clock says each run took, its setup included: simultaneous variants count once (a sweep that
    summed the variants' durations would count twice the clock's time under --mode simultaneous)."""
    node = FakeNode(mode, setup_s=2.0)
    sweep = _budgeted(node)
    assert sweep.adaptive is not None and sweep.adaptive.budget_exhausted
    assert [p.point.value for p in sweep.points] == [1.0, 4.0]  # 12 s + 48 s, then 16's 192 s would pass 150 s
    assert sweep.adaptive.minutes * 60 == pytest.approx(node.now) == pytest.approx(54.0)
    assert sweep.adaptive.undecided[0].startswith("speculative/structured: crossover above 4 not settled")


@pytest.mark.parametrize("mode", MODES)
def test_a_resumed_sweep_counts_the_runs_it_reuses_at_the_wall_time_they_took(mode: str):
    """The clock did not see the reused runs: their span in the sweep file stands for it, so the resumed sweep
    runs nothing more and stops where the first one did."""
    first = _budgeted(FakeNode(mode))
    again = FakeNode(mode)
    resumed = _budgeted(again, resume=first)
    assert again.runs == 0
    assert resumed.adaptive is not None and first.adaptive is not None
    assert resumed.adaptive.minutes == pytest.approx(first.adaptive.minutes)
    assert resumed.adaptive.decisions == first.adaptive.decisions


def test_budget_minutes_with_the_full_grid_is_refused_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Port 9 refuses: reaching it would be exit 1, not 2."""
    from bench.__main__ import main

    code = main(["sweep", "--endpoint", "a=http://127.0.0.1:9", "--concurrency", "1", "--grid", "full",
                 "--budget-minutes", "30", "--out", str(tmp_path / "s.json")])  # fmt: skip
    assert code == 2
    assert "--budget-minutes 30 caps the adaptive sweep; --grid full runs every point" in capsys.readouterr().err


@pytest.mark.timing
def test_bench_sweep_is_adaptive_by_default_and_its_budget_leaves_the_rest_undecided(
    serve, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """The CLI on two linear stand-ins (tests/bench/sweep/test_run.py's): a budget of 0.001 min runs the lowest load
    only, and the sweep file and report say what is left."""
    from bench.__main__ import main
    from bench.sweep.run import load_sweep
    from tests.bench.sweep.test_run import BASE, SPEC

    out = tmp_path / "sweep.json"
    code = main([
        "sweep", "--endpoint", f"baseline={serve(BASE)}", "--endpoint", f"speculative={serve(SPEC)}",
        "--cases", "counting", "--concurrency", "1,2,4", "--rates", "none", "--requests", "4", "--max-tokens", "16",
        "--max-num-seqs", "4", "--budget-minutes", "0.001", "--no-plots", "--out", str(out),
    ])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    sweep = load_sweep(out)
    assert sweep.settings.grid == "adaptive" and sweep.adaptive is not None and sweep.adaptive.budget_exhausted
    assert [p.point.value for p in sweep.points] == [1.0]
    report = (tmp_path / "sweep" / "report.md").read_text()
    assert "**exhausted**" in report and "Left undecided:" in report
