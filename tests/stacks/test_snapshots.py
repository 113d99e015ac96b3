"""Snapshots of every stack's template (asset hashes normalised). Update with `pytest --snapshot-update`."""

from __future__ import annotations

import pytest

from tests.conftest import normalise_template


@pytest.mark.parametrize("stack", ["Models", "Cluster", "Workloads", "Observability"])
def test_template_matches_snapshot(synth, stack, snapshot):
    template = normalise_template(synth.template(stack))
    for resource in template["Resources"].values():
        if resource["Type"] == "Custom::AWSCDK-EKS-KubernetesResource":
            resource["Properties"]["Manifest"] = "<the rendered objects: see tests/charts/__snapshots__>"
    assert template == snapshot
