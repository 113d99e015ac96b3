"""`vllm serve ...` in the journey's stand-in for the serving images: the command line the Deployment (or the build
Job) renders, answered by the loopback stand-in (bench/standin/server.py) on the pod's address and the port the
command line names.

What it takes from the command line: --served-model-name (the model the API names), --port, --max-num-seqs (the batch
limit), and --speculative-config's num_speculative_tokens k. Step times come from the measured H100 table
(tests/bench/fixtures/step-times-h100-qwen3-32b.json, the same file as the shared data folder's; bench/standin/
step_table.py): the target alone for a profile without speculation, k draft steps plus a (k+1)-token verify for a
speculative one. The acceptance rate is not measured anywhere here: ACCEPTANCE is the middle of the 0.6-0.8 range the
sweep's simulation uses (docs/sweep.md), giving E = (1 - a^(k+1)) / (1 - a) tokens per step (Leviathan et al. 2023),
streamed as chunks whose sizes average E. TTFT is one batch-1 target step.

What it imitates of the stacks' start-up, so the journey's init check and start-up guard meet what they meet on a
node:
- legacy-v0 (VLLM_USE_V1=0, NEURON_COMPILED_ARTIFACTS set): the fork's loader reads the artifact's
  neuron_config.json and compiles into the same directory when it is missing, writing neuron_config.json first; on
  the read-only mount that write fails and vLLM exits (docs/serving-stacks.md; FIELD_NOTES, the fork's
  vllm/model_executor/model_loader/neuronx_distributed.py). It then logs "Model loading took %.4f GiB and %.6f
  seconds" (vLLM 0.9.1 vllm/worker/model_runner.py:1203), which ops/coldstart.py reads.
- vllm-neuron (VLLM_CACHE_ROOT set): the plugin keeps one compiled graph per command line under
  $VLLM_CACHE_ROOT/neuron/compile_cache/<hash>/ and compiles what is missing there at start (compilation_cache.md):
  here <hash> is a hash of the command line without --host and --port, and a missing entry is "compiled" by writing
  it (a second in the build, the start-up guard's new file in a serving pod). It then logs "init engine (profile,
  create kv cache, warmup model) took %.2f s" (vLLM 0.29.0 vllm/v1/engine/core.py:369).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))  # the stand-in's own code (bench/standin), never on the pod's PYTHONPATH

from aiohttp import web  # noqa: E402

from bench.standin.server import _parse_args, make_app  # noqa: E402
from bench.standin.step_table import StepTable  # noqa: E402

STEP_TABLE = REPO / "tests" / "bench" / "fixtures" / "step-times-h100-qwen3-32b.json"
ACCEPTANCE = 0.7
PATTERN_LENGTH = 20
COMPILE_SECONDS = 1.0


def flags(argv: list[str]) -> dict[str, str]:
    """`--flag value` and `--switch` pairs of a vLLM command line."""
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        if argv[i].startswith("--"):
            value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            out[argv[i]] = argv[i + 1] if value else ""
            i += 2 if value else 1
        else:
            i += 1
    return out


def chunk_pattern(k: int, acceptance: float = ACCEPTANCE, length: int = PATTERN_LENGTH) -> list[int]:
    """Chunk sizes (1 to k+1 tokens) averaging E = (1 - a^(k+1)) / (1 - a) over `length` steps."""
    if k == 0:
        return [1]
    mean = (1 - acceptance ** (k + 1)) / (1 - acceptance)
    total = round(mean * length)
    low = int(total // length)
    return [min(low + (1 if i < total - low * length else 0), k + 1) for i in range(length)]


def log(message: str) -> None:
    print(f"INFO {time.strftime('%m-%d %H:%M:%S')} [journey vLLM stand-in] {message}", flush=True)


def load_artifacts(argv: list[str]) -> None:
    """What the stack's vLLM does with its compiled artifact before serving (module docstring)."""
    artifacts = os.environ.get("NEURON_COMPILED_ARTIFACTS")
    cache_root = os.environ.get("VLLM_CACHE_ROOT")
    if artifacts:
        config = Path(artifacts) / "neuron_config.json"
        if not config.is_file():
            log(f"no compiled artifact at {artifacts} ({config.name} missing): compiling into it")
            try:
                config.write_text("{}")  # the fork writes neuron_config.json first
            except OSError as err:
                sys.exit(f"ERROR: compiling into {artifacts} failed: {err}")
        log(f"loaded the compiled artifact from {artifacts}")
    if cache_root:
        skip = {i + j for i, a in enumerate(argv) if a in ("--port", "--host") for j in (0, 1)}
        shaping = [a for i, a in enumerate(argv) if i not in skip]
        key = hashlib.sha256(json.dumps(shaping).encode()).hexdigest()[:16]
        entry = Path(cache_root) / "neuron" / "compile_cache" / key
        if (entry / "model.neff").is_file():
            log(f"compile cache hit: {entry}")
        else:
            log(f"compile cache miss: compiling into {entry}")
            time.sleep(COMPILE_SECONDS)
            entry.mkdir(parents=True, exist_ok=True)
            (entry / "model.neff").write_bytes(hashlib.sha256(key.encode()).digest() * 64)


async def serve(argv: list[str]) -> None:
    started = time.monotonic()
    given = flags(argv)
    speculative = json.loads(given.get("--speculative-config") or "{}")
    k = int(speculative.get("num_speculative_tokens", 0))
    load_artifacts(argv)
    step_ms = StepTable.load(STEP_TABLE).curve(0)[0][1] * 1000
    script, _, _ = _parse_args(
        [
            "--model", given.get("--served-model-name") or argv[1],
            "--ttft-ms", f"{step_ms:.3f}",
            "--step-table", str(STEP_TABLE),
            "--table-k", str(k),
            "--pattern", ",".join(str(n) for n in chunk_pattern(k)),
            "--k", str(max(k, 1)),
            "--stack", os.environ["JOURNEY_VLLM_STACK"],  # the image's vLLM: its own series (LIVE_METRICS)
            "--max-num-seqs", given.get("--max-num-seqs", "0"),
        ]
    )  # fmt: skip
    host = os.environ.get("JOURNEY_POD_IP", "127.0.0.1")
    port = int(given.get("--port", "8000"))
    runner = web.AppRunner(make_app(script), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    elapsed = time.monotonic() - started
    if os.environ.get("VLLM_USE_V1") == "0":
        log(f"Model loading took 0.0000 GiB and {elapsed:.6f} seconds")
    else:
        log(f"init engine (profile, create kv cache, warmup model) took {elapsed:.2f} s")
    log(f"serving {script.model} on http://{host}:{port} (k={k}, chunk sizes {','.join(map(str, script.pattern))})")
    parent = os.getppid()
    while os.getppid() == parent:  # an orphan (its start-up guard killed) ends too, as its container would
        await asyncio.sleep(1.0)


def main() -> None:
    argv = sys.argv[1:]
    if not argv or argv[0] != "serve":
        sys.exit(f"journey vLLM stand-in: only `vllm serve ...` is imitated, got {argv[:1]}")
    asyncio.run(serve(argv))


if __name__ == "__main__":
    main()
