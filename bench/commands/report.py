"""`bench report`: the Markdown table and PNG plots of results files, offline."""

from __future__ import annotations

import argparse

from bench.commands import deployment
from bench.commands.command import Command
from config.exit_codes import EXIT_OK


def add_arguments(rep: argparse.ArgumentParser) -> None:
    rep.add_argument("results", nargs="+")
    rep.add_argument("--out", default="bench-report", help="output folder")
    rep.add_argument(
        "--config",
        help="a config whose trn2_nodes.hourly_price_usd prices the runs (default: the price each run recorded)",
    )


def execute(args: argparse.Namespace) -> int:
    from bench.report import write_report

    cfg = deployment.load(args.config) if args.config else None
    price = cfg.trn2_nodes.hourly_price_usd if cfg is not None else None  # type: ignore[attr-defined]
    for path in write_report(args.results, args.out, price=price):
        print(path)
    return EXIT_OK


COMMAND = Command("report", "Markdown table and PNG plots from results files", add_arguments, execute)
