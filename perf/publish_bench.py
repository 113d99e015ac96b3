"""Publish benchmark: `python -m model_build publish` vs `aws s3 sync`, each timed as a whole process, on a 2 GiB
model-like tree against moto on loopback.

    .venv/bin/python perf/publish_bench.py [--aws /tmp/bench-venv/bin/aws] [--trials 7] [--keep]

Generates /tmp/publish-bench/tree (4 x 448 MiB "sharded weights", 256 x 1 MiB files, a few KB of JSON) and, per
trial and per tool, starts a fresh moto server (ThreadedMotoServer in its own process on 127.0.0.1), then times:
  - model_build publish, first (empty bucket), then the unchanged tree again (its hash cache in the tree), then
    the unchanged tree with the hash cache deleted (what every re-publish cost before the cache);
  - aws s3 sync, first and unchanged (if an `aws` CLI is given; it is not a project dependency: install it in a
    throw-away venv, e.g. python3 -m venv /tmp/bench-venv && /tmp/bench-venv/bin/pip install awscli).
The order of the tools rotates from trial to trial. model_build runs with a 120 s read timeout instead of 15 s
(see CLI below: moto is silent while it joins a multipart object). Each time is the wall time of the whole process (interpreter
start, imports, credentials, the transfer), so the tools are compared alike. Numbers measure the clients against
moto (one Python process, loopback), not S3: on 2 cores moto's own CPU is most of the wall time. Compare medians,
and read the spread: the min-max range of each row shows the run-to-run noise.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from config import load_config  # noqa: E402
from model_build.plan import build_plan  # noqa: E402
from model_build.store import DEFAULT_CONCURRENCY, DEFAULT_PART_SIZE, MIB  # noqa: E402
from model_build.uploader import HASH_CACHE_NAME  # noqa: E402
from tests.model_build.conftest import fake_compile  # noqa: E402
from tests.ports import free_port  # noqa: E402

WORK = Path("/tmp/publish-bench")
BUCKET = "publish-bench"
PROFILE = "baseline"
LARGE, LARGE_SIZE = 4, 448 * MIB
SMALL, SMALL_SIZE = 256, 1 * MIB
# `python -m model_build` with a longer read timeout: moto answers CompleteMultipartUpload only once it has joined
# the parts (S3 sends whitespace meanwhile), which on a loaded 2-core machine takes longer than the shipped 15 s.
CLI = "import sys; from cloud import aws; aws.READ_S = 120.0; from model_build.cli import main; sys.exit(main(sys.argv[1:]))"


def generate(tree: Path) -> int:
    rng = random.Random(42)
    block = rng.randbytes(64 * MIB)
    for i in range(LARGE):
        path = tree / "weights" / f"tp{i}_sharded_checkpoint.safetensors"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:
            for _ in range(LARGE_SIZE // len(block)):
                f.write(rng.randbytes(16) + block[16:])  # every 64 MiB block distinct, cheaply
    for i in range(SMALL):
        path = tree / "small" / f"part-{i:04d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rng.randbytes(SMALL_SIZE))
    config = load_config()
    plan = build_plan(config, config.profile(PROFILE), bucket=BUCKET)
    # a few KB of configs, then the build record last, as the model_build tests' synthetic compile writes them
    configs = ("config.json", "neuron_config.json", "tokenizer_config.json", "generation_config.json")
    fake_compile(tree, plan, seed=42, files={name: rng.randrange(1000, 4000) for name in configs})
    return sum(p.stat().st_size for p in tree.rglob("*") if p.is_file())


def start_moto(port: int) -> subprocess.Popen[bytes]:
    code = (
        "import time; from moto.server import ThreadedMotoServer; "
        f"s = ThreadedMotoServer(ip_address='127.0.0.1', port={port}, verbose=False); s.start(); time.sleep(1e9)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("moto server did not start")


def timed(argv: list[str]) -> float:
    """Wall time of one whole process; its output is discarded, a failure stops the benchmark."""
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed (exit {done.returncode}):\n{done.stderr}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aws", default="/tmp/bench-venv/bin/aws", help="aws CLI (installed outside the project)")
    parser.add_argument("--part-size-mib", type=int, default=DEFAULT_PART_SIZE // MIB)
    parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    parser.add_argument("--trials", type=int, default=5, help="runs of each tool, each on a fresh moto server")
    parser.add_argument("--keep", action="store_true", help="keep the generated tree")
    args = parser.parse_args()

    os.environ.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-2",
        AWS_EC2_METADATA_DISABLED="true",
    )
    has_aws = Path(args.aws).is_file() or shutil.which(args.aws) is not None
    tree = WORK / "tree"
    shutil.rmtree(WORK, ignore_errors=True)
    try:
        t = time.perf_counter()
        total = generate(tree)
        files = sum(1 for p in tree.rglob("*") if p.is_file())
        print(f"generated {files} files, {total / MIB:.0f} MiB in {time.perf_counter() - t:.1f} s", flush=True)
        publish = ["publish", PROFILE, "--from", str(tree)]
        publish += ["--part-size-mib", str(args.part_size_mib), "--concurrency", str(args.concurrency)]
        cli = [sys.executable, "-c", CLI, "--bucket", BUCKET, *publish]
        tools = ["model_build publish"] + (["aws s3 sync"] if has_aws else [])
        rows: dict[str, list[float]] = {}
        for trial in range(args.trials):
            for name in tools[trial % len(tools) :] + tools[: trial % len(tools)]:  # rotate who goes first
                port = free_port()
                endpoint = f"http://127.0.0.1:{port}"
                os.environ["AWS_ENDPOINT_URL"] = endpoint
                moto = start_moto(port)
                (tree / HASH_CACHE_NAME).unlink(missing_ok=True)
                try:
                    import boto3

                    boto3.client("s3", region_name="us-east-2").create_bucket(
                        Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-east-2"}
                    )
                    if name == "aws s3 sync":
                        sync = [args.aws, "s3", "sync", str(tree), f"s3://{BUCKET}/aws-sync/", "--only-show-errors"]
                        sync += ["--endpoint-url", endpoint]
                        measured = {f"{name}: first": timed(sync), f"{name}: unchanged": timed(sync)}
                    else:
                        measured = {f"{name}: first": timed(cli), f"{name}: unchanged (hash cache)": timed(cli)}
                        (tree / HASH_CACHE_NAME).unlink()
                        measured[f"{name}: unchanged, no hash cache"] = timed(cli)
                finally:
                    moto.kill()
                    moto.wait()
                for row, seconds in measured.items():
                    rows.setdefault(row, []).append(seconds)
                print(f"trial {trial + 1}: " + ", ".join(f"{r} {s:.2f} s" for r, s in measured.items()), flush=True)

        version = (
            subprocess.run([args.aws, "--version"], capture_output=True, text=True).stdout.strip()
            if has_aws
            else f"no aws CLI at {args.aws}: aws s3 sync not timed"
        )
        print(
            f"\ntree: {files} files, {total / MIB:.0f} MiB (4 x {LARGE_SIZE // MIB} MiB, {SMALL} x 1 MiB, JSON); "
            f"part size {args.part_size_mib} MiB, concurrency {args.concurrency}; {version}; {args.trials} trials, "
            f"a fresh moto server per tool and trial; whole processes, wall time; load average "
            f"{os.getloadavg()[0]:.1f}\n"
        )
        print(f"| {'what':<58} | {'median':>8} | {'min - max':>15} |")
        print(f"|{'-' * 60}|{'-' * 10}|{'-' * 17}|")
        for row, times in rows.items():
            print(f"| {row:<58} | {statistics.median(times):>6.2f} s | {min(times):>5.2f} - {max(times):>5.2f} s |")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
