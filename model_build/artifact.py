"""Which build a profile's artifact needs, by its serving stack: the one place that chooses.

legacy-v0: an NxDI compile (model_build.plan / compile). vllm-neuron: the plugin's compile cache, filled by
running that stack's vLLM (model_build.compile_cache). Both publish, verify and check the same way.
"""

from __future__ import annotations

from config.schema import DeploymentConfig, ServingProfile
from model_build.compile_cache import CachePlan, cache_plan
from model_build.plan import DEFAULT_MODELS_ROOT, BuildPlan, build_plan
from serving_stacks import legacy_v0


def artifact_plan(
    config: DeploymentConfig,
    profile: ServingProfile,
    *,
    models_root: str = DEFAULT_MODELS_ROOT,
    out_dir: str | None = None,
    bucket: str | None = None,
) -> BuildPlan | CachePlan:
    make = build_plan if profile.image.stack == legacy_v0.NAME else cache_plan
    return make(config, profile, models_root=models_root, out_dir=out_dir, bucket=bucket)
