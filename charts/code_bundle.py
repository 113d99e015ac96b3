"""Project code shipped to pods as a ConfigMap, so jobs and init steps run in the stock Neuron image.

No custom image build and no Docker on the deployer's machine: the files are read at synth time,
versioned with the deployment, and mounted read-only under CODE_PATH (PYTHONPATH).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import yaml
from cdk8s_plus_34 import k8s
from constructs import Construct

from config.schema import DeploymentConfig

ROOT = Path(__file__).resolve().parents[1]
CODE_PATH = "/opt/trn-specdec"
CONFIG_PATH = "/etc/trn-specdec"  # config.yaml: the effective deployment config, for jobs that read it
CONFIG_CONFIG_MAP = "trn-specdec-config"
CONFIGMAP_LIMIT = 1_000_000  # bytes; Kubernetes rejects larger ConfigMaps


def lock_pins(*names: str) -> list[str]:
    """`name==version` as requirements.lock pins them, for jobs that pip-install into a stock image."""
    lock = (ROOT / "requirements.lock").read_text()
    pins = []
    for name in names:
        match = re.search(rf"^{re.escape(name)}==([^\s\\]+)", lock, re.MULTILINE)
        if not match:
            raise ValueError(f"{name} is not pinned in requirements.lock; add it to pyproject.toml and relock")
        pins.append(f"{name}=={match.group(1)}")
    return pins


def python_files(*packages: str) -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for pkg in packages for p in (ROOT / pkg).glob("*.py"))


class CodeBundle(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, name: str, files: list[str]) -> None:
        super().__init__(scope, construct_id)
        self.name = name
        self.files = sorted(files)
        data = {_key(f): (ROOT / f).read_text() for f in self.files}
        size = sum(len(v.encode()) for v in data.values())
        if size > CONFIGMAP_LIMIT:
            raise ValueError(f"code bundle {name} is {size} bytes, over the ConfigMap limit of {CONFIGMAP_LIMIT}")
        self.digest = hashlib.sha256("".join(f"{k}\0{v}\0" for k, v in sorted(data.items())).encode()).hexdigest()
        self.config_map = k8s.KubeConfigMap(self, "ConfigMap", metadata=k8s.ObjectMeta(name=name), data=data)

    def volume(self, volume_name: str = "code") -> k8s.Volume:
        return code_volume(self.name, self.files, volume_name)


class ConfigFile(Construct):
    """The effective config as config.yaml, so jobs in the cluster read the same values as `cdk deploy`."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig) -> None:
        super().__init__(scope, construct_id)
        self.config_map = k8s.KubeConfigMap(
            self,
            "ConfigMap",
            metadata=k8s.ObjectMeta(name=CONFIG_CONFIG_MAP),
            data={"config.yaml": yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)},
        )

    @staticmethod
    def volume(volume_name: str = "config") -> k8s.Volume:
        return k8s.Volume(name=volume_name, config_map=k8s.ConfigMapVolumeSource(name=CONFIG_CONFIG_MAP))


def code_volume(config_map: str, files: list[str], volume_name: str = "code") -> k8s.Volume:
    """Mount a CodeBundle's ConfigMap with its files at their package paths (keys cannot hold '/')."""
    return k8s.Volume(
        name=volume_name,
        config_map=k8s.ConfigMapVolumeSource(
            name=config_map, items=[k8s.KeyToPath(key=_key(f), path=f) for f in files]
        ),
    )


def _key(path: str) -> str:
    return path.replace("/", "__")
