"""What every stack's artifact plan shares: its digest and inputs, where it is built, published and mounted, and
the init check serving runs against it. BuildPlan (NxDI compile) and CachePlan (compile cache) extend it.

The serving chart renders its init container from `artifact_base(...).check_mounted_argv()`, and `model_build
plan` shows the same method's result, so the check a pod runs and the one the plan shows cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from config.bucket_layout import MOUNT_PATH, artifact_prefix, mounted
from config.ports import DEFAULT_API_PORT
from config.profiles import ServingProfile
from config.schema import DeploymentConfig
from model_build.digest import artifact_inputs, digest_of
from serving_pod import check_mounted
from serving_pod.manifest import BuildRecord
from serving_stacks import stack_named
from serving_stacks.contract import ServingStack

DEFAULT_OUT = "/tmp/trn-specdec/artifacts/{digest}"


class PlanLocations(TypedDict, total=False):
    """Where a plan's build reads, writes and publishes: artifact_base's keyword arguments (it holds the defaults),
    which every plan maker passes through."""

    models_root: str
    out_dir: str | None
    bucket: str | None


@dataclass(frozen=True)
class BuildOptions:
    """What `model_build compile` hands a plan's build beyond the plan; each kind of build reads its own."""

    target_path: str | None = None  # NxDI compile: a local target checkpoint instead of the staged one
    draft_path: str | None = None  # NxDI compile: a local draft checkpoint instead of the staged one
    vllm_argv: list[str] | None = None  # compile cache: the serving command line the build Job renders
    port: int = DEFAULT_API_PORT  # compile cache: the port of that command line
    timeout_s: float = 6 * 3600.0  # compile cache: give up when vLLM does not serve within this


@dataclass(frozen=True)
class ArtifactPlan:
    profile: str
    digest: str
    inputs: dict[str, Any]
    serving_stack: ServingStack  # the profile's serving stack, whose members the build and the checks read
    graph_args: list[str] | None  # the stack's flags that shape the compiled graphs (ServingStack.graph_args)
    out_dir: str  # where the build writes the artifact before publishing it
    models_root: str  # where the bucket is mounted (pods: config.bucket_layout.MOUNT_PATH)
    bucket: str
    local_cache: str | None  # where serving copies the artifact before vLLM starts (the stack's LOCAL_CACHE)

    @property
    def mounted_dir(self) -> str:
        return mounted(artifact_prefix(self.digest), self.models_root)

    def expected(self) -> dict[str, Any]:
        """What the serving init step compares the mounted manifest with."""
        return {"digest": self.digest, "inputs": self.inputs, "profile": self.profile}

    def build(self, options: BuildOptions) -> BuildRecord:
        """Build the artifact into out_dir and record the build there. Each kind of plan builds its own way; which
        kind a profile gets is chosen once, by its stack's ARTIFACT (model_build.artifact.artifact_plan)."""
        raise NotImplementedError(f"{type(self).__name__} cannot build; make the plan with artifact_plan()")

    def check_mounted_argv(self, serve_argv: list[str] | None = None) -> list[str]:
        """Serving's init container command: check the mounted artifact, then copy it to the local cache if the
        stack has one. With a local cache the chart also passes the vLLM command line the pod runs (serve_argv), so
        the check refuses a cache built by another command line; `model_build plan` shows the check without it."""
        return check_mounted.command(
            self.mounted_dir,
            self.expected(),
            copy_to=self.local_cache,
            serve_argv=serve_argv if self.local_cache else None,
        )


def artifact_base(
    config: DeploymentConfig,
    profile: ServingProfile,
    *,
    models_root: str = MOUNT_PATH,
    out_dir: str | None = None,
    bucket: str | None = None,
) -> ArtifactPlan:
    inputs = artifact_inputs(config, profile)
    digest = digest_of(inputs)
    stack = stack_named(profile.image.stack)
    cache = stack.LOCAL_CACHE
    return ArtifactPlan(
        profile=profile.name,
        digest=digest,
        inputs=inputs,
        serving_stack=stack,
        graph_args=stack.graph_args(profile),
        out_dir=out_dir or DEFAULT_OUT.format(digest=digest),
        models_root=models_root,
        bucket=bucket or config.models_bucket_name("<account>"),
        local_cache=cache.path if cache else None,
    )
