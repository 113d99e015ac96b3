"""The kill matrix (tests/ops/kill_matrix.py) as a table: `make build` stopped by SIGINT, SIGTERM, SIGHUP, SIGKILL
and a second SIGINT at each step, against moto and the fake kubectl; what the profile is left in, the exit, and
any kubectl left running. With --root, the client is another checkout's (e.g. `git archive <commit> | tar -x -C
DIR`); one without --poll-seconds runs through a wrapper that passes the same poll interval to run_build.

    .venv/bin/python perf/kill_matrix.py [--root DIR] [--workers 3]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.ops import kill_matrix  # noqa: E402 (after the path above)

POLL_S = 0.05
OLD_CLIENT = (
    "import sys, ops.build_artifact as b; run = b.run_build; "
    f"b.run_build = lambda config, profile, poll_s=0: run(config, profile, poll_s={POLL_S}); sys.exit(b.main())"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose ops/ runs (default: this one)")
    parser.add_argument("--workers", type=int, default=3)
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request log
    from moto.server import ThreadedMotoServer

    from tests.ops.fake_cluster import models_bucket, publish_artifact_of
    from tests.ports import free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-2",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    os.environ.update(env)
    if "--poll-seconds" not in (args.root / "ops" / "build_artifact.py").read_text():
        kill_matrix.build_command = lambda root, poll_s: [sys.executable, "-c", OLD_CLIENT, "speculative", "--apply"]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            models_bucket(staged=["qwen3-32b", "qwen3-1-7b"])
            started = time.monotonic()
            results = kill_matrix.matrix(
                args.root.resolve(),
                Path(tmp),
                env,
                poll_s=POLL_S,
                publish=lambda: publish_artifact_of(Path(tmp) / "artifact", "speculative"),
                workers=args.workers,
            )
            wall = time.monotonic() - started
    finally:
        server.stop()
    print(kill_matrix.table(results))
    runs = [c.run for c in results] + [c.next_run for c in results if c.next_run is not None]
    reached = [c for c in results if c.reached]
    silent = [c for c in reached if c.paused_after and not c.said_paused]
    print(
        f"\n{len(reached)} kills at a step reached; the profile left paused without a word by the kill: "
        f"{len(silent)}, of which the next make build named {sum(c.next_found for c in silent)} and left "
        f"{sum(c.paused_at_end for c in silent)} paused; a kubectl running after its client: "
        f"{sum(bool(c.run.outlived) for c in reached)}; tracebacks: {sum('Traceback' in c.run.output for c in reached)}"
    )
    print(
        f"{len(runs)} client runs in {wall:.1f} s wall ({args.workers} at a time), each "
        f"{min(r.seconds for r in runs):.1f}-{max(r.seconds for r in runs):.1f} s"
    )


if __name__ == "__main__":
    main()
