"""`bench sweep-report`: a sweep file's report, crossover.json, peer files and plots again, offline; and the
outputs every finished `bench sweep` writes the same way (report, upload, CloudWatch)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.commands import deployment
from bench.commands.command import Command
from bench.commands.publish import metrics_namespace
from bench.commands.upload import upload_sweep
from bench.results import folder_problem
from config.exit_codes import EXIT_FAILED, EXIT_OK, CommandError


def add_arguments(swr: argparse.ArgumentParser) -> None:
    swr.add_argument("sweep")
    swr.add_argument("--out", help="output folder (default: the sweep file's stem)")
    swr.add_argument("--config", help="deployment config (default config/default.yaml): SLOs and speedup floor")
    swr.add_argument("--cloudwatch", action="store_true", help="publish the crossovers and best goodput")
    swr.add_argument("--no-plots", action="store_true", help="no PNG plots (where matplotlib is not installed)")


def execute(args: argparse.Namespace) -> int:
    from bench.sweep.run import load_sweep

    source = Path(args.sweep)
    sweep = load_sweep(source)
    folder = Path(args.out) if args.out else source.with_suffix("")
    if problem := folder_problem(folder):
        raise CommandError(f"--out {str(folder)!r} {problem}; choose another --out folder")
    cfg = deployment.load(args.config)
    return sweep_outputs(sweep, source, folder, cfg, args)


def sweep_outputs(sweep: object, source: Path, folder: Path, cfg: object | None, args: argparse.Namespace) -> int:
    from bench.sweep.report import crossover_file, sweep_series, write_sweep_report

    floor, slo = deployment.sweep_policy(cfg)
    paths = write_sweep_report(sweep, folder, floor, slo, plots=not args.no_plots)  # type: ignore[arg-type]
    for c in crossover_file(sweep, floor, slo).crossovers:  # type: ignore[arg-type]
        at = "none in the grid" if c.crossover is None else f"{c.crossover:g}"
        print(f"crossover {c.variant} {c.kind} ({c.load}): {at}" + (" (uncertain)" if c.uncertain else ""))
    print(f"sweep: {source}; report: {folder}/ ({len(paths)} files)")
    if getattr(args, "upload", None):
        try:
            for url in upload_sweep(source, paths, args.upload, getattr(cfg, "region", None)):
                print(f"uploaded: {url}")
        except (CommandError, ValueError) as err:
            raise CommandError(
                f"upload to {args.upload} failed ({err}); the files are in {folder}", EXIT_FAILED
            ) from None
    if args.cloudwatch:
        from bench.cloudwatch import publish_series

        namespace = metrics_namespace(cfg, "the namespace")
        try:
            report = publish_series(
                sweep_series(sweep, floor, slo),
                namespace=namespace,
                region=cfg.region,  # type: ignore[attr-defined]
                again=f"publish the sweep's metrics again with `python -m bench sweep-report {source} --cloudwatch`",
            )
        except (CommandError, ValueError) as err:
            raise CommandError(f"CloudWatch publish to {namespace} failed: {err}", EXIT_FAILED) from None
        print(f"CloudWatch {namespace}: {report.datums} sweep metric datums")
    return EXIT_OK


COMMAND = Command(
    "sweep-report",
    "report.md, crossover.json, peer files and plots from a sweep file",
    add_arguments,
    execute,
)
