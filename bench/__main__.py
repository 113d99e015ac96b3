"""`python -m bench run|report|publish|tune|sweep|sweep-report`: benchmark endpoints, report offline, publish to
CloudWatch, tune k, sweep load."""

from __future__ import annotations

import argparse
import sys

from bench.commands import publish, report, run, sweep, sweep_report, tune
from bench.commands.command import Command, execute_and_report

COMMANDS: tuple[Command, ...] = (
    run.COMMAND,
    report.COMMAND,
    tune.COMMAND,
    sweep.COMMAND,
    sweep_report.COMMAND,
    publish.COMMAND,
)  # in the order --help lists them


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_arguments(sub.add_parser(command.name, help=command.help))
    return p


def _command(args: argparse.Namespace) -> Command:
    return next(c for c in COMMANDS if c.name == args.command)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """bench's command line, checked as far as it can be here: the parser's types, then what takes two flags
    together (each command's problem()). A problem exits 2 with one usage line, before anything runs;
    ops.run_benchmark runs the same checks on BENCH_ARGS before it applies the Job."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if problem := _command(args).problem(args):
        parser.error(problem)
    return args


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return execute_and_report(_command(args), args)


if __name__ == "__main__":
    sys.exit(main())
