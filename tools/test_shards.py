"""Run the whole test suite as three concurrent pytest shards, then the timing-marked tests on their own.

Why: most of the suite's wall time is waiting (loopback servers, moto, subprocesses, silent endpoints), not
CPU, so on a 2-core machine three shards finish in about two thirds of one process's time. Tests whose
assertions depend on wall-clock timing (`@pytest.mark.timing`) run afterwards, alone, so the shards' load
cannot skew them. Each shard's output is printed whole when it ends (never interleaved), and the last line
adds up every shard: `N passed, N failed`.

    python -m tools.test_shards [extra pytest args]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN_SHARDS = ("tests/bench", "tests/ops tests/model_build")  # wait-heavy: loopback servers, moto, subprocesses
SHARED_SYNTH_DIR = "TRN_SPECDEC_SHARED_SYNTH_DIR"  # tests/conftest.py: where the shards share one synth
COUNTED = ("passed", "failed", "errors", "skipped", "deselected")


@dataclass
class Shard:
    name: str
    args: list[str]


def shards(extra: list[str]) -> tuple[list[Shard], Shard]:
    """The concurrent shards (together: every test not marked timing) and the timing phase."""
    own = [Shard(paths, [*paths.split(), "-m", "not timing"]) for paths in OWN_SHARDS]
    ignores = [f"--ignore={p}" for paths in OWN_SHARDS for p in paths.split()]
    rest = Shard("tests (the rest)", ["tests", *ignores, "-m", "not timing"])
    timing = Shard("timing-marked tests, alone", ["tests", "-m", "timing"])
    return [Shard(s.name, [*s.args, *extra]) for s in (rest, *own)], Shard(timing.name, [*timing.args, *extra])


def counts(output: str) -> dict[str, int]:
    """Counts from pytest's closing line, e.g. '3 failed, 400 passed, 2 deselected in 40.1s'."""
    lines = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed|error|deselected)", line)]
    found = {key: 0 for key in COUNTED}
    for number, word in re.findall(r"(\d+) (passed|failed|errors?|skipped|deselected)", lines[-1] if lines else ""):
        found["errors" if word.startswith("error") else word] += int(number)
    return found


def run_concurrently(group: list[Shard]) -> list[tuple[Shard, int, str]]:
    """Each shard in its own pytest process; the default config's cloud assembly is synthesized once for all of
    them (tests/conftest.py reads SHARED_SYNTH_DIR)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, SHARED_SYNTH_DIR: str(Path(tmp) / "cdk.out")}
        started = []
        for i, shard in enumerate(group):
            log = Path(tmp) / f"{i}.log"
            with log.open("w") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "pytest", *shard.args],
                    cwd=ROOT,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            started.append((shard, proc, log))
        results = []
        for shard, proc, log in started:
            code = proc.wait()
            text = log.read_text(errors="replace")
            print(f"===== {shard.name} (exit {code}) =====\n{text}", flush=True)
            results.append((shard, code, text))
        return results


def main(argv: list[str] | None = None) -> int:
    extra = list(sys.argv[1:] if argv is None else argv)
    concurrent, timing = shards(extra)
    results = run_concurrently(concurrent)
    results += run_concurrently([timing])
    total = {key: 0 for key in COUNTED}
    failed_shards = []
    for shard, code, text in results:
        for key, value in counts(text).items():
            total[key] += value
        # 5: no test collected. A shard that collects nothing means a path or marker went wrong.
        if code != 0:
            failed_shards.append(f"{shard.name} (exit {code})")
    if failed_shards:
        print(f"failing shards: {', '.join(failed_shards)}", file=sys.stderr)
    ran = total["passed"] + total["failed"] + total["errors"]
    print(f"{total['passed']} passed, {total['failed'] + total['errors']} failed, {total['skipped']} skipped")
    return 1 if failed_shards or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
