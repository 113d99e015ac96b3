"""CDK stacks. `add_stacks` is the one place that wires config -> stacks (used by app.py and tests)."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import App, Environment, Tags

from config.schema import DeploymentConfig
from stacks.cluster_stack import ClusterStack
from stacks.models_stack import ModelsStack
from stacks.observability_stack import ObservabilityStack
from stacks.workloads_stack import WorkloadsStack


@dataclass(frozen=True)
class Stacks:
    models: ModelsStack
    cluster: ClusterStack
    workloads: WorkloadsStack
    observability: ObservabilityStack

    def all(self) -> list:
        return [self.models, self.cluster, self.workloads, self.observability]


def add_stacks(app: App, config: DeploymentConfig) -> Stacks:
    """Create every stack for `config`. Region-pinned, account-agnostic: synth needs no credentials."""
    env = Environment(region=config.region)
    names = config.stack_names
    models = ModelsStack(app, names["models"], config=config, env=env, description="trn-specdec models bucket")
    cluster = ClusterStack(
        app,
        names["cluster"],
        config=config,
        env=env,
        description="trn-specdec EKS cluster with Trainium2 nodes and the Neuron DRA driver",
    )
    cluster.add_stack_dependency(models, "the bucket exists before any pod on the cluster mounts it")
    workloads = WorkloadsStack(
        app,
        names["workloads"],
        config=config,
        cluster_stack=cluster,
        env=env,
        description="trn-specdec vLLM services (baseline and speculative) and their IAM roles",
    )
    observability = ObservabilityStack(
        app,
        names["observability"],
        config=config,
        metrics_workspace_arn=cluster.metrics.workspace.attr_arn,
        env=env,
        description="trn-specdec benchmark dashboard, serving alarms and alert rules",
    )
    stacks = Stacks(models=models, cluster=cluster, workloads=workloads, observability=observability)
    for stack in stacks.all():
        for key, value in config.tags.items():
            Tags.of(stack).add(key, value)
    return stacks
