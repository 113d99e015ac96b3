"""`python -m bench run|report|publish|tune|sweep|sweep-report`: benchmark endpoints, report offline, publish to
CloudWatch, tune k, sweep load."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bench.arguments import finite_number, number_list, number_list_or_none, whole_number
from bench.results import (
    CaseRun,
    ResultsError,
    RunSettings,
    Stop,
    VariantInfo,
    error_reasons,
    folder_problem,
    load_results,
    save_results,
)
from config import ConfigError
from config.catalogue import MAX_NUM_SEQS
from config.endpoint import OVERRIDE_HEADER
from config.exit_codes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from bench.runner import Hardware
    from bench.sweep.analysis import Slo
    from config.schema import BenchConfig

LOSSLESS_REQUESTS = 8  # per test case and stop mode in --lossless: distinct prompts, batch size 1
STOPS: dict[str, list[Stop]] = {"fixed": ["fixed"], "natural": ["natural"], "both": ["fixed", "natural"]}
# Caps on the sweep's grid, so a typo cannot put hundreds of thousands of requests in flight against trn2.
MAX_CONCURRENCY = 4 * MAX_NUM_SEQS  # the default grid's top is 4x max_num_seqs
MAX_NUM_SEQS_WHY = f"the largest batch a profile compiles, config max_num_seqs <= {MAX_NUM_SEQS}"
MAX_RATE = 1000.0  # requests/s; the default grid derives rates from the baseline's measured throughput


def _config(path: str | None) -> object | None:
    """The deployment config, for the metrics namespace and each profile's k. None if it cannot be loaded."""
    from config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as err:
        if path:
            raise
        print(f"note: default config not loaded ({err}); continuing without it", file=sys.stderr)
        return None


