"""The checkpoint-staging Job: valid for the cluster's schemas, on the Trainium2 node without devices, bounded."""

from __future__ import annotations

import shlex

import kubernetes_validate
import pytest

from charts.jobs.stage import (
    STAGE_CPU,
    STAGE_MEMORY_GIB,
    STAGE_SERVICE_ACCOUNT,
    render_stage_job,
    stage_job_name,
    stage_script,
)
from charts.neuron_claim import node_share
from config import parse_config
from model_build.cli import build_parser
from tests.charts.conftest import of_kind
from tests.conftest import EXAMPLE_ACCOUNT, default_config_dict

KEYS = ["qwen3-32b", "qwen3-1-7b"]


@pytest.fixture(scope="module")
def job(default_config):
    (job,) = render_stage_job(default_config, KEYS, EXAMPLE_ACCOUNT)
    return job


def test_job_validates_against_the_clusters_schemas(job, default_config):
    kubernetes_validate.validate(job, f"{default_config.kubernetes_version}.0", strict=True)


def test_job_runs_on_the_trn2_node_in_the_serving_image_without_devices(job, serving_objects, default_config):
    deployment = of_kind(serving_objects, "Deployment")["baseline"]["spec"]["template"]["spec"]
    pod = job["spec"]["template"]["spec"]
    assert pod["tolerations"] == deployment["tolerations"]
    assert pod["nodeSelector"] == deployment["nodeSelector"]
    assert "resourceClaims" not in pod and "claims" not in pod["containers"][0]["resources"]
    assert pod["containers"][0]["image"] == deployment["containers"][0]["image"]
    # It fits next to services that hold every device of the node.
    instance = default_config.trn2_nodes.instance
    cpu, memory = node_share(instance, instance.devices)
    assert cpu + STAGE_CPU <= instance.vcpus - 4 and memory + STAGE_MEMORY_GIB <= instance.memory_gib * 0.9


def test_job_uses_the_deployed_service_account_and_code(job, serving_objects):
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == STAGE_SERVICE_ACCOUNT in of_kind(serving_objects, "ServiceAccount")
    config_maps = of_kind(serving_objects, "ConfigMap")
    for volume in pod["volumes"]:
        if "configMap" in volume:
            assert volume["configMap"]["name"] in config_maps


def test_job_is_bounded_and_named_by_the_pinned_models(job, default_config):
    assert job["spec"]["backoffLimit"] == 2 and job["spec"]["activeDeadlineSeconds"] == 4 * 3600
    assert job["metadata"]["name"] == stage_job_name(default_config, list(reversed(KEYS)))
    data = default_config_dict()
    data["models"]["qwen3-1-7b"]["revision"] = "0123456789abcdef0123456789abcdef01234567"
    assert stage_job_name(parse_config(data), KEYS) != job["metadata"]["name"]


def test_the_script_stages_exactly_the_requested_models_with_the_cli():
    (line,) = [x for x in stage_script(["qwen3-1-7b"], "bucket").splitlines() if x.startswith("python3 -m model_build")]
    args = build_parser().parse_args(shlex.split(line)[3:])
    assert (args.model, args.bucket, args.scratch) == (["qwen3-1-7b"], "bucket", "/scratch/hf")
    assert stage_script(KEYS, "b").splitlines()[0] == "set -euo pipefail"
