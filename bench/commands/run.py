"""`bench run`: every endpoint under identical load, case by case, into a results file that survives Ctrl-C; then
the table, cost, lossless comparison, and optionally S3 and CloudWatch."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from bench.arguments import finite_number, whole_number
from bench.commands import deployment, measuring
from bench.commands.command import Command, run_to_file
from bench.commands.publish import publish_results
from bench.commands.upload import upload, url_problem
from bench.results import RunSettings, Stop, load_results, save_results
from config.endpoint import OVERRIDE_HEADER
from config.exit_codes import EXIT_FAILED, EXIT_OK, CommandError

LOSSLESS_REQUESTS = 8  # per test case and stop mode in --lossless: distinct prompts, batch size 1
STOPS: dict[str, list[Stop]] = {"fixed": ["fixed"], "natural": ["natural"], "both": ["fixed", "natural"]}


def add_arguments(run: argparse.ArgumentParser) -> None:
    measuring.add_endpoint_argument(run)
    run.add_argument(
        "--pick-arm",
        action="store_true",
        help=f"send `{OVERRIDE_HEADER}: NAME` with each variant's requests, so every --endpoint can be the one "
        "endpoint (docs/endpoint.md) and each NAME a profile",
    )
    measuring.add_suite_argument(run)
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
    measuring.add_request_arguments(run, seed_help="seed of the Poisson arrival schedule", max_duration_s=1800.0)
    measuring.add_price_argument(run)
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


def execute(args: argparse.Namespace) -> int:
    from bench.cost import format_cost
    from bench.lossless import format_lossless
    from bench.prompts import SuiteError, load_suite
    from bench.runner import format_table, parse_endpoint, run_benchmark

    try:
        endpoints = [parse_endpoint(e) for e in args.endpoint]
        if args.pick_arm:
            endpoints = [replace(e, headers=((OVERRIDE_HEADER, e.name),)) for e in endpoints]
        cases = load_suite(args.suite)
    except (ValueError, SuiteError) as err:
        raise CommandError(str(err)) from None
    if args.requests is None:
        args.requests = LOSSLESS_REQUESTS if args.lossless else 100
    if args.lossless and args.rate is None and args.concurrency is None:
        args.concurrency = 1
    out = Path(args.out)
    measuring.check_out(out, args)
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
    cfg = deployment.load(args.config)
    previous = load_results(out) if args.resume and out.exists() else None
    if args.resume and previous is None:
        print(f"note: --resume: {out} does not exist yet; starting from the first case", file=sys.stderr)
    results = run_to_file(
        run_benchmark(
            endpoints,
            cases,
            settings,
            options=measuring.run_options(args, cfg, endpoints),
            resume=previous,
            on_case=lambda partial: save_results(partial, out),
        ),
        out,
        writes="the results",
        finished="test case",
    )
    save_results(results, out)
    print(format_table(results))
    print("\n" + format_cost(results))
    if len(results.variants) > 1:
        print("\n" + format_lossless(results))
    print(f"\nresults: {out}")
    failed = measuring.variants_without_success(results.variants, results.runs)
    if args.upload:
        try:
            print(f"uploaded: {upload(out, args.upload, getattr(cfg, 'region', None))}")
        except CommandError as err:
            raise CommandError(str(err), EXIT_FAILED) from None
    if args.cloudwatch:
        publish_results(results, cfg)
    return EXIT_FAILED if failed else EXIT_OK


def problem(args: argparse.Namespace) -> str | None:
    """Every refusal the flags alone decide, run before the run here and by ops.run_benchmark on BENCH_ARGS before
    the Job is applied: the endpoints and --upload's form."""
    if found := measuring.endpoint_problem(args):
        return found
    return url_problem(args.upload) if args.upload else None


COMMAND = Command(
    "run",
    "benchmark endpoints under identical load",
    add_arguments,
    execute,
    problem,
)