def _k_by_profile(cfg: object | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in getattr(cfg, "profiles", []):
        k = getattr(p.decoding, "num_speculative_tokens", None)
        if k:
            out[p.name] = k
    return out


def _hardware(cfg: object | None) -> Hardware | None:
    """Devices each profile's service claims and the node price, for cost; None without a config."""
    from bench.runner import Hardware

    if cfg is None:
        return None
    return Hardware(
        devices_by_variant={p.name: cfg.profile_devices(p) for p in cfg.profiles},  # type: ignore[attr-defined]
        devices_per_node=cfg.trn2_nodes.instance.devices,  # type: ignore[attr-defined]
        hourly_price_usd=cfg.trn2_nodes.hourly_price_usd,  # type: ignore[attr-defined]
    )


def _config_baseline(cfg: object | None, endpoint_names: list[str]) -> str | None:
    """The config's baseline profile (its one owner), when an endpoint carries that profile's name."""
    name = cfg.baseline_profile.name if cfg is not None else None  # type: ignore[attr-defined]
    return name if name in endpoint_names else None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="benchmark endpoints under identical load")
    run.add_argument("--endpoint", action="append", required=True, metavar="NAME=URL", help="repeat per variant")
    run.add_argument(
        "--pick-arm",
        action="store_true",
        help=f"send `{OVERRIDE_HEADER}: NAME` with each variant's requests, so every --endpoint can be the one "
        "endpoint (docs/endpoint.md) and each NAME a profile",
    )
    run.add_argument("--suite", default="default", help="`default` or a YAML/JSON file of test cases")
    run.add_argument(
        "--lossless",
        action="store_true",
        help="the lossless check: each output against the baseline's at batch size 1 (defaults --concurrency 1 "
        f"--requests {LOSSLESS_REQUESTS} --warmup 0 --stop both); the comparison itself is in every run's output",
    )
    load = run.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=whole_number(1), help="closed loop: N requests in flight (default 4)")
    load.add_argument("--rate", type=finite_number(above=0), help="open loop: Poisson arrivals, requests per second")
    run.add_argument(
        "--requests",
        type=whole_number(1),
        default=None,
        help="measured requests per variant and test case (default 100: p99 is then the second-largest, not the "
        "maximum)",
    )
    run.add_argument(
        "--warmup",
        type=whole_number(0),
        default=None,
        help="discarded requests, sent at once before each measured run (default: --concurrency, else 8)",
    )
    run.add_argument(
        "--max-tokens",
        type=whole_number(1),
        default=600,
        help="output length (fixed stop: min_tokens = max_tokens; natural: a cap)",
    )
    run.add_argument(
        "--stop",
        choices=["fixed", "natural", "both"],
        default=None,
        help="fixed: exactly --max-tokens (ignore_eos; default); natural: to end-of-sequence; both: every case twice",
    )
    run.add_argument("--mode", choices=["interleaved", "simultaneous"], default="interleaved")
    run.add_argument("--api", choices=["chat", "completions"], default="chat")
    run.add_argument("--model", help="model name; default: the first one from GET /v1/models")
    run.add_argument("--seed", type=int, default=0, help="seed of the Poisson arrival schedule")
    run.add_argument("--request-timeout", type=finite_number(above=0), default=600.0, help="seconds per request (> 0)")
    run.add_argument(
        "--max-duration",
        type=finite_number(above=0),
        default=1800.0,
        help="no new request after this many s per run",
    )
    run.add_argument(
        "--no-continuous-usage",
        action="store_true",
        help="do not ask vLLM for per-chunk usage (then token counts per chunk come from token_ids or text share)",
    )
    run.add_argument("--out", default="bench-results.json", help="rewritten after every test case")
    keep = run.add_mutually_exclusive_group()
    keep.add_argument(
        "--resume", action="store_true", help="keep the cases already in --out and run only the missing ones"
    )
    keep.add_argument("--overwrite", action="store_true", help="replace an existing --out (else it is refused)")
    run.add_argument("--config", help="deployment config (default config/default.yaml): k per profile, namespace")
    run.add_argument(
        "--baseline", help="the endpoint speedups are against; default: the config's baseline profile, else the first"
    )
    run.add_argument("--cloudwatch", action="store_true", help="also publish the results to CloudWatch")
    run.add_argument("--upload", metavar="s3://BUCKET/KEY", help="also copy the results file to S3")

    rep = sub.add_parser("report", help="Markdown table and PNG plots from results files")
    rep.add_argument("results", nargs="+")
    rep.add_argument("--out", default="bench-report", help="output folder")
    rep.add_argument(
        "--config",
        help="a config whose trn2_nodes.hourly_price_usd prices the runs (default: the price each run recorded)",
    )

    tune = sub.add_parser("tune", help="predict the best k from a results file (Leviathan et al. 2023 model)")
    tune.add_argument("results", nargs="?", help="a results file (not with --propose)")
    tune.add_argument(
        "--propose",
        action="store_true",
        help="print config profiles for k in 1,2,3,5,7 that the stack accepts (swap one in at a time, `make ab`)",
    )
    tune.add_argument("--config", help="deployment config (default config/default.yaml): the k each profile ran")
    tune.add_argument(
        "--cost-ratio",
        type=finite_number(at_least=0),
        default=None,
        help="draft step cost / target step cost for the predictions; default: measured from step times, else 0.05",
    )

    tune.add_argument(
        "--check",
        action="store_true",
        help="a run of profiles that differ only in k: predicted vs measured speedup per k, with the error",
    )
    tune.add_argument(
        "--tolerance",
        type=finite_number(at_least=0),
        default=None,
        help="recommend the smallest k whose predicted speedup is within this fraction of the best (default 0.02)",
    )

    tune.add_argument(
        "--baseline-tpot",
        metavar="LOAD=MS,LOAD=MS",
        help="predict the crossover from RESULTS (acceptance at concurrency 1) and the baseline's p50 TPOT (ms) at "
        "two concurrencies, e.g. 1=45,4=52: is a sweep worth running?",
    )
    tune.add_argument("--max-num-seqs", type=whole_number(1), help="with --baseline-tpot: the grid's batch size")

    sw = sub.add_parser("sweep", help="load sweep: concurrency and Poisson rate grids, goodput, crossover, plots")
    sw.add_argument("--endpoint", action="append", required=True, metavar="NAME=URL", help="repeat per variant")
    sw.add_argument("--suite", default="default", help="`default` or a YAML/JSON file of test cases")
    sw.add_argument(
        "--cases",
        help="comma-separated test case names (default: the suite's first structured and first open-ended case)",
    )
    sw.add_argument(
        "--concurrency",
        type=number_list(int, at_most=MAX_CONCURRENCY, why=f"4x {MAX_NUM_SEQS_WHY}"),
        help="comma-separated concurrencies (default: 1, 2, 4 ... max_num_seqs, then 2x and 4x of it)",
    )
    sw.add_argument(
        "--rates",
        type=number_list_or_none(float, at_most=MAX_RATE, why="requests per second, far above one trn2 node"),
        help="comma-separated Poisson rates (requests/s), or `none` (default: fractions of the baseline's "
        "throughput at max_num_seqs, measured by the concurrency sweep)",
    )
    sw.add_argument(
        "--max-num-seqs",
        type=whole_number(1, MAX_NUM_SEQS, MAX_NUM_SEQS_WHY),
        help="the services' batch size (default: from the config)",
    )
    sw.add_argument(
        "--repeats", type=whole_number(1), help="runs per point (default: the config's bench.sweep.repeats)"
    )
    sw.add_argument(
        "--requests",
        type=whole_number(1),
        default=32,
        help="measured requests per case and point (at least 4x concurrency)",
    )
    sw.add_argument("--max-tokens", type=whole_number(1), default=256, help="fixed output length of every request")
    sw.add_argument("--mode", choices=["interleaved", "simultaneous"], default="interleaved")
    sw.add_argument("--api", choices=["chat", "completions"], default="chat")
    sw.add_argument("--model", help="model name; default: the first one from GET /v1/models")
    sw.add_argument("--seed", type=int, default=0)
    sw.add_argument("--request-timeout", type=finite_number(above=0), default=600.0, help="seconds per request (> 0)")
    sw.add_argument(
        "--max-duration", type=finite_number(above=0), default=900.0, help="no new request after this many s per run"
    )
    sw.add_argument(
        "--grid",
        choices=["adaptive", "full"],
        default="adaptive",
        help="adaptive (default): coarse pass, bisection to the crossover, repeats only where the verdict is in "
        "doubt (docs/sweep.md); full: every point --repeats times",
    )
    sw.add_argument(
        "--budget-minutes",
        type=finite_number(above=0),
        help="adaptive: start no run that would take the sweep past this many minutes; the report says what is "
        "left undecided",
    )
    sw.add_argument("--out", default="bench-sweep.json", help="the sweep file, rewritten after every point")
    sw.add_argument("--report-dir", help="where report.md, crossover.json, peer/ and plots go (default: --out's stem)")
    keep = sw.add_mutually_exclusive_group()
    keep.add_argument("--resume", action="store_true", help="keep the points already in --out, run the missing ones")
    keep.add_argument("--overwrite", action="store_true", help="replace an existing --out (else it is refused)")
    sw.add_argument("--no-plots", action="store_true", help="no PNG plots (where matplotlib is not installed)")
    sw.add_argument("--config", help="deployment config (default config/default.yaml): SLOs, floor, max_num_seqs")
    sw.add_argument("--baseline", help="the endpoint speedups are against (default: the config's baseline)")
    sw.add_argument("--cloudwatch", action="store_true", help="publish the crossovers and best goodput")
    sw.add_argument(
        "--upload",
        metavar="s3://BUCKET/PREFIX/",
        help="copy the sweep file and report there, and crossover.json also to the bucket's results/crossover.json",
    )

    swr = sub.add_parser("sweep-report", help="report.md, crossover.json, peer files and plots from a sweep file")
    swr.add_argument("sweep")
    swr.add_argument("--out", help="output folder (default: the sweep file's stem)")
    swr.add_argument("--config", help="deployment config (default config/default.yaml): SLOs and speedup floor")
    swr.add_argument("--cloudwatch", action="store_true", help="publish the crossovers and best goodput")
    swr.add_argument("--no-plots", action="store_true", help="no PNG plots (where matplotlib is not installed)")

    pub = sub.add_parser("publish", help="publish a results file to CloudWatch (raw values, high resolution)")
    pub.add_argument("results")
    pub.add_argument("--config", help="deployment config (default config/default.yaml)")
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """bench's command line, checked as far as it can be here: the parser's types, then what takes two flags
    together (argument_problem). A problem exits 2 with one usage line, before anything runs; ops.run_benchmark runs
    the same checks on BENCH_ARGS before it applies the Job."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if problem := argument_problem(args):
        parser.error(problem)
    return args


def argument_problem(args: argparse.Namespace) -> str | None:
    """--endpoint's form, --baseline among the --endpoint names and (with the default suite) --cases in it."""
    if args.command not in ("run", "sweep"):
        return None
    from bench.runner import parse_endpoint

    try:
        names = [parse_endpoint(e).name for e in args.endpoint]
    except ValueError as err:
        return str(err)
    if args.baseline is not None and args.baseline not in names:
        return (
            f"--baseline {args.baseline!r} is not one of the --endpoint names ({', '.join(names)}); name one of them "
            "or leave --baseline out"
        )
    if args.command == "sweep" and args.cases is not None and args.suite == "default":
        from bench.prompts import DEFAULT_SUITE

        try:
            _sweep_cases(list(DEFAULT_SUITE), args.cases)
        except ValueError as err:
            return str(err)
    return None


