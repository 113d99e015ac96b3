"""What a sweep produces: report.md, crossover.json (for the endpoint's spill threshold), the peer-format files
(`vllm bench serve --save-result` JSON), the CloudWatch series of the crossover and goodput, and (with
matplotlib, bench/sweep/plots.py) three plots.

Why a peer format: users already have `vllm bench serve` numbers; the same keys, computed the same way (ITL per
chunk gap, not token-weighted), let them put ours beside theirs without trusting our definitions.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import table
from bench.cloudwatch import Series
from bench.results import CaseRun, VariantInfo
from bench.sweep.analysis import (
    Crossover,
    KindSpeedup,
    PointStats,
    Slo,
    all_stats,
    best_goodput,
    chunk_gaps,
    crossovers,
    is_good,
    is_saturated,
    kind_speedups,
    p,
)
from bench.sweep.run import PointRun, SweepResults
from config.crossover import CrossoverEntry, CrossoverFile, SpeedupRange
from config.metrics import (
    COUNT,
    CROSSOVER_CONCURRENCY,
    CROSSOVER_RATE,
    GOODPUT,
    PER_SECOND,
    SWEEP_TEST_CASE_PREFIX,
)


def _range(s: KindSpeedup | None) -> SpeedupRange | None:
    return None if s is None else SpeedupRange(median=s.median, low=s.low, high=s.high, repeats=s.repeats)


def crossover_file(sweep: SweepResults, floor: float, slo: Slo) -> CrossoverFile:
    entries = [
        CrossoverEntry(
            variant=c.variant,
            kind=c.kind,  # type: ignore[arg-type]
            load=c.load,
            crossover=c.value,
            speedup=_range(c.speedup),
            last_paying=c.last_paying,
            last_paying_speedup=_range(c.last_paying_speedup),
            uncertain=c.uncertain,
            grid=c.grid,
        )
        for c in crossovers(sweep, floor)
    ]
    return CrossoverFile(
        created_at=sweep.created_at,
        baseline=sweep.baseline,
        speedup_floor=floor,
        max_num_seqs=sweep.settings.max_num_seqs,
        slo_ttft_p99_ms=slo.ttft_s * 1000,
        slo_tpot_p99_ms=slo.tpot_s * 1000,
        crossovers=entries,
    )


# --- peer format: `vllm bench serve --save-result --save-detailed`, one JSON object per line ----------------

_PERCENTILES = (50.0, 90.0, 99.0)


def _ms_stats(name: str, values: Sequence[float]) -> dict[str, float]:
    """mean/median/std/pN of `values` (s) in ms, under vLLM's key names (`mean_ttft_ms`, `p99_ttft_ms` ...)."""
    if not values:
        values = [0.0]  # vLLM reports 0 for an empty list (np.mean(x or 0))
    out = {
        f"mean_{name}_ms": statistics.fmean(values) * 1000,
        f"median_{name}_ms": statistics.median(values) * 1000,
        f"std_{name}_ms": statistics.pstdev(values) * 1000,
    }
    for q in _PERCENTILES:
        out[f"p{q:g}_{name}_ms"] = (p(values, q) or 0.0) * 1000
    return out


