"""`python -m bench run|report|publish`: benchmark endpoints, report offline, publish to CloudWatch."""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from bench.results import (
    BenchResults,
    ResultsError,
    RunSettings,
    Stop,
    error_reasons,
    load_results,
    save_results,
)
from config import ConfigError
from config.endpoint import OVERRIDE_HEADER
from config.exit_codes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from bench.runner import Hardware

LOSSLESS_REQUESTS = 8  # per test case and stop mode in --lossless: distinct prompts, batch size 1
STOPS: dict[str, list[Stop]] = {"fixed": ["fixed"], "natural": ["natural"], "both": ["fixed", "natural"]}


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
    load.add_argument("--concurrency", type=int, help="closed loop: N requests in flight (default 4)")
    load.add_argument("--rate", type=float, help="open loop: Poisson arrivals, requests per second")
    run.add_argument(
        "--requests",
        type=int,
        default=None,
        help="measured requests per variant and test case (default 100: p99 is then the second-largest, not the "
        "maximum)",
    )
    run.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="discarded requests, sent at once before each measured run (default: --concurrency, else 8)",
    )
    run.add_argument(
        "--max-tokens",
        type=int,
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
    run.add_argument("--request-timeout", type=float, default=600.0, help="seconds per request")
    run.add_argument("--max-duration", type=float, default=1800.0, help="no new request after this many s per run")
    run.add_argument(
        "--no-continuous-usage",
        action="store_true",
        help="do not ask vLLM for per-chunk usage (then token counts per chunk come from token_ids or text share)",
    )
    run.add_argument("--out", default="bench-results.json", help="rewritten after every test case")
    run.add_argument(
        "--resume", action="store_true", help="keep the cases already in --out and run only the missing ones"
    )
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
    tune.add_argument("results")
    tune.add_argument("--config", help="deployment config (default config/default.yaml): the k each profile ran")
    tune.add_argument(
        "--cost-ratio",
        type=float,
        default=None,
        help="draft step cost / target step cost for the predictions; default: measured from step times, else 0.05",
    )

    pub = sub.add_parser("publish", help="publish a results file to CloudWatch (raw values, high resolution)")
    pub.add_argument("results")
    pub.add_argument("--config", help="deployment config (default config/default.yaml)")
    return p


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
    for flag, value in (("--requests", args.requests), ("--max-tokens", args.max_tokens)):
        if value < 1:
            print(f"error: {flag}={value} must be >= 1", file=sys.stderr)
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
    out = Path(args.out)
    previous = load_results(out) if args.resume and out.exists() else None
    if args.resume and previous is None:
        print(f"note: --resume: {out} does not exist yet; starting from the first case", file=sys.stderr)
    try:
        results = asyncio.run(
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
            )
        )
    except (ConnectionError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"\ninterrupted: every finished test case is in {out}; add --resume to continue", file=sys.stderr)
        return EXIT_INTERRUPTED
    save_results(results, out)
    print(format_table(results))
    print("\n" + format_cost(results))
    if len(results.variants) > 1:
        print("\n" + format_lossless(results))
    print(f"\nresults: {out}")
    failed = _variants_without_success(results)
    if args.upload:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            print(f"uploaded: {upload(out, args.upload, getattr(cfg, 'region', None))}")
        except (BotoCoreError, ClientError) as err:
            print(f"error: upload to {args.upload} failed ({err}); the results are in {out}", file=sys.stderr)
            return EXIT_FAILED
    if args.cloudwatch and (code := _publish(results, cfg)):
        return code
    return EXIT_FAILED if failed else EXIT_OK


def _variants_without_success(results: BenchResults) -> list[str]:
    """Variants with no successful request in any case, each printed with why its requests failed."""
    failed = []
    for v in results.variants:
        runs = [r for r in results.runs if r.variant == v.name]
        if runs and not any(r.summary.ok for r in runs):
            failed.append(v.name)
            reasons = error_reasons([rec for r in runs for rec in r.records]) or ["no requests were sent"]
            print(
                f"error: variant {v.name!r} ({v.base_url}) had no successful request: " + "; ".join(reasons),
                file=sys.stderr,
            )
    return failed


def upload(path: Path, url: str, region: str | None) -> str:
    """Copy a results file to s3://bucket/key, where the in-cluster Job keeps every run."""
    bucket, _, key = url.removeprefix("s3://").partition("/")
    if not url.startswith("s3://") or not bucket or not key:
        raise ValueError(f"--upload {url!r} is not s3://BUCKET/KEY")
    import boto3

    boto3.client("s3", region_name=region).upload_file(
        str(path), bucket, key, ExtraArgs={"ContentType": "application/json"}
    )
    return url


def _publish(results: object, cfg: object | None) -> int:
    from bench.cloudwatch import publish

    if cfg is None:
        print("error: publishing needs the deployment config for the metrics namespace; pass --config", file=sys.stderr)
        return EXIT_USAGE
    from botocore.exceptions import BotoCoreError, ClientError

    namespace = cfg.observability.metrics_namespace  # type: ignore[attr-defined]
    try:
        report = publish(results, namespace=namespace, region=cfg.region)  # type: ignore[arg-type, attr-defined]
    except (BotoCoreError, ClientError, ValueError) as err:
        print(f"error: CloudWatch publish to {namespace} failed: {err}", file=sys.stderr)
        return EXIT_FAILED
    print(f"CloudWatch {namespace}: {report.values} values in {report.datums} metric datums, {report.calls} call(s)")
    return EXIT_OK


def _tune(args: argparse.Namespace) -> int:
    from bench.tune import fit_cases, format_tuning

    results = load_results(args.results)
    cfg = _config(args.config) if any(v.num_speculative_tokens is None for v in results.variants) else None
    print(format_tuning(fit_cases(results, _k_by_profile(cfg), args.cost_ratio)))
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
        return _publish(load_results(args.results), _config(args.config))
    except (ResultsError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
