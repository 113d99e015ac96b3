"""The fake kubectl (tests/ops/fake_cluster.py) on PATH, with or without cluster state."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from tests.conftest import default_config_dict
from tests.ops.fake_cluster import cluster_state, install_kubectl


@pytest.fixture
def fake_kubectl(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    install_kubectl(bin_dir)
    log = tmp_path / "kubectl.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_KUBECTL_LOG", str(log))

    def calls() -> list[list[str]]:
        """The logged argument lists. Each call but the log stream (`logs -f` must outlive any request timeout)
        ends with the request timeout, which is then left out."""
        logged = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        assert all((c[-1] == "--request-timeout=20s") != (c[2:4] == ["logs", "-f"]) for c in logged), logged
        return [c[:-1] if c[2:4] != ["logs", "-f"] else c for c in logged]

    return calls


@pytest.fixture
def fake_cluster(fake_kubectl, tmp_path, monkeypatch):
    """The fake kubectl with state: one serving pod per profile, and with `scaled` a ScaledObject (minReplicaCount 1)
    that KEDA reconciles between calls. Returns a reader of the state."""
    path = tmp_path / "cluster.json"

    def make(profiles: list[str], *, scaled: bool) -> None:
        path.write_text(json.dumps(cluster_state(profiles, scaled=scaled)))
        monkeypatch.setenv("FAKE_CLUSTER", str(path))

    def state() -> dict:
        return json.loads(path.read_text())

    make.state = state  # type: ignore[attr-defined]
    return make


@pytest.fixture
def unscaled_config(tmp_path) -> Path:
    """The default config with autoscaling off, as a file: no ScaledObjects, the ops commands scale Deployments."""
    data = default_config_dict()
    data["scaling"] = {"enabled": False}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