def peer_record(point: PointRun, run: CaseRun, variant: VariantInfo, api: str, slo: Slo) -> dict[str, Any]:
    """One run as `vllm bench serve` saves it (vLLM 0.29.0 vllm/benchmarks/serve.py: the result dict of
    `benchmark()` and the keys `main` adds), plus `trn_specdec_*` keys saying which point it is. TTFT, TPOT and
    E2E as vLLM computes them; ITL per chunk gap (vLLM's definition), not our token-weighted ITL; prompt token
    counts are not measured (input lens 0)."""
    ok = [r for r in run.records if r.ok]
    tokens = [r.output_tokens if r.ok else 0 for r in run.records]
    duration = run.duration_s
    good = sum(is_good(r, slo) for r in run.records)
    settings = point.results.settings
    itls = [chunk_gaps(r) if r.ok else [] for r in run.records]
    out: dict[str, Any] = {
        "date": run.started_at.strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": "openai-chat" if api == "chat" else "openai",
        "backend": "openai-chat" if api == "chat" else "openai",
        "label": variant.name,
        "model_id": variant.model,
        "tokenizer_id": variant.model,
        "num_prompts": len(run.records),
        "request_rate": settings.rate if settings.rate is not None else "inf",
        "burstiness": 1.0,
        "max_concurrency": settings.concurrency,
        "duration": duration,
        "completed": len(ok),
        "failed": len(run.records) - len(ok),
        "total_input_tokens": 0,
        "total_output_tokens": sum(tokens),
        "request_throughput": len(ok) / duration if duration > 0 else 0.0,
        "request_goodput": good / duration if duration > 0 else 0.0,
        "output_throughput": sum(tokens) / duration if duration > 0 else 0.0,
        "total_token_throughput": sum(tokens) / duration if duration > 0 else 0.0,
        "max_output_tokens_per_s": None,
        "max_concurrent_requests": None,
        "rtfx": 0.0,
    }
    out |= _ms_stats("ttft", [r.ttft_s for r in ok if r.ttft_s is not None])
    out |= _ms_stats("tpot", [t for r in ok if (t := r.tpot_s) is not None])
    out |= _ms_stats("itl", [g for gaps in itls for g in gaps])
    out |= _ms_stats("e2el", [r.e2e_s for r in ok if r.e2e_s is not None])
    out |= {
        "input_lens": [0] * len(run.records),
        "output_lens": tokens,
        "ttfts": [r.ttft_s or 0.0 for r in run.records],
        "itls": itls,
        "start_times": [r.start_s for r in run.records],
        "generated_texts": [r.output_text for r in run.records],
        "errors": [r.error or "" for r in run.records],
    }
    spec = run.spec_decode
    if spec.mean_acceptance_length is not None:
        out |= {
            "spec_decode_acceptance_rate": (spec.acceptance_rate or 0.0) * 100,
            "spec_decode_acceptance_length": spec.mean_acceptance_length,
            "spec_decode_num_drafts": int(spec.drafts or 0),
            "spec_decode_draft_tokens": int(spec.draft_tokens or 0),
            "spec_decode_accepted_tokens": int(spec.accepted_tokens or 0),
            "spec_decode_per_position_acceptance_rates": spec.per_position,
        }
    out |= {
        "goodput_ttft_ms": slo.ttft_s * 1000,
        "goodput_tpot_ms": slo.tpot_s * 1000,
        "trn_specdec_load": point.point.kind,
        "trn_specdec_load_value": point.point.value,
        "trn_specdec_repeat": point.repeat,
        "trn_specdec_test_case": run.test_case,
        "trn_specdec_kind": run.kind,
        "trn_specdec_saturated": is_saturated(run),
    }
    return out


def write_peer_files(sweep: SweepResults, out_dir: Path, slo: Slo) -> list[Path]:
    """peer/<variant>.jsonl: one `vllm bench serve` result per (point, repeat, case), as `--append-result` writes."""
    folder = out_dir / "peer"
    folder.mkdir(parents=True, exist_ok=True)
    lines: dict[str, list[str]] = {}
    for point in sweep.points:
        info = {v.name: v for v in point.results.variants}
        for run in point.results.runs:
            record = peer_record(point, run, info[run.variant], point.results.settings.api, slo)
            lines.setdefault(run.variant, []).append(json.dumps(record))
    paths = []
    for variant, rows in lines.items():
        path = folder / f"{variant}.jsonl"
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


# --- CloudWatch ---------------------------------------------------------------------------------------------


def sweep_series(sweep: SweepResults, floor: float, slo: Slo) -> list[Series]:
    """The crossovers the sweep found (per speculative variant and kind) and each variant's best goodput."""
    when = max(p.results.created_at for p in sweep.points)
    out = []
    for c in crossovers(sweep, floor):
        if c.value is not None:
            name, unit = (CROSSOVER_CONCURRENCY, COUNT) if c.load == "concurrency" else (CROSSOVER_RATE, PER_SECOND)
            out.append(Series(name, unit, c.variant, f"{SWEEP_TEST_CASE_PREFIX}{c.kind}", when, {c.value: 1.0}))
    for (variant, load), s in best_goodput(all_stats(sweep, slo)).items():
        if load == "rate":
            out.append(Series(GOODPUT, PER_SECOND, variant, f"{SWEEP_TEST_CASE_PREFIX}all", when, {s.goodput_rps: 1.0}))
    return out


# --- report.md ----------------------------------------------------------------------------------------------


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1000:.1f}"


