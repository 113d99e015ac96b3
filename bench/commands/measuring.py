"""What `bench run` and `bench sweep` share: the flags that say what to measure and how, their checks before any
request is sent (endpoints, baseline, --out), the RunOptions both hand to the runner, and the verdict on variants
that never answered."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bench.arguments import finite_number
from bench.commands import deployment
from bench.results import CaseRun, VariantInfo, error_reasons
from config.exit_codes import CommandError

if TYPE_CHECKING:  # the runner (aiohttp) is imported when a command measures, not to parse its flags
    from bench.runner import Endpoint, RunOptions


def add_endpoint_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--endpoint", action="append", required=True, metavar="NAME=URL", help="repeat per variant")


def add_suite_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", default="default", help="`default` or a YAML/JSON file of test cases")


def add_request_arguments(p: argparse.ArgumentParser, *, seed_help: str | None, max_duration_s: float) -> None:
    """--mode, --api, --model, --seed, --request-timeout, --max-duration: how each request is sent and bounded."""
    p.add_argument("--mode", choices=["interleaved", "simultaneous"], default="interleaved")
    p.add_argument("--api", choices=["chat", "completions"], default="chat")
    p.add_argument("--model", help="model name; default: the first one from GET /v1/models")
    p.add_argument("--seed", type=int, default=0, help=seed_help)
    p.add_argument("--request-timeout", type=finite_number(above=0), default=600.0, help="seconds per request (> 0)")
    p.add_argument(
        "--max-duration",
        type=finite_number(above=0),
        default=max_duration_s,
        help="no new request after this many s per run",
    )


def add_price_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--node-hourly-price-usd",
        type=finite_number(above=0),
        metavar="USD",
        help="the trn2 node's hourly price for cost per token when the config's trn2_nodes.hourly_price_usd is unset "
        "(make bench passes the one it read from AWS); the config's value wins",
    )


def endpoint_problem(args: argparse.Namespace) -> str | None:
    """--endpoint's form, a name given twice, and --baseline among the --endpoint names."""
    from bench.runner import parse_endpoint

    try:
        names = [parse_endpoint(e).name for e in args.endpoint]
    except ValueError as err:
        return str(err)
    if twice := sorted({n for n in names if names.count(n) > 1}):
        return f"--endpoint name {', '.join(map(repr, twice))} is given more than once; give each variant its own NAME"
    if args.baseline is not None and args.baseline not in names:
        return (
            f"--baseline {args.baseline!r} is not one of the --endpoint names ({', '.join(names)}); name one of them "
            "or leave --baseline out"
        )
    return None


def run_options(args: argparse.Namespace, cfg: object | None, endpoints: Sequence[Endpoint]) -> RunOptions:
    """The flags' request limits and model, and from the config each profile's k and hardware; the baseline is
    --baseline (endpoint_problem checked it), else the config's baseline profile when an endpoint has its name,
    else the first endpoint."""
    from bench.runner import RunOptions

    names = [e.name for e in endpoints]
    return RunOptions(
        request_timeout_s=args.request_timeout,
        max_duration_s=args.max_duration,
        model=args.model,
        k_by_variant=deployment.k_by_profile(cfg),
        metrics_by_variant=deployment.live_metrics_by_profile(cfg),
        baseline=args.baseline or deployment.config_baseline(cfg, names) or names[0],
        hardware=deployment.hardware(cfg, args.node_hourly_price_usd),
    )


def check_out(out: Path, args: argparse.Namespace) -> None:
    """Refuses --out as given, with a sentence: unwritable, not a regular file, or holding earlier results that
    neither --resume (continue them) nor --overwrite (replace them) was asked for: hours of trn2 are never replaced
    silently."""
    if problem := writable_problem(out):
        raise CommandError(f"--out {str(out)!r} {problem}; choose another path")
    if out.exists() and not (args.resume or args.overwrite):
        raise CommandError(
            f"--out {str(out)!r} already exists and holds earlier results; add --resume to continue them, "
            "--overwrite to replace them, or choose another --out"
        )


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


def variants_without_success(variants: Sequence[VariantInfo], all_runs: Sequence[CaseRun]) -> list[str]:
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
