"""cdk8s charts: the vLLM services (one construct, many profiles), the model-build Job, the benchmark Job.

`render` is the one place charts are built; the workloads stack applies its output through the
cluster's kubectl provider and `python -m charts` writes the same objects to dist/ as YAML.
"""

from __future__ import annotations

from typing import Any

import cdk8s

from charts.serving_chart import ServingChart
from config.schema import DeploymentConfig


def render_serving(config: DeploymentConfig, bucket_name: str) -> list[dict[str, Any]]:
    """Kubernetes objects of the serving chart, namespace first (kubectl applies them in order)."""
    app = cdk8s.App()
    chart = ServingChart(app, "serving", config=config, bucket_name=bucket_name)
    return chart.to_json()
