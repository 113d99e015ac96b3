from __future__ import annotations

from typing import Any

import pytest

from charts import render_serving
from config import DeploymentConfig

TEST_BUCKET = "trn-specdec-models-000000000000-us-east-2"
QUERY_URL = "https://aps-workspaces.us-east-2.amazonaws.com/workspaces/ws-00000000-0000-0000-0000-000000000000"


@pytest.fixture(scope="session")
def serving_objects(default_config: DeploymentConfig) -> list[dict[str, Any]]:
    return render_serving(default_config, TEST_BUCKET)


@pytest.fixture(scope="session")
def plugin_serving_objects(plugin_config: DeploymentConfig) -> list[dict[str, Any]]:
    """config/vllm-neuron.yaml rendered once per session (read only, like serving_objects)."""
    return render_serving(plugin_config, TEST_BUCKET)


def of_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def vllm_of_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """The vLLM services' objects of a kind (not the endpoint's router), by name."""
    return {
        n: o
        for n, o in of_kind(objects, kind).items()
        if o["metadata"]["labels"].get("app.kubernetes.io/name") == "vllm"
    }
