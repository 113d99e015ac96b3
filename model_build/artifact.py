"""Which build a profile's artifact needs, by the kind its serving stack declares: the one place that chooses.

An NxDI compile (model_build.plan / compile), or the stack's compile cache, filled by running that stack's vLLM
(model_build.compile_cache). Both are ArtifactPlans: they publish, verify and check the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Unpack

from config.profiles import ServingProfile
from config.schema import DeploymentConfig
from model_build.artifact_plan import PlanLocations
from model_build.compile_cache import CachePlan, cache_plan
from model_build.plan import BuildPlan, build_plan
from serving_stacks import stack_named
from serving_stacks.contract import ArtifactKind

PLANS: dict[ArtifactKind, Callable[..., BuildPlan | CachePlan]] = {
    ArtifactKind.NXDI_COMPILE: build_plan,
    ArtifactKind.COMPILE_CACHE: cache_plan,
}


def artifact_plan(
    config: DeploymentConfig, profile: ServingProfile, **where: Unpack[PlanLocations]
) -> BuildPlan | CachePlan:
    make = PLANS[stack_named(profile.image.stack).ARTIFACT]
    return make(config, profile, **where)