def _run(args: argparse.Namespace) -> int:
    from bench.cost import format_cost
    from bench.lossless import format_lossless
    from bench.prompts import SuiteError, load_suite
    from bench.runner import RunOptions, format_table, parse_endpoint, run_benchmark

    try:
        endpoints = [parse_endpoint(e) for e in args.endpoint]
        if args.pick_arm:
            endpoints = [replace(e, headers=((OVERRIDE_HEADER, e.name),)) for e in endpoints]
        cases = load_suite(args.suite)
    except (ValueError, SuiteError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    if args.upload and not args.upload.startswith("s3://"):
        print(f"error: --upload {args.upload!r} is not s3://BUCKET/KEY", file=sys.stderr)
        return EXIT_USAGE
    if args.requests is None:
        args.requests = LOSSLESS_REQUESTS if args.lossless else 100
    if args.lossless and args.rate is None and args.concurrency is None:
        args.concurrency = 1
    out = Path(args.out)
    if problem := out_problem(out, resume=args.resume, overwrite=args.overwrite):
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    concurrency = args.concurrency if args.rate is None else None
    if args.rate is None and concurrency is None:
        concurrency = 4
    settings = RunSettings(
        suite=args.suite,
        api=args.api,
        mode=args.mode,
        concurrency=concurrency,
        rate=args.rate,
        requests=args.requests,
        warmup=args.warmup if args.warmup is not None else (0 if args.lossless else concurrency or 8),
        max_tokens=args.max_tokens,
        seed=args.seed,
        continuous_usage=not args.no_continuous_usage,
        stops=STOPS[args.stop or ("both" if args.lossless else "fixed")],
    )
    cfg = _config(args.config)
    options = RunOptions(request_timeout_s=args.request_timeout, max_duration_s=args.max_duration, model=args.model)
    names = [e.name for e in endpoints]
    baseline = args.baseline or _config_baseline(cfg, names) or names[0]
    if baseline not in names:
        print(f"error: --baseline {baseline!r} is not one of the --endpoint names {names}", file=sys.stderr)
        return EXIT_USAGE
    previous = load_results(out) if args.resume and out.exists() else None
    if args.resume and previous is None:
        print(f"note: --resume: {out} does not exist yet; starting from the first case", file=sys.stderr)
    results = _run_to_file(
        run_benchmark(
            endpoints,
            cases,
            settings,
            options=options,
            k_by_variant=_k_by_profile(cfg),
            baseline=baseline,
            hardware=_hardware(cfg),
            resume=previous,
            on_case=lambda partial: save_results(partial, out),
        ),
        out,
        writes="the results",
        finished="test case",
    )
    if isinstance(results, int):
        return results
    save_results(results, out)
    print(format_table(results))
    print("\n" + format_cost(results))
    if len(results.variants) > 1:
        print("\n" + format_lossless(results))
    print(f"\nresults: {out}")
    failed = _variants_without_success(results.variants, results.runs)
    if args.upload:
        from config.exit_codes import CommandError

        try:
            print(f"uploaded: {upload(out, args.upload, getattr(cfg, 'region', None))}")
        except CommandError as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_FAILED
    if args.cloudwatch and (code := _publish(results, cfg)):
        return code
    return EXIT_FAILED if failed else EXIT_OK


def out_problem(out: Path, *, resume: bool, overwrite: bool) -> str | None:
    """Why --out must not be used as given, as a sentence: unwritable, not a regular file, or holding earlier results
    that neither --resume (continue them) nor --overwrite (replace them) was asked for: hours of trn2 are never
    replaced silently."""
    if problem := writable_problem(out):
        return f"--out {str(out)!r} {problem}; choose another path"
    if out.exists() and not (resume or overwrite):
        return (
            f"--out {str(out)!r} already exists and holds earlier results; add --resume to continue them, "
            "--overwrite to replace them, or choose another --out"
        )
    return None


def writable_problem(out: Path) -> str | None:
    """Why the results file cannot be written, found before any request is sent: a run writes it after every
    test case, and an unwritable path used to fail after the first one. Tries the temporary file save_results
    writes, so it holds for root and read-only mounts alike (os.access does not). A FIFO or device is refused
    without opening it (reading one for --resume would hang or never end)."""
    if out.is_dir():
        return "is a directory"
    if out.exists() and not out.is_file():
        return "is not a regular file (a device or pipe)"
    probe = out.with_name(f".{out.name}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        return f"cannot be written ({err.strerror})"
    return None


def _variants_without_success(variants: Sequence[VariantInfo], all_runs: Sequence[CaseRun]) -> list[str]:
    """Variants with no successful request in any case, each printed with why its requests failed."""
    failed = []
    for v in variants:
        runs = [r for r in all_runs if r.variant == v.name]
        if runs and not any(r.summary.ok for r in runs):
            failed.append(v.name)
            reasons = error_reasons([rec for r in runs for rec in r.records]) or ["no requests were sent"]
            print(
                f"error: variant {v.name!r} ({v.base_url}) had no successful request: " + "; ".join(reasons),
                file=sys.stderr,
            )
    return failed


def content_type(path: Path) -> str:
    return {".json": "application/json", ".png": "image/png", ".md": "text/markdown"}.get(path.suffix, "text/plain")


def upload(path: Path, url: str, region: str | None) -> str:
    """Copy a results file to s3://bucket/key, where the in-cluster Job keeps every run: one PutObject through a
    bounded client (cloud/aws.py), so a silent endpoint fails within aws.SILENT_BOUND_S, each attempt shown."""
    from cloud import aws

    bucket, _, key = url.removeprefix("s3://").partition("/")
    if not url.startswith("s3://") or not bucket or not key:
        raise ValueError(f"--upload {url!r} is not s3://BUCKET/KEY")
    try:
        owner = aws.bucket_owner(bucket, region, f"configure AWS credentials, then upload {path} again")
        aws.s3_client(region, owner).put_object(
            Bucket=bucket, Key=key, Body=path.read_bytes(), ContentType=content_type(path)
        )
    except aws.errors() as err:
        raise aws.failure(f"uploading {path} to {url}", err, f"upload {path} again (the results are there)") from None
    return url


def _publish(results: object, cfg: object | None) -> int:
    from bench.cloudwatch import publish

    if cfg is None:
        print("error: publishing needs the deployment config for the metrics namespace; pass --config", file=sys.stderr)
        return EXIT_USAGE
    from config.exit_codes import CommandError

    namespace = cfg.observability.metrics_namespace  # type: ignore[attr-defined]
    try:
        report = publish(results, namespace=namespace, region=cfg.region)  # type: ignore[arg-type, attr-defined]
    except (CommandError, ValueError) as err:
        print(f"error: CloudWatch publish to {namespace} failed: {err}", file=sys.stderr)
        return EXIT_FAILED
    print(f"CloudWatch {namespace}: {report.values} values in {report.datums} metric datums, {report.calls} call(s)")
    return EXIT_OK


def _tune(args: argparse.Namespace) -> int:
    from bench.tune import DEFAULT_TOLERANCE, fit_cases, format_tuning

    tolerance = DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
    if tolerance >= 1.0:
        print(f"error: --tolerance={tolerance} must be a fraction below 1, e.g. 0.02 for 2%", file=sys.stderr)
        return EXIT_USAGE
    if args.propose:
        import yaml

        from bench.tune import propose_profiles

        proposals, dropped = propose_profiles(_config(args.config))
        print("# each profile in place of the speculative one (or beside it, with the trn2 capacity for both)")
        print(yaml.safe_dump({"profiles": proposals}, sort_keys=False), end="")
        for reason in dropped:
            print(f"# not proposed: {reason}")
        return EXIT_OK
    if not args.results:
        print("error: tune needs a results file (or --propose)", file=sys.stderr)
        return EXIT_USAGE
    results = load_results(args.results)
    cfg = _config(args.config) if any(v.num_speculative_tokens is None for v in results.variants) else None
    if args.baseline_tpot:
        return _predict_crossover(args, results, cfg if cfg is not None else _config(args.config))
    if args.check:
        from bench.tune import check_k_sweep, format_check

        print(format_check(check_k_sweep(results, _k_by_profile(cfg), args.cost_ratio), tolerance))
        return EXIT_OK
    print(format_tuning(fit_cases(results, _k_by_profile(cfg), args.cost_ratio), tolerance))
    return EXIT_OK


def _predict_crossover(args: argparse.Namespace, results: object, cfg: object | None) -> int:
    from bench.sweep.run import concurrency_grid
    from bench.tune import format_predictions, predict_crossovers

    try:
        pairs = [x.partition("=") for x in args.baseline_tpot.split(",") if x.strip()]
        tpot = {float(load): float(ms) / 1000 for load, _, ms in pairs}
    except ValueError:
        tpot = {}
    if len(tpot) < 2 or min(tpot) <= 0 or min(tpot.values()) <= 0:
        print(
            f"error: --baseline-tpot {args.baseline_tpot!r} needs the baseline's p50 TPOT at two concurrencies as "
            "LOAD=MS pairs, e.g. 1=45,4=52",
            file=sys.stderr,
        )
        return EXIT_USAGE
    profiles = getattr(cfg, "profiles", [])
    mns = args.max_num_seqs or (max(p.max_num_seqs for p in profiles) if profiles else 4)
    floor = _sweep_policy(cfg)[0]
    grid = [float(c) for c in concurrency_grid(mns) if c <= mns]
    predictions = predict_crossovers(results, _k_by_profile(cfg), tpot, grid, floor, mns)  # type: ignore[arg-type]
    print(format_predictions(predictions, floor))
    return EXIT_OK


def _bench_config(cfg: object | None) -> BenchConfig:
    """The config's bench section (SLOs, sweep), else its defaults."""
    from config.schema import BenchConfig

    return getattr(cfg, "bench", None) or BenchConfig()


def _sweep_policy(cfg: object | None) -> tuple[float, Slo]:
    """(speedup floor, SLO) from the config's bench section, else its defaults."""
    from bench.sweep.analysis import Slo

    bench = _bench_config(cfg)
    return bench.sweep.speedup_floor, Slo(bench.slo.ttft_p99_ms / 1000, bench.slo.tpot_p99_ms / 1000)


def _sweep_cases(suite: list, names: str | None) -> list:
    if names:
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        known = {c.name: c for c in suite}
        if not wanted:
            raise ValueError(f"--cases {names!r} names no test case; use some of {', '.join(known)}")
        missing = [n for n in wanted if n not in known]
        if missing:
            raise ValueError(f"--cases {', '.join(missing)} not in the suite; use some of {', '.join(known)}")
        return [known[n] for n in wanted]
    firsts = {}
    for c in suite:
        firsts.setdefault(c.kind, c)
    return list(firsts.values())


def _sweep(args: argparse.Namespace) -> int:
    from bench.prompts import SuiteError, load_suite
    from bench.runner import RunOptions, parse_endpoint
    from bench.sweep.run import SweepSettings, concurrency_grid, load_sweep, run_sweep, save_sweep

    cfg = _config(args.config)
    try:
        endpoints = [parse_endpoint(e) for e in args.endpoint]
        cases = _sweep_cases(load_suite(args.suite), args.cases)
        names = [e.name for e in endpoints]
        profiles = [p for p in getattr(cfg, "profiles", []) if p.name in names]
        max_num_seqs = args.max_num_seqs or (max(p.max_num_seqs for p in profiles) if profiles else None)
        if args.concurrency:
            concurrencies = args.concurrency
        elif max_num_seqs:
            concurrencies = concurrency_grid(max_num_seqs)
        else:
            raise ValueError("no max_num_seqs: pass --concurrency 1,2,4,... or --max-num-seqs N, or a --config")
        rates = args.rates  # None: derived from the baseline's throughput after the concurrency grid
    except (ValueError, SuiteError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    if args.upload and not args.upload.startswith("s3://"):
        print(f"error: --upload {args.upload!r} is not s3://BUCKET/PREFIX/", file=sys.stderr)
        return EXIT_USAGE
    repeats = args.repeats if args.repeats is not None else _bench_config(cfg).sweep.repeats
    baseline = args.baseline or _config_baseline(cfg, names) or names[0]
    if baseline not in names:
        print(f"error: --baseline {baseline!r} is not one of the --endpoint names {names}", file=sys.stderr)
        return EXIT_USAGE
    settings = SweepSettings(
        run=RunSettings(
            suite=args.suite,
            api=args.api,
            mode=args.mode,
            concurrency=1,
            rate=None,
            requests=args.requests,
            warmup=0,
            max_tokens=args.max_tokens,
            seed=args.seed,
            continuous_usage=True,
            stops=["fixed"],
        ),
        concurrencies=concurrencies,
        rates=rates,
        repeats=repeats,
        requests_per_point=args.requests,
        max_num_seqs=max_num_seqs,
        grid=args.grid,
        budget_minutes=args.budget_minutes,
    )
    if args.budget_minutes is not None and args.grid == "full":
        print(
            f"error: --budget-minutes {args.budget_minutes:g} caps the adaptive sweep; --grid full runs every point "
            "(drop one of the two)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    out = Path(args.out)
    folder = Path(args.report_dir) if args.report_dir else out.with_suffix("")
    if problem := out_problem(out, resume=args.resume, overwrite=args.overwrite):
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if problem := folder_problem(folder):
        flag = "--report-dir" if args.report_dir else "the report folder (--out's stem; --report-dir)"
        print(f"error: {flag} {str(folder)!r} {problem}; choose another --report-dir", file=sys.stderr)
        return EXIT_USAGE
    previous = load_sweep(out) if args.resume and out.exists() else None
    options = RunOptions(request_timeout_s=args.request_timeout, max_duration_s=args.max_duration, model=args.model)
    common: dict[str, Any] = {
        "options": options,
        "k_by_variant": _k_by_profile(cfg),
        "baseline": baseline,
        "hardware": _hardware(cfg),
        "resume": previous,
        "on_point": lambda partial: save_sweep(partial, out),
    }
    if settings.grid == "adaptive":
        from bench.sweep.adaptive import run_adaptive_sweep

        work = run_adaptive_sweep(endpoints, cases, settings, _sweep_policy(cfg)[0], **common)
    else:
        work = run_sweep(endpoints, cases, settings, **common)
    sweep = _run_to_file(work, out, writes="the sweep", finished="point")
    if isinstance(sweep, int):
        return sweep
    save_sweep(sweep, out)
    variants = sweep.points[0].results.variants if sweep.points else []
    if failed := _variants_without_success(variants, [r for p in sweep.points for r in p.results.runs]):
        print(
            f"error: {', '.join(failed)} answered no request in the whole sweep, so it has no report, upload or "
            f"metrics (the runs are in {out}); fix the service and sweep again with --overwrite",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return _sweep_outputs(sweep, out, folder, cfg, args)


T = TypeVar("T")


def _run_to_file(work: Coroutine[Any, Any, T], out: Path, *, writes: str, finished: str) -> T | int:
    """Runs a run or a sweep that saves to `out` as it goes; a failure or Ctrl-C is a sentence and its exit code,
    the same for every command that measures (what finished stays in `out`, for --resume)."""
    try:
        return asyncio.run(work)
    except (ConnectionError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as err:
        print(f"error: cannot write {writes} to {str(out)!r} ({err.strerror}); choose another --out", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"\ninterrupted: every finished {finished} is in {out}; add --resume to continue", file=sys.stderr)
        return EXIT_INTERRUPTED


def _sweep_outputs(sweep: object, source: Path, folder: Path, cfg: object | None, args: argparse.Namespace) -> int:
    from bench.sweep.report import crossover_file, sweep_series, write_sweep_report

    floor, slo = _sweep_policy(cfg)
    paths = write_sweep_report(sweep, folder, floor, slo, plots=not args.no_plots)  # type: ignore[arg-type]
    for c in crossover_file(sweep, floor, slo).crossovers:  # type: ignore[arg-type]
        at = "none in the grid" if c.crossover is None else f"{c.crossover:g}"
        print(f"crossover {c.variant} {c.kind} ({c.load}): {at}" + (" (uncertain)" if c.uncertain else ""))
    print(f"sweep: {source}; report: {folder}/ ({len(paths)} files)")
    if getattr(args, "upload", None):
        from config.exit_codes import CommandError

        try:
            for url in upload_sweep(source, paths, args.upload, getattr(cfg, "region", None)):
                print(f"uploaded: {url}")
        except (CommandError, ValueError) as err:
            print(f"error: upload to {args.upload} failed ({err}); the files are in {folder}", file=sys.stderr)
            return EXIT_FAILED
    if args.cloudwatch:
        if cfg is None:
            print("error: publishing needs the deployment config for the namespace; pass --config", file=sys.stderr)
            return EXIT_USAGE
        from bench.cloudwatch import publish_series
        from config.exit_codes import CommandError

        namespace = cfg.observability.metrics_namespace  # type: ignore[attr-defined]
        try:
            report = publish_series(
                sweep_series(sweep, floor, slo),
                namespace=namespace,
                region=cfg.region,  # type: ignore[attr-defined]
                again=f"publish the sweep's metrics again with `python -m bench sweep-report {source} --cloudwatch`",
            )
        except (CommandError, ValueError) as err:
            print(f"error: CloudWatch publish to {namespace} failed: {err}", file=sys.stderr)
            return EXIT_FAILED
        print(f"CloudWatch {namespace}: {report.datums} sweep metric datums")
    return EXIT_OK


def upload_sweep(source: Path, paths: list[Path], prefix_url: str, region: str | None) -> list[str]:
    """The sweep file and every report file under s3://bucket/prefix/, and crossover.json also at the bucket's
    CROSSOVER_KEY, where the endpoint's spill threshold reads the latest one; each through upload()'s bounded
    client."""
    from config.bucket_layout import CROSSOVER_KEY

    bucket, _, prefix = prefix_url.removeprefix("s3://").partition("/")
    if not bucket:
        raise ValueError(f"--upload {prefix_url!r} names no bucket; write s3://BUCKET/PREFIX/")
    prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"
    root = paths[0].parent
    uploads = [(source, prefix + source.name)] + [(p, prefix + str(p.relative_to(root))) for p in paths]
    uploads += [(p, CROSSOVER_KEY) for p in paths if p.name == "crossover.json"]
    return [upload(path, f"s3://{bucket}/{key}", region) for path, key in uploads]


def _sweep_report(args: argparse.Namespace) -> int:
    from bench.sweep.run import load_sweep

    source = Path(args.sweep)
    sweep = load_sweep(source)
    folder = Path(args.out) if args.out else source.with_suffix("")
    if problem := folder_problem(folder):
        print(f"error: --out {str(folder)!r} {problem}; choose another --out folder", file=sys.stderr)
        return EXIT_USAGE
    cfg = _config(args.config)
    return _sweep_outputs(sweep, source, folder, cfg, args)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if problem := argument_problem(args):
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "report":
            from bench.report import write_report

            cfg = _config(args.config) if args.config else None
            price = cfg.trn2_nodes.hourly_price_usd if cfg is not None else None  # type: ignore[attr-defined]
            for path in write_report(args.results, args.out, price=price):
                print(path)
            return EXIT_OK
        if args.command == "tune":
            return _tune(args)
        if args.command == "sweep":
            return _sweep(args)
        if args.command == "sweep-report":
            return _sweep_report(args)
        return _publish(load_results(args.results), _config(args.config))
    except (ResultsError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
