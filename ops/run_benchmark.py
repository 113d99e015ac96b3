"""Render, or run against the deployed cluster, the side-by-side benchmark Job.

    python -m ops.run_benchmark --account ACCOUNT_ID [--config ...] [-- BENCH RUN ARGS]   # print the Job YAML
    python -m ops.run_benchmark --apply [--config ...] [-- BENCH RUN ARGS]                # what `make bench` runs
    python -m ops.run_benchmark --apply --lossless [--config ...]                         # `make bench-lossless`
    python -m ops.run_benchmark --apply --sweep [--config ...] [-- BENCH SWEEP ARGS]      # `make bench-sweep`

With --apply: apply the Job, stream its log, wait, then download the results file from
s3://<bucket>/results/ into bench-results/ and write the Markdown report and plots next to it.
Arguments after `--` go to `python -m bench run` (e.g. `-- --requests 16 --concurrency 4`). --lossless runs the
lossless check instead (`bench run --lossless`: batch size 1, both stop modes, nothing published to CloudWatch);
its run id starts with `lossless-`. --sweep runs the load sweep instead (`bench sweep`, docs/sweep.md): its run
id starts with `sweep-`, its files go to s3://<bucket>/results/<run id>/ (and crossover.json to
results/crossover.json), and the report with plots is drawn here from the downloaded sweep file.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from bench.__main__ import parse_args
from charts.jobs.bench import LOSSLESS, RUN, SWEEP, BenchMode, bench_run_argv, render_bench_job
from config import DeploymentConfig, load_config
from config.exit_codes import EXIT_FAILED, EXIT_OK, CommandError
from ops.artifact_check import published
from ops.capacity_block import too_late
from ops.kubectl import account_id, apply, aws_account, follow_job, run_or_print
from ops.out_of_service import give_back_left_pauses
from ops.price import PriceUnknown, node_price


def new_run_id(mode: BenchMode = RUN) -> str:
    return mode.run_id_prefix + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


def bench_args_problem(config: DeploymentConfig, extra_args: list[str], *, mode: BenchMode) -> str | None:
    """Why the Job's `bench run` would refuse its arguments, found here with bench's own parser before the Job is
    applied (`--requests abc` used to fail in the pod); also refuses BENCH_ARGS that change what the Job owns."""
    fixed = bench_run_argv(config, "bucket", "run", [], mode=mode)
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            parsed = parse_args(bench_run_argv(config, "bucket", "run", extra_args, mode=mode))
            owned = parse_args(fixed)
    except SystemExit:
        reason = re.sub(r"^python -m bench( [\w-]+)?: error: ", "", errors.getvalue().strip().splitlines()[-1])
        return f"BENCH_ARGS {shlex.join(extra_args)!r}: {reason}; see python -m bench {mode.command} --help"
    changed = [f for f, dest in JOB_OWNED_FLAGS.items() if getattr(parsed, dest, None) != getattr(owned, dest, None)]
    if changed:
        return (
            f"BENCH_ARGS {shlex.join(extra_args)!r} sets {', '.join(changed)}, which the Job sets itself (endpoints "
            "from the config, results to the bucket); leave them out"
        )
    return None


# bench run flags the Job's own command line sets, by argparse destination.
JOB_OWNED_FLAGS = {
    "--endpoint": "endpoint",
    "--config": "config",
    "--out": "out",
    "--upload": "upload",
    "--cloudwatch": "cloudwatch",
    "--lossless": "lossless",
    "--resume": "resume",
    "--overwrite": "overwrite",
    "--report-dir": "report_dir",
    "--no-plots": "no_plots",
}


def price_args(config: DeploymentConfig, extra_args: list[str], mode: BenchMode = RUN) -> list[str]:
    """`--node-hourly-price-usd` with the node's price from AWS (ops/price.py) when neither the config nor BENCH_ARGS
    sets one, so every report shows cost per token; none when AWS gives no single price (said, not fatal). BENCH_ARGS
    are read by bench's own parser (bench_args_problem has refused what it would not take), so an abbreviation
    argparse accepts (`--node-hourly 5`) counts as set."""
    given = parse_args(bench_run_argv(config, "bucket", "run", extra_args, mode=mode))
    if config.trn2_nodes.hourly_price_usd is not None or getattr(given, "node_hourly_price_usd", None) is not None:
        return []
    try:
        price = node_price(config, sys.stderr)
    except PriceUnknown as err:
        print(f"no node price for cost per token: {err}; set trn2_nodes.hourly_price_usd", file=sys.stderr)
        return []
    print(f"node price ${price.usd_per_hour:,.2f} per hour ({price.source}): reports price tokens with it")
    return ["--node-hourly-price-usd", repr(price.usd_per_hour)]


def run_bench(config_path: str | None, extra_args: list[str], poll_s: float = 15.0, mode: BenchMode = RUN) -> int:
    from cloud import aws

    config = load_config(config_path)
    if problem := bench_args_problem(config, extra_args, mode=mode):
        raise CommandError(problem)
    refusal = too_late(config, datetime.now(UTC), "the benchmark")
    if refusal:
        raise CommandError(refusal)
    account = aws_account(config)
    give_back_left_pauses(config, published(config, config.models_bucket_name(account)))
    run_id = new_run_id(mode)
    objects = render_bench_job(config, account, run_id, [*extra_args, *price_args(config, extra_args, mode)], mode=mode)
    job, ns = objects[0]["metadata"]["name"], config.namespace
    apply(ns, objects)
    if not follow_job(ns, job, poll_s=poll_s, waiting=lambda _: print(f"waiting for job/{job} to start")):
        print(f"job/{job} failed: kubectl -n {ns} logs job/{job}", file=sys.stderr)
        return EXIT_FAILED
    local = Path("bench-results") / f"{run_id}.json"
    local.parent.mkdir(exist_ok=True)
    bucket = config.models_bucket_name(account)
    key = mode.results_key(run_id)
    try:
        aws.s3_client(config.region, account).download_file(bucket, key, str(local))
    except aws.errors() as err:
        raise aws.failure(
            f"job/{job} finished but reading s3://{bucket}/{key}", err, f"see kubectl -n {ns} logs job/{job}"
        ) from None
    command = [mode.report, str(local)]
    if mode.report_reads_config and config_path:  # the SLOs and the speedup floor come from the config the Job read
        command += ["--config", config_path]
    report = [sys.executable, "-m", "bench", *command, "--out", str(local.with_suffix(""))]
    if subprocess.run(report).returncode != 0:
        raise CommandError(
            f"the results are in {local}, but their report failed (above); run it again: {' '.join(report)}"
        )
    print(f"results: {local}; report: {local.with_suffix('')}/")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    parser = argparse.ArgumentParser(prog="python -m ops.run_benchmark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=None)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--account", type=account_id, help="print the Job YAML for the bucket of this AWS account id")
    mode.add_argument("--apply", action="store_true", help="run the benchmark on the cluster and wait for it")
    kind = parser.add_mutually_exclusive_group()
    parser.set_defaults(mode=RUN)
    kind.add_argument(
        "--lossless",
        dest="mode",
        action="store_const",
        const=LOSSLESS,
        help="the lossless check (batch size 1) instead",
    )
    kind.add_argument(
        "--sweep", dest="mode", action="store_const", const=SWEEP, help="the load sweep (bench sweep) instead"
    )
    args = parser.parse_args(argv)
    return run_or_print(
        args.apply,
        lambda: run_bench(args.config, extra, mode=args.mode),
        lambda: render_checked(args.config, args.account, extra, mode=args.mode),
        resume="a benchmark Job already started goes on in the cluster (its results land in the bucket's results/); "
        "running the same command again starts a new run",
    )


def render_checked(config_path: str | None, account: str, extra_args: list[str], *, mode: BenchMode) -> list[dict]:
    config = load_config(config_path)
    if problem := bench_args_problem(config, extra_args, mode=mode):
        raise CommandError(problem)
    return render_bench_job(config, account, new_run_id(mode), extra_args, mode=mode)


if __name__ == "__main__":
    sys.exit(main())
