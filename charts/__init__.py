"""cdk8s charts, in two kinds: what `cdk deploy` applies, and the run-time Jobs that `make` renders.

Deployed: `render_groups` (charts/serving_chart.py) builds the serving charts (namespace, per-profile Deployment,
Service, claim template, the init check's code, the endpoint, the Jobs' static parts); the workloads stack
applies each group through the cluster's kubectl provider and `make synth` writes the same objects to
dist/serving.yaml. That is not all `cdk deploy` applies: the ScaledObjects and the scraper's RBAC
(`render_autoscaling`), the Helm charts and the IAM roles come from the stacks alone.
Run time: charts/jobs/ renders the stage, build and bench Jobs on one skeleton; ops/ applies them with kubectl.
"""

from __future__ import annotations

from typing import Any

from charts.serving_chart import render_groups
from config.schema import DeploymentConfig


def render_serving(config: DeploymentConfig, bucket_name: str) -> list[dict[str, Any]]:
    """All deployed Kubernetes objects, namespace first (kubectl applies them in order)."""
    return [obj for group in render_groups(config, bucket_name).values() for obj in group]