def _f(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def stats_rows(stats: Sequence[PointStats]) -> tuple[list[str], list[list[str]]]:
    header = [
        "load", "variant", "runs", "TTFT p50/p99 ms", "TPOT p50/p99 ms", "ITL p50/p99 ms", "E2E p50/p99 s",
        "out tok/s", "tok/s/device", "tok/s/user", "accept len", "errors", "req/s", "goodput req/s", "SLO",
        "TPOT spread", "saturated",
    ]  # fmt: skip
    rows = []
    for s in stats:
        rows.append(
            [
                s.point.label,
                s.variant,
                f"{s.used}/{s.repeats}",
                f"{_ms(s.ttft_p50)}/{_ms(s.ttft_p99)}",
                f"{_ms(s.tpot_p50)}/{_ms(s.tpot_p99)}",
                f"{_ms(s.itl_p50)}/{_ms(s.itl_p99)}",
                f"{_f(s.e2e_p50)}/{_f(s.e2e_p99)}",
                f"{s.output_tok_s:.1f}",
                _f(s.per_device_tok_s, ".1f"),
                _f(s.per_user_tok_s, ".1f"),
                _f(s.acceptance_length),
                str(s.errors),
                f"{s.request_rps:.2f}",
                f"{s.goodput_rps:.2f}",
                "yes" if s.meets_slo else "no",
                "-" if s.tpot_spread is None else f"{s.tpot_spread:.1%}",
                "SATURATED" if s.saturated else (f"{s.saturated_repeats} run(s)" if s.saturated_repeats else ""),
            ]
        )
    return header, rows


def _crossover_line(c: Crossover) -> str:
    unit = "requests in flight" if c.load == "concurrency" else "requests/s"
    if c.value is None:
        where = (
            f"pays at every unsaturated {c.load} measured (up to {c.last_paying:g} {unit}"
            + (f", {c.last_paying_speedup.median:.2f}x" if c.last_paying_speedup else "")
            + ")"
            if c.last_paying is not None
            else "no unsaturated points"
        )
    else:
        s = c.speedup
        assert s is not None
        where = (
            f"falls below {c.floor:.2f}x at {c.load} {c.value:g} ({s.median:.2f}x, repeats {s.low:.2f}-{s.high:.2f}x)"
        )
        if c.last_paying is not None and c.last_paying_speedup is not None:
            ls = c.last_paying_speedup
            where += f"; last paid at {c.last_paying:g} ({ls.median:.2f}x, {ls.low:.2f}-{ls.high:.2f}x)"
        else:
            where += "; it did not pay even at the lowest load"
    return (
        f"- `{c.variant}`, {c.kind}: "
        + where
        + (" **(uncertain: the floor is within the spread)**" if c.uncertain else "")
    )


def adaptive_section(sweep: SweepResults) -> list[str]:
    """How the adaptive sweep decided each load of the grid, what each cost, and what it left undecided."""
    log = sweep.adaptive
    assert log is not None
    measured = [d for d in log.decisions if d.status != "skipped"]
    requests = sum(d.requests for d in log.decisions)
    device_minutes = [d.device_minutes for d in measured]
    devices = f"{sum(x for x in device_minutes if x):.1f} device-minutes" if all(device_minutes) else "devices unknown"
    budget = "no budget" if log.budget_minutes is None else f"budget {log.budget_minutes:g} min"
    out = [
        "## How each load was decided (adaptive sweep)",
        "",
        f"{len(measured)} of {len(log.decisions)} grid loads measured, {requests} requests, {log.minutes:.1f} min "
        f"of runs ({devices}; {budget}"
        + (", **exhausted**" if log.budget_exhausted else "")
        + "). `--grid full` measures every load `repeats` times. `predicted`: the speedup the step-time model "
        "fitted to the loads measured before it predicted (bench/sweep/adaptive.py).",
        "",
    ]
    header = ["load", "decision", "runs", "requests", "minutes", "device-min", "predicted", "why"]
    rows = [
        [
            d.point.label,
            d.status,
            str(d.repeats),
            str(d.requests),
            f"{d.minutes:.2f}",
            _f(d.device_minutes),
            ", ".join(f"{k} {v:.2f}x" for k, v in d.predicted.items()) or "-",
            d.reason,
        ]
        for d in log.decisions
    ]
    out += [*table.markdown(header, rows), ""]
    if log.undecided:
        out += ["Left undecided:", "", *[f"- {u}" for u in log.undecided], ""]
    return out


def prediction_section(sweep: SweepResults, floor: float, stats: Sequence[PointStats]) -> list[str]:
    """`bench tune --baseline-tpot`'s prediction, made from what the sweep measured first (its lowest
    concurrency, and the baseline's p50 TPOT at its two lowest concurrencies), beside the measured crossover."""
    from bench.tune import PREDICTION_ASSUMPTIONS, predict_crossovers

    concurrency = sorted({p.point.value for p in sweep.points if p.point.kind == "concurrency"})
    base = {
        s.point.value: s.tpot_p50
        for s in stats
        if s.variant == sweep.baseline and s.point.kind == "concurrency" and s.tpot_p50
    }
    loads = [c for c in concurrency if c in base][:2]
    if len(loads) < 2:  # checked first: with no baseline TPOT at all, loads[0] does not exist
        return []
    first = next((p for p in sweep.points if p.point.kind == "concurrency" and p.point.value == loads[0]), None)
    if first is None:
        return []
    mns = sweep.settings.max_num_seqs
    grid = [float(c) for c in sweep.settings.concurrencies if mns is None or c <= mns]
    predictions = predict_crossovers(first.results, {}, {c: base[c] for c in loads}, grid, floor, mns)  # type: ignore[misc]
    if not predictions:
        return []
    measured = {(c.variant, c.kind): c.value for c in crossovers(sweep, floor) if c.load == "concurrency"}
    header = ["variant", "case", "kind", "predicted crossover", "measured crossover (kind)"]
    rows = [
        [
            p.variant,
            p.test_case,
            p.kind,
            "none in the grid" if p.crossover is None else f"{p.crossover:g}",
            "none in the grid" if measured.get((p.variant, p.kind)) is None else f"{measured[(p.variant, p.kind)]:g}",
        ]
        for p in predictions
    ]
    return [
        "## Predicted before paying vs measured",
        "",
        f"`bench tune --baseline-tpot`'s model, fed what this sweep measured first: acceptance and step times at "
        f"concurrency {loads[0]:g}, the baseline's TPOT at {loads[0]:g} and {loads[1]:g}. Assumptions: "
        + "; ".join(PREDICTION_ASSUMPTIONS)
        + ".",
        "",
        *table.markdown(header, rows),
        "",
    ]


def markdown(sweep: SweepResults, floor: float, slo: Slo, images: Sequence[str] = ()) -> str:
    s = sweep.settings
    stats = all_stats(sweep, slo)
    out = [
        "# Load sweep: does speculation pay, and up to what load?",
        "",
        f"Swept {sweep.created_at:%Y-%m-%d %H:%M} UTC against `{sweep.baseline}`; {s.repeats} run(s) per point, "
        f"at least {s.requests_per_point} requests per case and point, {s.run.max_tokens} output tokens, "
        f"max_num_seqs {s.max_num_seqs or 'unknown'}. Latencies: median over the runs of each run's p50/p99. "
        f"SLO: TTFT <= {slo.ttft_s * 1000:g} ms and TPOT <= {slo.tpot_s * 1000:g} ms (goodput counts requests within "
        "both; `SLO yes`: p99s within both). Saturated runs (TTFT growing through the run: the queue grows) are "
        "left out of the medians; a point whose runs all saturate is flagged and left out of the crossover.",
        "",
        "## Crossover (speedup floor " + f"{floor:.2f}x, p50 TPOT)",
        "",
        *[_crossover_line(c) for c in crossovers(sweep, floor)],
        "",
        "## Best goodput",
        "",
    ]
    for (variant, load), b in sorted(best_goodput(stats).items()):
        out.append(f"- `{variant}` ({load} sweep): {b.goodput_rps:.2f} req/s within the SLO at {b.point.label}")
    out += ["", "## Every point", "", *table.markdown(*stats_rows(stats)), ""]
    out += prediction_section(sweep, floor, stats)
    if sweep.adaptive is not None:
        out += adaptive_section(sweep)
    out += ["## Speedup per prompt kind", ""]
    header = ["load", "variant", "kind", "x TPOT (median)", "range", "runs", "saturated"]
    rows = [
        [k.point.label, k.variant, k.kind, f"{k.median:.2f}x", f"{k.low:.2f}-{k.high:.2f}x", str(k.repeats),
         "yes" if k.saturated else ""]
        for k in kind_speedups(sweep)
    ]  # fmt: skip
    out += [*table.markdown(header, rows), ""]
    out += [f"![{Path(i).stem}]({i})" for i in images]
    return "\n".join(out).rstrip() + "\n"


def write_sweep_report(
    sweep: SweepResults, out_dir: str | Path, floor: float, slo: Slo, *, plots: bool = True
) -> list[Path]:
    """report.md, crossover.json, peer/<variant>.jsonl and (`plots`, which needs matplotlib) three PNG plots."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stats = all_stats(sweep, slo)
    images: list[Path] = []
    if plots:
        from bench.sweep.plots import plot_goodput, plot_pareto, plot_speedup

        images = [
            plot_speedup(sweep, floor, out / "speedup_vs_concurrency.png"),
            plot_pareto(stats, out / "pareto.png"),
            plot_goodput(stats, slo, out / "goodput_vs_rate.png"),
        ]
    crossover = out / "crossover.json"
    crossover.write_text(crossover_file(sweep, floor, slo).model_dump_json(indent=1) + "\n", encoding="utf-8")
    md = out / "report.md"
    md.write_text(markdown(sweep, floor, slo, images=[p.name for p in images]), encoding="utf-8")
    return [md, crossover, *images, *write_peer_files(sweep, out, slo)]
