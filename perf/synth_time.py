"""Median wall time of `make synth`'s CDK step against a minimal one-cluster aws_eks_v2 app.

    .venv/bin/python perf/synth_time.py [--runs 5]

Both go through the pinned CDK CLI (`npx cdk synth --quiet`) into throw-away output folders, after
set-up, so the numbers compare the app code only. Prints the medians and their ratio (target <= 1.3).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def time_synth(app: str, runs: int) -> list[float]:
    env = os.environ | {
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as out:
            cmd = ["npx", "--no-install", "cdk", "synth", "--quiet", "--no-notices", "-a", app, "-o", out]
            start = time.perf_counter()
            subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
            times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    py = sys.executable
    ours = time_synth(f"{py} app.py", args.runs)
    minimal = time_synth(f"{py} perf/minimal_eks_app.py", args.runs)
    m_ours, m_min = statistics.median(ours), statistics.median(minimal)
    print(f"trn-specdec app   median {m_ours:6.2f} s  runs {[round(t, 2) for t in ours]}")
    print(f"minimal EKS app   median {m_min:6.2f} s  runs {[round(t, 2) for t in minimal]}")
    print(f"ratio {m_ours / m_min:.2f} (target <= 1.30)")


if __name__ == "__main__":
    main()
