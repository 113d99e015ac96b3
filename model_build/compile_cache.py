"""Build the vllm-neuron stack's artifact: its compile cache, filled by running that stack's vLLM once.

The plugin compiles every bucket's graph when vLLM starts (torch.compile -> neuronx-cc, one NEFF per bucket)
and keeps the results under `$VLLM_CACHE_ROOT/neuron/compile_cache/<hash>/` (vllm-neuron docs,
design/compilation/compilation_cache.md). So the build runs `vllm serve` with exactly the serving command line
(the build Job renders it from the same code as the Deployment) and `VLLM_CACHE_ROOT` = the output directory,
waits until the server answers /health (every warm-up compile is done then), stops it, and records the build.
`publish` uploads the directory under the profile digest; serving copies it back to local disk.

It runs on the Trainium2 node, never on a CPU instance: the plugin's CPU compile mode (VLLM_NEURON_CPU_COMPILE=1)
"is not supported with" speculative decoding (design/compilation/cpu_compilation.md), and compiling baseline
and speculative profiles the same way keeps their caches comparable.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from config.bucket_layout import artifact_prefix, checkpoint_prefix
from config.schema import DeploymentConfig, ServingProfile
from model_build import check_mounted
from model_build.compile import builder_versions, write_build_record
from model_build.digest import artifact_inputs, digest_of
from model_build.errors import BuildError, build_command
from model_build.manifest import BuildRecord
from model_build.plan import DEFAULT_MODELS_ROOT, DEFAULT_OUT
from serving_stacks import vllm_neuron

HEALTH_POLL_SECONDS = 10.0
STOP_GRACE_SECONDS = 60


@dataclass(frozen=True)
class CachePlan:
    """What `publish` and `verify` need of a build, for a stack whose artifact is its compile cache."""

    profile: str
    digest: str
    inputs: dict[str, Any]
    out_dir: str
    models_root: str
    bucket: str

    def expected(self) -> dict[str, Any]:
        return {"digest": self.digest, "inputs": self.inputs, "profile": self.profile}

    def check_mounted_argv(self) -> list[str]:
        directory = f"{self.models_root.rstrip('/')}/{artifact_prefix(self.digest)}".rstrip("/")
        return check_mounted.command(directory, self.expected())

    def commands(self) -> dict[str, str]:
        return {
            "build": build_command(self.profile),
            "compile": f"make build PROFILE={self.profile}   (the build Job runs vLLM on the Trainium2 node)",
            "publish": f"python -m model_build publish {self.profile} --from {self.out_dir}",
            "verify": f"python -m model_build verify {self.profile} --deep",
        }

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "digest": self.digest, "inputs": self.inputs, "commands": self.commands()}

    def render(self) -> str:
        lines = [
            f"profile {self.profile} ({self.inputs['stack']} stack): artifact = vLLM's Neuron compile cache",
            f"digest {self.digest}",
            f"graph args: {' '.join(self.inputs['graph_args'])}",
            "compile route: " + " ".join(f"{k}={v}" for k, v in self.inputs["compile_route"].items()),
            *(f"{name}: {command}" for name, command in self.commands().items()),
        ]
        return "\n".join(lines) + "\n"


def cache_plan(
    config: DeploymentConfig,
    profile: ServingProfile,
    *,
    models_root: str = DEFAULT_MODELS_ROOT,
    out_dir: str | None = None,
    bucket: str | None = None,
) -> CachePlan:
    inputs = artifact_inputs(config, profile)
    digest = digest_of(inputs)
    return CachePlan(
        profile=profile.name,
        digest=digest,
        inputs=inputs,
        out_dir=out_dir or DEFAULT_OUT.format(digest=digest),
        models_root=models_root,
        bucket=bucket or "<bucket>",
    )


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _check_argv(plan: CachePlan, argv: list[str]) -> None:
    """The Job passes the Deployment's command line; refuse one that is not this profile's (graph args)."""
    graph = plan.inputs["graph_args"]
    if argv[:2] != ["vllm", "serve"]:
        raise BuildError(f"the vLLM command line starts with {argv[:2]}; expected ['vllm', 'serve', ...]")
    if not any(argv[i : i + len(graph)] == graph for i in range(len(argv))):
        raise BuildError(
            f"the vLLM command line does not carry profile {plan.profile}'s graph arguments {' '.join(graph)}; "
            f"render the build Job again ({build_command(plan.profile)})"
        )


def check_drafter(plan: CachePlan, models_root: Path) -> None:
    """Refuse a draft that vLLM 0.29 or the plugin would refuse at start, reading the staged checkpoints' config.json
    before vLLM starts: a speculators-format config vLLM's loader rejects (EAGLE3 and DFlash), and for DFlash a
    drafter that does not fit its target (k, hidden size, vocabulary, target layers)."""
    inputs = plan.inputs
    method = inputs["decoding"]
    if inputs["draft"] is None:
        return
    roles = ("target", "draft") if method == "dflash" else ("draft",)
    paths = {
        role: models_root / checkpoint_prefix(inputs[role]["hf_id"], inputs[role]["revision"]) / "config.json"
        for role in roles
    }
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise BuildError(f"cannot read {', '.join(missing)}: stage the checkpoints first (make stage)")
    configs = {role: json.loads(path.read_text()) for role, path in paths.items()}
    problems = vllm_neuron.speculators_problems(configs["draft"], method)
    if method == "dflash":
        problems += vllm_neuron.dflash_drafter_problems(
            configs["target"], configs["draft"], inputs["num_speculative_tokens"]
        )
    if problems:
        raise BuildError(
            f"profile {plan.profile}: draft {inputs['draft']['hf_id']}@{inputs['draft']['revision']} "
            f"({paths['draft']}) would be refused when vLLM starts:\n" + "\n".join(f"  - {p}" for p in problems)
        )


def build_cache(
    plan: CachePlan,
    argv: list[str],
    *,
    out: Path,
    port: int,
    timeout_s: float,
    poll_s: float = HEALTH_POLL_SECONDS,
) -> BuildRecord:
    """Run vLLM until it serves (all compiles done), stop it, and write the build record into out."""
    _check_argv(plan, argv)
    check_drafter(plan, Path(plan.models_root))
    out.mkdir(parents=True, exist_ok=True)
    stack_env = vllm_neuron.build_env(cache_root=str(out), logical_neuron_cores=plan.inputs["logical_neuron_cores"])
    env = {**os.environ, **stack_env}
    proc = subprocess.Popen(argv, env=env, start_new_session=True)
    started = time.monotonic()
    try:
        while not _healthy(port):
            if proc.poll() is not None:
                raise BuildError(f"vLLM exited with code {proc.returncode} before serving; its log is above")
            if time.monotonic() - started > timeout_s:
                raise BuildError(
                    f"vLLM did not serve within {timeout_s / 60:.0f} min; raise startup_timeout_minutes of profile "
                    f"{plan.profile} if the compile is only slow (its log is above)"
                )
            time.sleep(poll_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    cache = out / vllm_neuron.COMPILE_CACHE_SUBDIR
    if not cache.is_dir() or not any(p.is_file() for p in cache.rglob("*")):
        raise BuildError(
            f"vLLM served but left no compile cache in {cache}; the image's plugin may keep it elsewhere "
            "(check VLLM_CACHE_ROOT in its docs)"
        )
    record = BuildRecord(
        profile=plan.profile,
        digest=plan.digest,
        inputs=plan.inputs,
        builder=builder_versions() | {"stack": plan.inputs["stack"]},
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        neuron_config={"vllm_argv": argv},
    )
    write_build_record(out, record)
    return record
