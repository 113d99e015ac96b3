"""Where a pytest run's time goes: wall and CPU seconds of the run, and the seconds of each test file.

    .venv/bin/python perf/test_suite_time.py [--top 25] [pytest args, default: tests]

CPU (user + sys of pytest and every child it waited for: node under the CDK synths, vLLM checks, Envoy,
stand-ins) next to wall shows whether a part waits or computes: on a 2-core machine shared with others, wall
is noisy and CPU is what concurrent shards cannot overlap. Per-file seconds come from pytest's junit XML
(each test case's setup + call + teardown, so a session fixture counts where it is first used). The whole
suite's per-shard numbers: `python -m tools.test_shards` prints them.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def per_file_seconds(junit: Path) -> Counter[str]:
    """Seconds by test file, from the junit XML's testcase classname (dotted module path) and time."""
    found: Counter[str] = Counter()
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").split("::")[0]
        parts = module.split(".")
        # classname is the module, plus the class for tests in a class: keep up to the test_ module
        while parts and not parts[-1].startswith("test_"):
            parts.pop()
        found[("/".join(parts) or module) + ".py"] += float(case.get("time", "0"))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--top", type=int, default=25, help="how many of the slowest files to print")
    args, pytest_args = parser.parse_known_args()
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", *(pytest_args or ["tests"]), f"--junitxml={junit}"],
            cwd=ROOT,
            env=os.environ,
            stdout=subprocess.DEVNULL,
            check=False,
        )
        wall = time.monotonic() - began
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        files = per_file_seconds(junit) if junit.exists() else Counter()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    for name, seconds in files.most_common(args.top):
        print(f"{seconds:8.1f} s  {name}")
    print(f"pytest exit {done.returncode}; {wall:.0f} s wall, {cpu:.0f} s CPU, load {os.getloadavg()[0]:.1f}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
