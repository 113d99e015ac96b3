"""Publish benchmark: model_build's uploader vs `aws s3 sync` on a 2 GiB model-like tree, against moto on loopback.

    .venv/bin/python benchmarks/publish_bench.py [--aws /tmp/awscli-venv/bin/aws] [--keep]

Generates /tmp/publish-bench/tree (4 x 448 MiB "sharded weights", 256 x 1 MiB files, a few KB of JSON),
starts moto's ThreadedMotoServer in its own process on 127.0.0.1, then times:
  1. model_build publish (SHA-256 of every file + parallel upload + confirming listing + manifest),
  2. aws s3 sync of the same tree into another prefix,
  3. model_build publish again on the unchanged tree (bytes sent must be 0),
  4. aws s3 sync again on the unchanged tree.
Moto keeps small objects in memory and spools large ones to a temporary directory; the tree is
deleted afterwards. Numbers measure the client against moto (single Python process, loopback), not S3:
on 2 cores moto's own CPU (MD5 of every byte, copies at CompleteMultipartUpload) is most of the wall time,
and botocore signs every payload with SHA-256 because the endpoint is plain HTTP (over HTTPS it does not).
Run-to-run noise is about +-0.5 s, so use --trials 5 or more and compare medians.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from config import load_config  # noqa: E402
from model_build.compile import write_build_record  # noqa: E402
from model_build.manifest import BuildRecord  # noqa: E402
from model_build.plan import build_plan  # noqa: E402
from model_build.publish import publish_artifact  # noqa: E402
from model_build.transfer import (  # noqa: E402
    DEFAULT_CONCURRENCY,
    DEFAULT_PART_SIZE,
    MIB,
    S3Store,
    TransferSettings,
    make_s3_client,
)

WORK = Path("/tmp/publish-bench")
BUCKET = "publish-bench"
LARGE, LARGE_SIZE = 4, 448 * MIB
SMALL, SMALL_SIZE = 256, 1 * MIB


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
    for name in ("config.json", "neuron_config.json", "tokenizer_config.json", "generation_config.json"):
        (tree / name).write_text('{"note": "' + "x" * rng.randrange(1000, 4000) + '"}')
    return sum(p.stat().st_size for p in tree.rglob("*") if p.is_file())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def aws_sync(aws: str, tree: Path, url: str, endpoint: str, extra: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [aws, "s3", "sync", str(tree), url, "--only-show-errors", *extra, "--endpoint-url", endpoint], check=True
    )
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--aws", default="/tmp/awscli-venv/bin/aws", help="aws CLI (installed outside the project venv)"
    )
    parser.add_argument("--part-size-mib", type=int, default=DEFAULT_PART_SIZE // MIB)
    parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    parser.add_argument("--trials", type=int, default=3, help="runs of each tool, each on a fresh moto server")
    parser.add_argument("--keep", action="store_true", help="keep the generated tree")
    args = parser.parse_args()

    os.environ.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-2",
        AWS_EC2_METADATA_DISABLED="true",
    )
    tree = WORK / "tree"
    shutil.rmtree(WORK, ignore_errors=True)
    try:
        t = time.perf_counter()
        total = generate(tree)
        files = sum(1 for p in tree.rglob("*") if p.is_file())
        print(f"generated {files} files, {total / MIB:.0f} MiB in {time.perf_counter() - t:.1f} s", flush=True)

        config = load_config()
        plan = build_plan(config, config.profile("baseline"), bucket=BUCKET)
        write_build_record(
            tree,
            BuildRecord(
                profile=plan.profile,
                digest=plan.digest,
                inputs=plan.inputs,
                builder={"bench": "synthetic"},
                created_at="2026-01-01T00:00:00+00:00",
                neuron_config={"target": plan.target_kwargs, "draft": None},
            ),
        )
        total = sum(p.stat().st_size for p in tree.rglob("*") if p.is_file())
        files += 1
        settings = TransferSettings(
            part_size=args.part_size_mib * MIB, concurrency=args.concurrency, progress_interval=30
        )
        tools = {
            "model_build publish": None,
            "aws s3 sync": [],
            "aws s3 sync --checksum-algorithm SHA256": ["--checksum-algorithm", "SHA256"],
        }
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in tools}
        sent: list[tuple[int, int]] = []
        moto_rss: list[float] = []
        for trial in range(args.trials):
            order = list(tools)[trial % len(tools) :] + list(tools)[: trial % len(tools)]  # rotate who goes first
            for name in order:
                port = free_port()
                endpoint = f"http://127.0.0.1:{port}"
                os.environ["AWS_ENDPOINT_URL"] = endpoint
                moto = start_moto(port)
                try:
                    client = make_s3_client("us-east-2", settings)
                    client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
                    if tools[name] is None:
                        runs = []
                        for _ in range(2):  # first publish, then the unchanged tree again
                            store = S3Store(make_s3_client("us-east-2", settings), BUCKET, settings)
                            t0 = time.perf_counter()
                            result = publish_artifact(store, plan, tree)
                            runs.append((time.perf_counter() - t0, result.stats.bytes_sent))
                        times[name].append((runs[0][0], runs[1][0]))
                        sent.append((runs[0][1], runs[1][1]))
                    else:
                        url = f"s3://{BUCKET}/aws-sync/"
                        first = aws_sync(args.aws, tree, url, endpoint, tools[name])
                        again = aws_sync(args.aws, tree, url, endpoint, tools[name])
                        times[name].append((first, again))
                    moto_rss.append(rss_mib(moto.pid))
                finally:
                    moto.kill()
                    moto.wait()
                print(
                    f"trial {trial + 1}: {name}: first {times[name][-1][0]:.1f} s, unchanged {times[name][-1][1]:.1f} s",
                    flush=True,
                )

        version = subprocess.run([args.aws, "--version"], capture_output=True, text=True).stdout.strip()
        print(
            f"\ntree: {files} files, {total / MIB:.0f} MiB (4 x {LARGE_SIZE // MIB} MiB, {SMALL} x 1 MiB, JSON); "
            f"model_build part size {args.part_size_mib} MiB, concurrency {args.concurrency}; {version}; "
            f"{args.trials} trials on a fresh moto server each; peak moto RSS {max(moto_rss):.0f} MiB\n"
        )
        print(f"| {'tool':<40} | {'first: median (min)':>20} | {'unchanged: median':>17} | {'data bytes sent':>21} |")
        print(f"|{'-' * 42}|{'-' * 22}|{'-' * 19}|{'-' * 23}|")
        for name, rows in times.items():
            first = sorted(r[0] for r in rows)
            again = sorted(r[1] for r in rows)
            med = lambda xs: xs[len(xs) // 2]  # noqa: E731
            shown = "n/a"
            if tools[name] is None:
                shown = f"{sent[0][0]:,} / {max(s[1] for s in sent):,}"
            print(f"| {name:<40} | {med(first):>10.1f} s ({first[0]:.1f} s) | {med(again):>15.1f} s | {shown:>21} |")
        print("\n(data bytes sent: first publish / unchanged re-publish, counted by the uploader)")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
