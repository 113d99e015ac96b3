"""Wall time of `python -m ops.preflight` against an AWS endpoint that accepts connections and never answers, with the
shipped timeouts (5 s connect, 15 s read, 3 attempts) and the shipped 30 s deadline; and without credentials.

    .venv/bin/python perf/preflight_silent.py

Prints each run's seconds, exit code and first line. The target: both end with a sentence within 30 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.silent_endpoint import silent_server  # noqa: E402 (after the path above)


def run(env: dict[str, str]) -> tuple[float, int, str]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ops.preflight", "--offline"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    first = (done.stdout.splitlines() or [done.stderr.strip()])[0]
    return time.perf_counter() - start, done.returncode, first


def main() -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | {"AWS_EC2_METADATA_DISABLED": "true"}
    with silent_server() as port:
        silent = base | {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }
        seconds, code, first = run(silent)
    print(f"silent endpoint: {seconds:.1f} s, exit {code}: {first}")
    with tempfile.TemporaryDirectory() as empty:
        nothing = base | {
            "AWS_CONFIG_FILE": str(Path(empty) / "config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(Path(empty) / "credentials"),
        }
        seconds, code, first = run(nothing)
    print(f"no credentials: {seconds:.1f} s, exit {code}: {first}")


if __name__ == "__main__":
    main()
