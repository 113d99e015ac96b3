"""What every stack's artifact plan shares: its digest and inputs, where it is built, published and mounted, and
the init check serving runs against it. BuildPlan (NxDI compile) and CachePlan (compile cache) extend it.

The serving chart renders its init container from `artifact_base(...).check_mounted_argv()`, and `model_build
plan` shows the same method's result, so the check a pod runs and the one the plan shows cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from config.bucket_layout import MOUNT_PATH, artifact_prefix, mounted
from config.schema import DeploymentConfig, ServingProfile
from model_build import check_mounted
from model_build.digest import artifact_inputs, digest_of
from serving_stacks import stack_named

DEFAULT_OUT = "/tmp/trn-specdec/artifacts/{digest}"


@dataclass(frozen=True)
class ArtifactPlan:
    profile: str
    digest: str
    inputs: dict[str, Any]
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
    cache = stack_named(profile.image.stack).LOCAL_CACHE
    return ArtifactPlan(
        profile=profile.name,
        digest=digest,
        inputs=inputs,
        out_dir=out_dir or DEFAULT_OUT.format(digest=digest),
        models_root=models_root,
        bucket=bucket or config.models_bucket_name("<account>"),
        local_cache=cache.path if cache else None,
    )
