"""Run the whole test suite as five concurrent pytest shards, then the timing-marked tests on their own.

Why: much of the suite's wall time is waiting (loopback servers, Envoy, moto, subprocesses, silent endpoints),
not CPU, so on a 2-core machine concurrent shards overlap one's waits with another's work. tests/charts (Envoy
behind stand-ins that hold requests for a second) has its own shard; tests/stacks and tests/config stay together
because only they synthesize the variant, vllm-neuron and three-profile configs (session fixtures, once per
process). Tests whose assertions depend on wall-clock timing (`@pytest.mark.timing`) run afterwards, alone, so
the shards' load cannot skew them; that phase collects only TIMING_PATHS (tests/test_layers.py-style guard:
tests/tools/test_test_shards.py fails if a timing test sits elsewhere). Each shard's output is printed whole when
it ends (never interleaved) with its wall and CPU seconds, and the last line adds up every shard:
`N passed, N failed`.

    python -m tools.test_shards [extra pytest args]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Wait-heavy: Envoy and loopback servers, moto, subprocesses; "the rest" holds stacks/config (CPU: the synths). A
# path may lie inside another shard's folder (a file of tests/ops): that shard then leaves it out. The kill matrix
# (about 50 s of CPU in 35 client processes) has a shard of its own, beside model_build, so that the rest of tests/ops
# (about 60 s of CPU in its one pytest process) does not wait for it: one process uses one core.
OWN_SHARDS = (
    "tests/charts",
    "tests/bench",
    "tests/ops tests/serving_pod",
    "tests/ops/test_out_of_service.py tests/model_build",
)
TIMING_PATHS = ("tests/bench",)  # where every @pytest.mark.timing test lives: the timing phase collects only these
SHARED_SYNTH_DIR = "TRN_SPECDEC_SHARED_SYNTH_DIR"  # tests/conftest.py: where the shards share one synth
COUNTED = ("passed", "failed", "errors", "skipped", "deselected")


@dataclass
class Shard:
    name: str
    args: list[str]


def _inside(path: str, folder: str) -> bool:
    return path != folder and path.startswith(folder.rstrip("/") + "/")


def _ignores(mine: list[str]) -> list[str]:
    """--ignore for every other shard's path that lies inside one of `mine`."""
    others = [p for paths in OWN_SHARDS for p in paths.split() if p not in mine]
    return [f"--ignore={p}" for p in others if any(_inside(p, folder) for folder in mine)]


def shards(extra: list[str]) -> tuple[list[Shard], Shard]:
    """The concurrent shards (together: every test not marked timing, each once) and the timing phase."""
    own = [Shard(paths, [*paths.split(), *_ignores(paths.split()), "-m", "not timing"]) for paths in OWN_SHARDS]
    rest = Shard("tests (the rest)", ["tests", *_ignores(["tests"]), "-m", "not timing"])
    timing = Shard("timing-marked tests, alone", [*TIMING_PATHS, "-m", "timing"])
    return [Shard(s.name, [*s.args, *extra]) for s in (rest, *own)], Shard(timing.name, [*timing.args, *extra])


def counts(output: str) -> dict[str, int]:
    """Counts from pytest's closing line, e.g. '3 failed, 400 passed, 2 deselected in 40.1s'."""
    lines = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed|error|deselected)", line)]
    found = {key: 0 for key in COUNTED}
    for number, word in re.findall(r"(\d+) (passed|failed|errors?|skipped|deselected)", lines[-1] if lines else ""):
        found["errors" if word.startswith("error") else word] += int(number)
    return found


@dataclass
class Ran:
    """A finished shard: its exit code, output, wall seconds and the CPU seconds (user + sys) of its pytest
    process and every child it waited for (synths' node, vLLM checks, Envoy, stand-ins)."""

    shard: Shard
    code: int
    text: str
    wall_s: float
    cpu_s: float


def run_concurrently(group: list[Shard]) -> list[Ran]:
    """Each shard in its own pytest process; the default config's cloud assembly is synthesized once for all of
    them (tests/conftest.py reads SHARED_SYNTH_DIR). os.wait4 gives each shard's own rusage as it ends."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, SHARED_SYNTH_DIR: str(Path(tmp) / "cdk.out")}
        started: dict[int, tuple[Shard, Path]] = {}
        began = time.monotonic()
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
            started[proc.pid] = (shard, log)
        results = []
        while started:
            pid, status, usage = os.wait4(-1, 0)  # whichever shard ends first; we start no other children
            if pid not in started:
                continue
            shard, log = started.pop(pid)
            ran = Ran(
                shard=shard,
                code=os.waitstatus_to_exitcode(status),
                text=log.read_text(errors="replace"),
                wall_s=time.monotonic() - began,
                cpu_s=usage.ru_utime + usage.ru_stime,
            )
            print(f"===== {shard.name} (exit {ran.code}) =====\n{ran.text}", flush=True)
            print(f"{shard.name}: {ran.wall_s:.0f} s wall, {ran.cpu_s:.0f} s CPU", flush=True)
            results.append(ran)
        return results


def main(argv: list[str] | None = None) -> int:
    extra = list(sys.argv[1:] if argv is None else argv)
    concurrent, timing = shards(extra)
    began = time.monotonic()
    results = run_concurrently(concurrent)
    results += run_concurrently([timing])
    total = {key: 0 for key in COUNTED}
    failed_shards = []
    for ran in results:
        for key, value in counts(ran.text).items():
            total[key] += value
        # 5: no test collected. A shard that collects nothing means a path or marker went wrong.
        if ran.code != 0:
            failed_shards.append(f"{ran.shard.name} (exit {ran.code})")
    print(f"whole suite: {time.monotonic() - began:.0f} s wall, {sum(r.cpu_s for r in results):.0f} s CPU")
    if failed_shards:
        print(f"failing shards: {', '.join(failed_shards)}", file=sys.stderr)
    ran_tests = total["passed"] + total["failed"] + total["errors"]
    print(f"{total['passed']} passed, {total['failed'] + total['errors']} failed, {total['skipped']} skipped")
    return 1 if failed_shards or ran_tests == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
