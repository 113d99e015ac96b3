"""What `cdk deploy` applies, as a few charts: a base (namespace, config, the init check's code), one per
serving profile, the code archive all Jobs share, and the static parts of the model-build, checkpoint-staging and
benchmark Jobs. Each chart becomes its own manifest resource, so none nears the kubectl handler's payload limit and
a profile's objects stay together."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cdk8s
from cdk8s_plus_34 import k8s
from constructs import Construct

from charts.code_bundle import CodeBundle, ConfigFile, SharedCode, python_files
from charts.endpoint import LABELS as ENDPOINT_LABELS
from charts.endpoint import Endpoint
from charts.jobs.bench import BENCH_LABELS, BenchmarkRequirements, BenchmarkSupport
from charts.jobs.model_build import ModelBuildCode, ModelBuildSupport
from charts.jobs.stage import STAGE_SERVICE_ACCOUNT
from charts.pod_security import network_policies
from charts.vllm_service import VllmService
from config.labels import PART_OF, PROJECT
from config.schema import DeploymentConfig

# What the serving pods run besides vLLM: the in-pod package (serving_pod/: the init check, the start-up guard the
# vllm-neuron container runs vLLM under, the manifest format they read) with the one leaf of ours it imports, the
# bucket layout it reads the manifest's name from.
VERIFY_CODE = ["config/__init__.py", "config/bucket_layout.py", *python_files("serving_pod")]
BASE = "base"


class BaseChart(cdk8s.Chart):
    def __init__(self, scope: Construct, chart_id: str, *, config: DeploymentConfig) -> None:
        super().__init__(scope, chart_id, namespace=config.namespace, disable_resource_name_hashes=True)
        self.namespace_object = k8s.KubeNamespace(
            self,
            "Namespace",
            metadata=k8s.ObjectMeta(name=config.namespace, labels={PART_OF: PROJECT}),
        )
        self.config_file = ConfigFile(self, "Config", config=config)
        self.verify_code = CodeBundle(self, "VerifyCode", name="trn-specdec-verify-code", files=VERIFY_CODE)
        self.network_policies = [
            k8s.KubeNetworkPolicy(self, name, metadata=k8s.ObjectMeta(name=name), spec=spec)
            for name, spec in network_policies([p.port for p in config.profiles], [ENDPOINT_LABELS, BENCH_LABELS])
        ]
        for child in (self.config_file, self.verify_code, *self.network_policies):
            child.node.add_dependency(self.namespace_object)


def render_groups(config: DeploymentConfig, bucket_name: str) -> dict[str, list[dict[str, Any]]]:
    """Kubernetes objects by group, base first; adding a profile adds a group, with no code change."""
    app = cdk8s.App()
    base = BaseChart(app, BASE, config=config)
    groups = {BASE: base.to_json()}

    def group(chart_id: str, *parts: Callable[[cdk8s.Chart], object]) -> None:
        """One chart in the namespace holding `parts`, rendered as one group."""
        chart = cdk8s.Chart(app, chart_id, namespace=config.namespace, disable_resource_name_hashes=True)
        for part in parts:
            part(chart)
        groups[chart_id] = chart.to_json()

    for p in config.profiles:
        group(
            f"service-{p.name}",
            lambda c, p=p: VllmService(
                c, p.name, config=config, profile=p, bucket_name=bucket_name, code=base.verify_code
            ),
        )
    if config.endpoint.enabled:  # one OpenAI endpoint in front of the profiles (charts/endpoint.py)
        group("endpoint", lambda c: Endpoint(c, "Endpoint", config=config))
    group("shared-code", lambda c: SharedCode(c, "Shared"))
    group("model-build-code", lambda c: ModelBuildCode(c, "Build"))
    group(
        "model-build",
        lambda c: ModelBuildSupport(c, "Build", config=config, bucket_name=bucket_name),
        lambda c: k8s.KubeServiceAccount(c, "Stage", metadata=k8s.ObjectMeta(name=STAGE_SERVICE_ACCOUNT)),
    )
    group("bench", lambda c: BenchmarkSupport(c, "Bench"))
    group("bench-requirements", lambda c: BenchmarkRequirements(c, "Requirements"))
    return groups
