"""The artifact plan both stacks share: the init check `model_build plan` shows is the one the rendered pod runs."""

from __future__ import annotations

import pytest

from charts import render_serving
from charts.vllm_args import vllm_args
from config import DeploymentConfig
from model_build.artifact import artifact_plan
from model_build.artifact_plan import BuildOptions
from model_build.compile_cache import CachePlan
from model_build.errors import BuildError
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


@pytest.mark.parametrize("config_name", ["default_config", "plugin_config"])
def test_the_plan_carries_the_graph_arguments_the_rendered_command_line_has(request, config_name):
    """The typed field, checked against the rendered vLLM args (not the stack's function): a compile-cache profile's
    graph arguments stand in its command line, in order; an NxDI profile has none (its keywords are digest inputs)."""
    config: DeploymentConfig = request.getfixturevalue(config_name)
    for profile in config.profiles:
        plan = artifact_plan(config, profile)
        args = vllm_args(config, profile)
        if isinstance(plan, BuildPlan):
            assert plan.graph_args is None
            continue
        graph = plan.graph_args
        assert graph and any(args[i : i + len(graph)] == graph for i in range(len(args))), profile.name
        assert plan.inputs["graph_args"] == graph  # the digest covers what the build refuses a command line by


def test_each_kind_of_plan_builds_its_own_way(default_config, plugin_config, tmp_path):
    """`model_build compile` calls plan.build(): the NxDI plan imports NxDI (absent here), the compile-cache plan
    wants the serving command line; neither asks which stack it is."""
    nxdi = artifact_plan(default_config, default_config.profiles[0], out_dir=str(tmp_path / "a"))
    with pytest.raises(BuildError, match=r"compile needs NxDI \(neuronx-distributed-inference\)"):
        nxdi.build(BuildOptions())
    cache = artifact_plan(plugin_config, plugin_config.profiles[0], out_dir=str(tmp_path / "b"))
    with pytest.raises(BuildError, match="builds its compile cache by running vLLM with the serving command line"):
        cache.build(BuildOptions())
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
