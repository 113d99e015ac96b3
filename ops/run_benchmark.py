"""Render, or run against the deployed cluster, the side-by-side benchmark Job.

    python -m ops.run_benchmark --account ACCOUNT_ID [--config ...] [-- BENCH RUN ARGS]   # print the Job YAML
    python -m ops.run_benchmark --apply [--config ...] [-- BENCH RUN ARGS]                # what `make bench` runs
    python -m ops.run_benchmark --apply --lossless [--config ...]                         # `make bench-lossless`

With --apply: apply the Job, stream its log, wait, then download the results file from
s3://<bucket>/results/ into bench-results/ and write the Markdown report and plots next to it.
Arguments after `--` go to `python -m bench run` (e.g. `-- --requests 16 --concurrency 4`). --lossless runs the
lossless check instead (`bench run --lossless`: batch size 1, both stop modes, nothing published to CloudWatch);
its run id starts with `lossless-`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from charts.bench_job import render_bench_job
from config import load_config
from config.bucket_layout import results_key
from config.exit_codes import EXIT_FAILED, EXIT_OK
from model_build.errors import BuildError
from ops.capacity_block import too_late
from ops.kubectl import account_id, apply, aws_account, follow_job, run_or_print


def new_run_id(lossless: bool = False) -> str:
    return ("lossless-" if lossless else "") + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


def run_bench(config_path: str | None, extra_args: list[str], poll_s: float = 15.0, lossless: bool = False) -> int:
    from botocore.exceptions import BotoCoreError, ClientError  # lazily: rendering needs no AWS

    from model_build import aws_clients

    config = load_config(config_path)
    refusal = too_late(config, datetime.now(UTC), "the benchmark")
    if refusal:
        raise BuildError(refusal)
    account = aws_account(config)
    run_id = new_run_id(lossless)
    objects = render_bench_job(config, account, run_id, extra_args, lossless=lossless)
    job, ns = objects[0]["metadata"]["name"], config.namespace
    apply(ns, objects)
    if not follow_job(ns, job, poll_s=poll_s, waiting=lambda _: print(f"waiting for job/{job} to start")):
        print(f"job/{job} failed: kubectl -n {ns} logs job/{job}", file=sys.stderr)
        return EXIT_FAILED
    local = Path("bench-results") / f"{run_id}.json"
    local.parent.mkdir(exist_ok=True)
    bucket, key = config.models_bucket_name(account), results_key(run_id)
    try:
        aws_clients.client("s3", config.region).download_file(bucket, key, str(local))
    except (BotoCoreError, ClientError) as err:
        raise BuildError(
            f"job/{job} finished but s3://{bucket}/{key} could not be read ({err}); see kubectl -n {ns} logs job/{job}"
        ) from None
    report = [sys.executable, "-m", "bench", "report", str(local), "--out", str(local.with_suffix(""))]
    if subprocess.run(report).returncode != 0:
        raise BuildError(
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
    parser.add_argument(
        "--lossless", action="store_true", help="the lossless check (batch size 1) instead of the benchmark"
    )
    args = parser.parse_args(argv)
    lossless = args.lossless
    return run_or_print(
        args.apply,
        lambda: run_bench(args.config, extra, lossless=lossless),
        lambda: render_bench_job(
            load_config(args.config), args.account, new_run_id(lossless), extra, lossless=lossless
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
