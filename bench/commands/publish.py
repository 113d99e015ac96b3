"""`bench publish`: a results file's raw values to CloudWatch (also `bench run --cloudwatch`)."""

from __future__ import annotations

import argparse

from bench.commands import deployment
from bench.commands.command import Command
from bench.results import load_results
from config.exit_codes import EXIT_FAILED, EXIT_OK, CommandError


def add_arguments(pub: argparse.ArgumentParser) -> None:
    pub.add_argument("results")
    pub.add_argument("--config", help="deployment config (default config/default.yaml)")


def publish_results(results: object, cfg: object | None) -> None:
    """The results' raw values to the config's metrics namespace, one line saying how many."""
    from bench.cloudwatch import publish

    namespace = metrics_namespace(cfg)
    try:
        report = publish(results, namespace=namespace, region=cfg.region)  # type: ignore[arg-type, attr-defined]
    except (CommandError, ValueError) as err:
        raise CommandError(f"CloudWatch publish to {namespace} failed: {err}", EXIT_FAILED) from None
    print(f"CloudWatch {namespace}: {report.values} values in {report.datums} metric datums, {report.calls} call(s)")


def metrics_namespace(cfg: object | None, what: str = "the metrics namespace") -> str:
    """The config's CloudWatch namespace; without a config, a sentence asking for one (`what` as each command
    has always named it)."""
    if cfg is None:
        raise CommandError(f"publishing needs the deployment config for {what}; pass --config")
    return cfg.observability.metrics_namespace  # type: ignore[attr-defined, no-any-return]


def execute(args: argparse.Namespace) -> int:
    publish_results(load_results(args.results), deployment.load(args.config))
    return EXIT_OK


COMMAND = Command(
    "publish", "publish a results file to CloudWatch (raw values, high resolution)", add_arguments, execute
)
