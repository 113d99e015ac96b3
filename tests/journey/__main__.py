"""`make journey [CONFIG=...]`: the README's flow, from `make synth` to the teardown sweep's dry run, offline, against a
local world (moto, a loopback Hugging Face, a fake cluster that runs the rendered Jobs and pods with the shipped code,
vLLM stand-ins, the pinned Envoy). One line per step saying what it checked; a failing step names what broke and the
fix. Exit 0 only when every step passed (a step marked TODO is not built yet: the run is not complete, exit 1).

    .venv/bin/python -m tests.journey [--config config/default.yaml ...] [--out journey-results] [--keep-world]

Outputs per config, in <out>/<config name>/: the config copy the journey ran, bench-results/ (the benchmark and the
sweep with their reports and plots), crossover.json, endpoint-bench.json, coldstart/ (table and timeline PNG),
logs/ (every command's output) and summary.md. The world itself (synth output, pods' folders and logs) is in a
temporary folder, removed at the end unless --keep-world.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tests.journey.steps import Journey, Result
from tests.journey.world import World

TARGET_S = 300.0  # per config, on 2 cores (issue 35)


def run_one(config: Path, out: Path, keep: bool) -> tuple[list[Result], float]:
    world = Path(tempfile.mkdtemp(prefix=f"journey-{config.stem}-"))
    started = time.monotonic()
    print(f"journey: {config} (outputs in {out}, world in {world})", flush=True)
    journey = Journey(config, out, world)
    try:
        results = journey.run(lambda r: print("  " + r.line(), flush=True))
    finally:
        if not keep:
            World.remove_folder(world)
    seconds = time.monotonic() - started
    failed = [r for r in results if r.status in ("FAIL", "TODO")]
    summary = [f"# journey: {config}", "", *(f"- {r.line()}" for r in results), "", _verdict(results, seconds)]
    (out / "summary.md").write_text("\n".join(summary) + "\n")
    print(f"journey: {config}: {_verdict(results, seconds)}", flush=True)
    return failed, seconds


def _verdict(results: list[Result], seconds: float) -> str:
    counts = {s: sum(r.status == s for r in results) for s in ("ok", "FAIL", "TODO", "not run")}
    over = f" (over the {TARGET_S:g} s target)" if seconds > TARGET_S else ""
    return (
        f"{counts['ok']} ok, {counts['FAIL']} failed, {counts['not run']} not run, {counts['TODO']} TODO in "
        f"{seconds:.0f} s{over}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.journey", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", action="append", type=Path, help="a config file; repeat for several")
    parser.add_argument("--out", type=Path, default=Path("journey-results"), help="where the outputs go")
    parser.add_argument("--keep-world", action="store_true", help="keep the world's folder (pods' logs, synth)")
    args = parser.parse_args(argv)
    configs = args.config or [Path("config/default.yaml")]
    started = time.monotonic()
    failed = 0
    for config in configs:
        bad, _ = run_one(config, args.out.resolve() / config.stem, args.keep_world)
        failed += len(bad)
    if len(configs) > 1:
        print(f"journey: {len(configs)} configs in {time.monotonic() - started:.0f} s, {failed} steps failed or TODO")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
