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
from typing import Any, Unpack

from config.bucket_layout import checkpoint_prefix
from config.profiles import ServingProfile
from config.schema import DeploymentConfig
from model_build.artifact_plan import ArtifactPlan, BuildOptions, PlanLocations, artifact_base
from model_build.compile import builder_versions, write_build_record
from model_build.errors import BuildError, build_command
from serving_pod.manifest import BuildRecord

HEALTH_POLL_SECONDS = 10.0
STOP_GRACE_SECONDS = 60


@dataclass(frozen=True)
class CachePlan(ArtifactPlan):
    """What `publish` and `verify` need of a build, for a stack whose artifact is its compile cache: beyond what
    every artifact plan has, where below the output directory the stack's vLLM keeps that cache."""

    cache_subdir: str

    def commands(self) -> dict[str, str]:
        return {
            "build": build_command(self.profile),
            "compile": f"make build PROFILE={self.profile}   (the build Job runs vLLM on the Trainium2 node)",
            "publish": f"python -m model_build publish {self.profile} --from {self.out_dir}",
            "verify": f"python -m model_build verify {self.profile} --deep",
        }

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "digest": self.digest, "inputs": self.inputs, "commands": self.commands()}

    def build(self, options: BuildOptions) -> BuildRecord:
        """Run the serving command line (the build Job passes it) until vLLM serves, which fills the cache."""
        if not options.vllm_argv:
            raise BuildError(
                f"profile {self.profile} builds its compile cache by running vLLM with the serving command line; "
                f"pass it as --vllm-argv-json (the build Job does: {build_command(self.profile)})"
            )
        return build_cache(
            self, options.vllm_argv, out=Path(self.out_dir), port=options.port, timeout_s=options.timeout_s
        )

    def render(self) -> str:
        lines = [
            f"profile {self.profile} ({self.inputs['stack']} stack): artifact = vLLM's Neuron compile cache",
            f"digest {self.digest}",
            f"graph args: {' '.join(self.graph_args or [])}",
            "compile route: " + " ".join(f"{k}={v}" for k, v in self.inputs["compile_route"].items()),
            *(f"{name}: {command}" for name, command in self.commands().items()),
        ]
        return "\n".join(lines) + "\n"


def cache_plan(config: DeploymentConfig, profile: ServingProfile, **where: Unpack[PlanLocations]) -> CachePlan:
    base = artifact_base(config, profile, **where)
    stack = base.serving_stack
    if stack.COMPILE_CACHE_SUBDIR is None:  # tests/serving_stacks/test_contract.py keeps the two members in step
        raise BuildError(
            f"profile {profile.name}'s stack {stack.NAME} names no COMPILE_CACHE_SUBDIR, so its artifact is not a "
            "compile cache; give the stack ARTIFACT = ArtifactKind.NXDI_COMPILE or name the subdirectory"
        )
    return CachePlan(**vars(base), cache_subdir=stack.COMPILE_CACHE_SUBDIR)


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _check_argv(plan: CachePlan, argv: list[str]) -> None:
    """The Job passes the Deployment's command line; refuse one that is not this profile's (graph args)."""
    graph = plan.graph_args or []
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
    roles = plan.serving_stack.draft_config_roles(method)
    if inputs["draft"] is None or not roles:
        return
    paths = {
        role: models_root / checkpoint_prefix(inputs[role]["hf_id"], inputs[role]["revision"]) / "config.json"
        for role in roles
    }
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise BuildError(f"cannot read {', '.join(missing)}: stage the checkpoints first (make stage)")
    configs = {role: json.loads(path.read_text()) for role, path in paths.items()}
    problems = plan.serving_stack.draft_problems(configs, method, inputs["num_speculative_tokens"])
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
    # The build Job's environment again, for this output directory (its parent is the Job's scratch there).
    stack_env = plan.serving_stack.build_job_env(
        logical_neuron_cores=plan.inputs["logical_neuron_cores"], scratch=str(out.parent), out_dir=str(out)
    )
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
    cache = out / plan.cache_subdir
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
