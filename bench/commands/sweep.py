"""`bench sweep`: every variant through a concurrency grid and a Poisson rate grid (adaptive by default), into a
sweep file that survives Ctrl-C; then its report, crossover.json, and optionally S3 and CloudWatch."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.arguments import finite_number, number_list, number_list_or_none, whole_number
from bench.commands import deployment, measuring
from bench.commands.command import Command, run_to_file
from bench.commands.sweep_report import sweep_outputs
from bench.commands.upload import prefix_problem
from bench.results import RunSettings, folder_problem
from config.catalogue import MAX_NUM_SEQS
from config.exit_codes import EXIT_FAILED, CommandError

# Caps on the sweep's grid, so a typo cannot put hundreds of thousands of requests in flight against trn2.
MAX_CONCURRENCY = 4 * MAX_NUM_SEQS  # the default grid's top is 4x max_num_seqs
MAX_NUM_SEQS_WHY = f"the largest batch a profile compiles, config max_num_seqs <= {MAX_NUM_SEQS}"
MAX_RATE = 1000.0  # requests/s; the default grid derives rates from the baseline's measured throughput


def add_arguments(sw: argparse.ArgumentParser) -> None:
    measuring.add_endpoint_argument(sw)
    measuring.add_suite_argument(sw)
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
    measuring.add_request_arguments(sw, seed_help=None, max_duration_s=900.0)
    measuring.add_price_argument(sw)
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
        help="adaptive: minutes of wall clock the sweep may spend measuring, whatever --mode; it starts no run that "
        "would pass them, and the report says what is left undecided",
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


def problem(args: argparse.Namespace) -> str | None:
    """Every refusal the flags alone decide, run before the sweep here and by ops.run_benchmark on BENCH_ARGS before
    the Job is applied: the endpoints, --upload's form, --budget-minutes with --grid full, and --cases in the default
    suite (a suite file is read only when the sweep runs)."""
    if found := measuring.endpoint_problem(args):
        return found
    if args.upload and (found := prefix_problem(args.upload)):
        return found
    if args.budget_minutes is not None and args.grid == "full":
        return (
            f"--budget-minutes {args.budget_minutes:g} caps the adaptive sweep; --grid full runs every point "
            "(drop one of the two)"
        )
    if args.cases is not None and args.suite == "default":
        from bench.prompts import DEFAULT_SUITE

        try:
            sweep_cases(list(DEFAULT_SUITE), args.cases)
        except ValueError as err:
            return str(err)
    return None


def sweep_cases(suite: list, names: str | None) -> list:
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


def execute(args: argparse.Namespace) -> int:
    from bench.prompts import SuiteError, load_suite
    from bench.runner import parse_endpoint
    from bench.sweep.run import SweepSettings, concurrency_grid, load_sweep, run_sweep, save_sweep

    cfg = deployment.load(args.config)
    try:
        endpoints = [parse_endpoint(e) for e in args.endpoint]
        cases = sweep_cases(load_suite(args.suite), args.cases)
        max_num_seqs = args.max_num_seqs or deployment.max_num_seqs(cfg, [e.name for e in endpoints])
        if args.concurrency:
            concurrencies = args.concurrency
        elif max_num_seqs:
            concurrencies = concurrency_grid(max_num_seqs)
        else:
            raise ValueError("no max_num_seqs: pass --concurrency 1,2,4,... or --max-num-seqs N, or a --config")
        rates = args.rates  # None: derived from the baseline's throughput after the concurrency grid
    except (ValueError, SuiteError) as err:
        raise CommandError(str(err)) from None
    repeats = args.repeats if args.repeats is not None else deployment.bench_config(cfg).sweep.repeats
    options = measuring.run_options(args, cfg, endpoints)
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
    out = Path(args.out)
    folder = Path(args.report_dir) if args.report_dir else out.with_suffix("")
    measuring.check_out(out, args)
    if problem := folder_problem(folder):
        flag = "--report-dir" if args.report_dir else "the report folder (--out's stem; --report-dir)"
        raise CommandError(f"{flag} {str(folder)!r} {problem}; choose another --report-dir")
    previous = load_sweep(out) if args.resume and out.exists() else None
    save = lambda partial: save_sweep(partial, out)  # noqa: E731  after every point, for --resume
    if settings.grid == "adaptive":
        from bench.sweep.adaptive import run_adaptive_sweep

        floor = deployment.sweep_policy(cfg)[0]
        work = run_adaptive_sweep(endpoints, cases, settings, floor, options=options, resume=previous, on_point=save)
    else:
        work = run_sweep(endpoints, cases, settings, options=options, resume=previous, on_point=save)
    sweep = run_to_file(work, out, writes="the sweep", finished="point")
    save_sweep(sweep, out)
    variants = sweep.points[0].results.variants if sweep.points else []
    if failed := measuring.variants_without_success(variants, [r for p in sweep.points for r in p.results.runs]):
        raise CommandError(
            f"{', '.join(failed)} answered no request in the whole sweep, so it has no report, upload or metrics (the "
            f"runs are in {out}); fix the service and sweep again with --overwrite",
            EXIT_FAILED,
        )
    return sweep_outputs(sweep, out, folder, cfg, args)


COMMAND = Command(
    "sweep",
    "load sweep: concurrency and Poisson rate grids, goodput, crossover, plots",
    add_arguments,
    execute,
    problem,
)
