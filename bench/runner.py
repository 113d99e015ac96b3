"""Run every endpoint under identical load, test case by test case, with /metrics scraped around each run.

Why a runner and not N separate client runs: variants must see the same prompts, lengths, concurrency and
arrival schedule, close together in time (interleaved: one variant after the other per test case;
simultaneous: all at once), and the speculation counters must cover exactly one (variant, test case) window.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import aiohttp

from bench import table
from bench.client import Target, discover_model, make_session, run_load
from bench.prompts import TestCase, variations
from bench.results import BenchResults, CaseRun, RunSettings, Stop, VariantInfo, error_reasons, summarize
from bench.spec_metrics import acceptance, scrape
from config.live_metrics import LiveMetrics

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Endpoint:
    name: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()  # sent with every request of this variant


def parse_endpoint(text: str) -> Endpoint:
    """`name=http://host:port`; the name becomes the Variant dimension."""
    name, sep, url = text.partition("=")
    if not sep or not name or not url:
        raise ValueError(f"--endpoint {text!r} is not NAME=URL; write e.g. baseline=http://127.0.0.1:8000")
    if not _NAME.match(name):
        raise ValueError(f"--endpoint name {name!r} must be 1-64 letters, digits, '.', '_' or '-'; rename it")
    if not re.match(r"^https?://[^/\s]+", url):
        raise ValueError(f"--endpoint {name}: URL {url!r} must start with http:// or https://")
    return Endpoint(name=name, url=url.rstrip("/"))


@dataclass(frozen=True)
class Hardware:
    """What the config says each variant's service runs on, for cost: devices claimed per profile name, devices
    per node, and the node price (None: not set)."""

    devices_by_variant: dict[str, int]
    devices_per_node: int
    hourly_price_usd: float | None = None


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class RunOptions:
    """How a run is made and labelled beyond what its results record as settings: one object that `bench run`,
    each sweep point and both sweeps take alike (request limits, the model, each variant's k, the baseline, the
    hardware for cost, where progress lines go)."""

    request_timeout_s: float = 600.0
    max_duration_s: float | None = 1800.0
    model: str | None = None
    probe_timeout_s: float = 30.0  # GET /v1/models before any request, also with `model` given
    k_by_variant: Mapping[str, int] = field(default_factory=dict)
    # Each variant's stack's live metrics (its profile's), so acceptance reads that stack's counters or says why not.
    metrics_by_variant: Mapping[str, LiveMetrics] = field(default_factory=dict)
    baseline: str | None = None  # None: the first endpoint
    hardware: Hardware | None = None
    log: Callable[[str], None] = _to_stderr


async def run_benchmark(
    endpoints: Sequence[Endpoint],
    cases: Sequence[TestCase],
    settings: RunSettings,
    *,
    options: RunOptions = RunOptions(),
    resume: BenchResults | None = None,
    on_case: Callable[[BenchResults], None] = lambda _: None,
) -> BenchResults:
    """Every endpoint through every case. After each case, `on_case` gets the results so far (the CLI writes
    them to disk, so an interrupted suite keeps its finished cases). With `resume`, (variant, case) runs it
    already holds are kept and not run again; its settings and variants must match."""
    names = [e.name for e in endpoints]
    if not endpoints or len(set(names)) != len(names):
        raise ValueError(f"endpoints need unique names, got {names}")
    baseline = options.baseline or names[0]
    k_by_variant, hardware, log = options.k_by_variant, options.hardware, options.log
    if baseline not in names:
        raise ValueError(f"baseline {baseline!r} is not one of the endpoints {names}; pass --baseline NAME")
    limit = settings.concurrency or 0
    sessions = {e.name: make_session(limit=limit, headers=dict(e.headers)) for e in endpoints}
    try:
        targets: dict[str, Target] = {}
        for e in endpoints:
            model = await discover_model(sessions[e.name], e.url, options.probe_timeout_s, model=options.model)
            targets[e.name] = Target(base_url=e.url, model=model, api=settings.api)
            log(f"{e.name}: {e.url} serves {model}")
        variants = [
            VariantInfo(
                name=e.name,
                base_url=e.url,
                model=targets[e.name].model,
                num_speculative_tokens=k_by_variant.get(e.name),
                devices=hardware.devices_by_variant.get(e.name) if hardware else None,
                devices_per_node=hardware.devices_per_node
                if hardware and e.name in hardware.devices_by_variant
                else None,
            )
            for e in endpoints
        ]
        price = hardware.hourly_price_usd if hardware else None
        runs = _resumable_runs(resume, settings, variants, baseline)
        done_keys = {(r.variant, r.test_case, r.stop) for r in runs}
        for index, case in enumerate(cases):
            seed = settings.seed + index  # same arrivals and prompts for every variant (and stop) of this case
            for stop in settings.stops:
                todo = [e for e in endpoints if (e.name, case.name, stop) not in done_keys]
                label = case.name if stop == "fixed" else f"{case.name}, natural stop"
                if not todo:
                    log(f"[{label}] already in the results file; skipped")
                    continue

                def job(e: Endpoint, case: TestCase = case, seed: int = seed, stop: Stop = stop) -> Awaitable[CaseRun]:
                    return _case_run(sessions[e.name], e.name, targets[e.name], case, settings, options, seed, stop)

                if settings.mode == "simultaneous":
                    done = list(await asyncio.gather(*(job(e) for e in todo)))
                else:
                    done = [await job(e) for e in todo]
                for run in done:
                    s = run.summary
                    why = "; ".join(error_reasons(run.records))
                    log(
                        f"[{label}] {run.variant}: {s.ok}/{s.requests} ok in {run.duration_s:.1f} s"
                        + (f" ({why})" if why else "")
                    )
                runs += done
                on_case(_results(settings, variants, baseline, runs, price))
    finally:
        for s in sessions.values():
            await s.close()
    return _results(settings, variants, baseline, runs, price)


def _results(
    settings: RunSettings, variants: list[VariantInfo], baseline: str, runs: list[CaseRun], price: float | None
) -> BenchResults:
    return BenchResults(
        created_at=datetime.now(UTC),
        settings=settings,
        variants=variants,
        baseline_variant=baseline,
        node_hourly_price_usd=price,
        runs=runs,
    )


def _resumable_runs(
    resume: BenchResults | None, settings: RunSettings, variants: list[VariantInfo], baseline: str
) -> list[CaseRun]:
    if resume is None:
        return []
    if resume.baseline != baseline:
        raise ValueError(f"--resume: the results file's baseline is {resume.baseline!r}, not {baseline!r}")
    if resume.settings != settings:
        raise ValueError(
            f"--resume: the results file was run with {resume.settings.model_dump()}, not {settings.model_dump()}; "
            "pass the same options, or a new --out"
        )
    if resume.variants != variants:
        raise ValueError(
            f"--resume: the results file has variants {[v.model_dump() for v in resume.variants]}, this run "
            f"{[v.model_dump() for v in variants]}; pass the same --endpoint list, or a new --out"
        )
    return list(resume.runs)


async def _case_run(
    session: aiohttp.ClientSession,
    variant: str,
    target: Target,
    case: TestCase,
    settings: RunSettings,
    options: RunOptions,
    seed: int,
    stop: Stop = "fixed",
) -> CaseRun:
    common = {
        "max_tokens": settings.max_tokens,
        "request_timeout_s": options.request_timeout_s,
        "continuous_usage": settings.continuous_usage,
        "stop": stop,
        "session": session,
    }
    if settings.warmup:  # all at once, so every connection the measured run will use is open
        warm = variations(case, settings.warmup, seed=-1 - seed)
        await run_load(target, warm, requests=settings.warmup, concurrency=settings.warmup, **common)
    before, _ = await scrape(session, target.base_url)
    load = await run_load(
        target,
        variations(case, settings.requests, seed),
        requests=settings.requests,
        concurrency=settings.concurrency,
        rate=settings.rate,
        seed=seed,
        max_duration_s=options.max_duration_s,
        **common,
    )
    after, why = await scrape(session, target.base_url)
    spec = acceptance(before, after, metrics=options.metrics_by_variant.get(variant))
    if after is None:
        spec = spec.model_copy(update={"note": f"not exposed: {why}"})
    return CaseRun(
        variant=variant,
        test_case=case.name,
        kind=case.kind,
        stop=stop,
        started_at=load.started_at,
        duration_s=load.duration_s,
        records=load.records,
        summary=summarize(load.records, duration_s=load.duration_s, max_tokens=settings.max_tokens, stop=stop),
        spec_decode=spec,
    )


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1000:.1f}"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def summary_rows(results: BenchResults) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the summary table, shared by the console and the Markdown report."""
    header = [
        "test case", "kind", "stop", "variant", "ok/n", "TTFT p50/p90/p99 ms", "TPOT p50/p90/p99 ms",
        "ITL p50/p90/p99 ms", "E2E p50/p90/p99 s", "out tok/s", "accept", "x TPOT", "x E2E",
    ]  # fmt: skip
    speedups = {(s.variant, s.test_case, s.stop): s for s in results.speedups()}
    rows: list[list[str]] = []
    cases = list(dict.fromkeys(r.test_case for r in results.runs))
    for case in cases:  # a case's natural-stop runs right below its fixed-length ones
        for run in sorted((r for r in results.runs if r.test_case == case), key=lambda r: r.stop != "fixed"):
            s = run.summary
            sp = speedups.get((run.variant, case, run.stop))
            acc = run.spec_decode.acceptance_rate
            rows.append(
                [
                    case,
                    run.kind,
                    run.stop,
                    run.variant,
                    f"{s.ok}/{s.requests}",
                    f"{_ms(s.ttft_s.p50)}/{_ms(s.ttft_s.p90)}/{_ms(s.ttft_s.p99)}",
                    f"{_ms(s.tpot_s.p50)}/{_ms(s.tpot_s.p90)}/{_ms(s.tpot_s.p99)}",
                    f"{_ms(s.itl_s.p50)}/{_ms(s.itl_s.p90)}/{_ms(s.itl_s.p99)}",
                    f"{_s(s.e2e_s.p50)}/{_s(s.e2e_s.p90)}/{_s(s.e2e_s.p99)}",
                    f"{s.output_tok_s:.1f}",
                    "-" if acc is None else f"{acc:.2f}",
                    _x(sp.tpot) if sp else "-",
                    _x(sp.e2e) if sp else "-",
                ]
            )
    return header, rows


def format_table(results: BenchResults) -> str:
    header, rows = summary_rows(results)
    lines = table.text(header, rows)
    notes = sorted({f"{r.variant}: {r.spec_decode.note}" for r in results.runs if r.spec_decode.note})
    baseline = f"speedups are against `{results.baseline}` (p50 TPOT and p50 end-to-end latency)"
    return "\n".join([*lines, "", baseline, *notes])
