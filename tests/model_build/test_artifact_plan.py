"""The artifact plan both stacks share: the init check `model_build plan` shows is the one the rendered pod runs."""

from __future__ import annotations

import pytest

from charts import render_serving
from charts.vllm_args import vllm_args
from config import DeploymentConfig
from model_build.artifact import artifact_plan
from model_build.compile_cache import CachePlan
from model_build.plan import BuildPlan


@pytest.mark.parametrize(("config_name", "kind"), [("default_config", BuildPlan), ("plugin_config", CachePlan)])
def test_the_plans_init_check_is_the_one_the_rendered_deployment_runs(request, config_name, kind):
    """Compare with the rendered Deployment, not with the plan itself; both stacks, so a copy to the local cache
    (vllm-neuron) is covered as well as a check of the mount alone (legacy-v0). The pod's own vLLM command line is
    the one input the plan cannot know (model_build may not import charts): the chart passes it."""
    config: DeploymentConfig = request.getfixturevalue(config_name)
    deployments = {o["metadata"]["name"]: o for o in render_serving(config, "b") if o["kind"] == "Deployment"}
    for profile in config.profiles:
        (init,) = deployments[profile.name]["spec"]["template"]["spec"]["initContainers"]
        plan = artifact_plan(config, profile)
        assert isinstance(plan, kind)
        assert plan.check_mounted_argv(serve_argv=["vllm", *vllm_args(config, profile)]) == init["command"]


def test_a_stack_with_a_local_cache_copies_the_checked_artifact_there(plugin_config):
    mounts = {}
    for profile in plugin_config.profiles:
        argv = artifact_plan(plugin_config, profile).check_mounted_argv()
        mounts[profile.name] = argv[argv.index("--copy-to") + 1]
    assert set(mounts.values()) == {"/cache/vllm-cache"}


def test_a_stack_without_one_checks_the_mount_alone(default_config):
    for profile in default_config.profiles:
        assert "--copy-to" not in artifact_plan(default_config, profile).check_mounted_argv()
