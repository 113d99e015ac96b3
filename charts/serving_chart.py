"""What `cdk deploy` applies, as a few charts: a base (namespace, config, the init check's code), one per
serving profile, the code archive all Jobs share, and the static parts of the model-build, checkpoint-staging and
benchmark Jobs. Each chart becomes its own manifest resource, so none nears the kubectl handler's payload limit and
a profile's objects stay together."""

from __future__ import annotations

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


def _chart(app: cdk8s.App, chart_id: str, config: DeploymentConfig) -> cdk8s.Chart:
    return cdk8s.Chart(app, chart_id, namespace=config.namespace, disable_resource_name_hashes=True)


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
    for profile in config.profiles:
        chart = _chart(app, f"service-{profile.name}", config)
        VllmService(chart, profile.name, config=config, profile=profile, bucket_name=bucket_name, code=base.verify_code)
        groups[chart.node.id] = chart.to_json()
    if config.endpoint.enabled:  # one OpenAI endpoint in front of the profiles (charts/endpoint.py)
        endpoint = _chart(app, "endpoint", config)
        Endpoint(endpoint, "Endpoint", config=config)
        groups[endpoint.node.id] = endpoint.to_json()
    shared_code = _chart(app, "shared-code", config)
    SharedCode(shared_code, "Shared")
    groups[shared_code.node.id] = shared_code.to_json()
    build_code = _chart(app, "model-build-code", config)
    ModelBuildCode(build_code, "Build")
    groups[build_code.node.id] = build_code.to_json()
    build = _chart(app, "model-build", config)
    ModelBuildSupport(build, "Build", config=config, bucket_name=bucket_name)
    k8s.KubeServiceAccount(build, "Stage", metadata=k8s.ObjectMeta(name=STAGE_SERVICE_ACCOUNT))
    groups[build.node.id] = build.to_json()
    bench = _chart(app, "bench", config)
    BenchmarkSupport(bench, "Bench")
    groups[bench.node.id] = bench.to_json()
    requirements = _chart(app, "bench-requirements", config)
    BenchmarkRequirements(requirements, "Requirements")
    groups[requirements.node.id] = requirements.to_json()
    return groups
