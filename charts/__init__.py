"""cdk8s charts: the vLLM services (one construct, many profiles), the model-build Job, the benchmark Job.

`render_groups` is the one place the deployed charts are built; the workloads stack applies each group
through the cluster's kubectl provider and `make synth` writes the same objects to dist/ as YAML.
"""

from __future__ import annotations

from typing import Any

from charts.serving_chart import render_groups
from config.schema import DeploymentConfig


def render_serving(config: DeploymentConfig, bucket_name: str) -> list[dict[str, Any]]:
    """All deployed Kubernetes objects, namespace first (kubectl applies them in order)."""
    return [obj for group in render_groups(config, bucket_name).values() for obj in group]
