"""The chart `cdk deploy` applies: namespace, shipped code and config, one VllmService per profile, and the
static parts of the model-build and benchmark Jobs."""

from __future__ import annotations

import cdk8s
from cdk8s_plus_34 import k8s
from constructs import Construct

from charts.bench_job import BenchmarkSupport
from charts.code_bundle import CodeBundle, ConfigFile
from charts.model_build_job import ModelBuildSupport
from charts.vllm_service import VllmService
from config.schema import DeploymentConfig

# The stdlib-only manifest check the serving init container runs (model_build/check_mounted.py).
VERIFY_CODE = ["model_build/__init__.py", "model_build/manifest.py", "model_build/check_mounted.py"]


class ServingChart(cdk8s.Chart):
    """Adding a profile to the config adds a service here; there is no per-profile code."""

    def __init__(self, scope: Construct, chart_id: str, *, config: DeploymentConfig, bucket_name: str) -> None:
        super().__init__(scope, chart_id, namespace=config.namespace, disable_resource_name_hashes=True)
        self.namespace_object = k8s.KubeNamespace(
            self,
            "Namespace",
            metadata=k8s.ObjectMeta(name=config.namespace, labels={"app.kubernetes.io/part-of": "trn-specdec"}),
        )
        self.code = CodeBundle(self, "VerifyCode", name="trn-specdec-verify-code", files=VERIFY_CODE)
        self.services = {
            p.name: VllmService(self, p.name, config=config, profile=p, bucket_name=bucket_name, code=self.code)
            for p in config.profiles
        }
        self.config_file = ConfigFile(self, "Config", config=config)
        self.build_support = ModelBuildSupport(self, "Build", config=config, bucket_name=bucket_name)
        self.bench_support = BenchmarkSupport(self, "Bench")
        for child in [*self.services.values(), self.code, self.config_file, self.build_support, self.bench_support]:
            child.node.add_dependency(self.namespace_object)
