"""The model-build Job: valid for the cluster's schemas, same image and claim shape as its service, bounded."""

from __future__ import annotations

import kubernetes_validate
import pytest

from charts.jobs.model_build import build_claim_template, build_job_name, build_script, render_build_job
from model_build.digest import profile_digest
from tests.charts.conftest import of_kind, vllm_of_kind
from tests.conftest import EXAMPLE_ACCOUNT


@pytest.fixture(scope="module")
def jobs(default_config):
    return {p.name: render_build_job(default_config, p.name, EXAMPLE_ACCOUNT) for p in default_config.profiles}


def test_job_validates_against_the_clusters_schemas(jobs, default_config):
    for objects in jobs.values():
        (job,) = objects
        kubernetes_validate.validate(job, f"{default_config.kubernetes_version}.0", strict=True)


def test_job_uses_the_services_image_and_claim_shape(jobs, serving_objects, default_config):
    claims = of_kind(serving_objects, "ResourceClaimTemplate")
    deployments = vllm_of_kind(serving_objects, "Deployment")
    for p in default_config.profiles:
        (job,) = jobs[p.name]
        pod = job["spec"]["template"]["spec"]
        assert (
            pod["containers"][0]["image"] == deployments[p.name]["spec"]["template"]["spec"]["containers"][0]["image"]
        )
        (claim_ref,) = pod["resourceClaims"]
        assert claim_ref["resourceClaimTemplateName"] == build_claim_template(p)
        assert claims[build_claim_template(p)]["spec"] == claims[f"{p.name}-neuron"]["spec"]
        assert pod["tolerations"] == deployments[p.name]["spec"]["template"]["spec"]["tolerations"]


def test_job_is_named_by_its_digest_and_bounded(jobs, default_config):
    for p in default_config.profiles:
        (job,) = jobs[p.name]
        assert job["metadata"]["name"] == build_job_name(default_config, p)
        assert profile_digest(default_config, p)[:12] in job["metadata"]["name"]
        assert job["spec"]["backoffLimit"] == 1 and job["spec"]["activeDeadlineSeconds"] == 6 * 3600
        assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_job_compiles_then_publishes_then_verifies(default_config):
    p = default_config.profile("speculative")
    script = build_script(default_config, p, "bucket").splitlines()
    commands = [line.split() for line in script if line.startswith("python3 -m model_build")]
    steps = [next(w for w in words if w in {"plan", "compile", "publish", "verify"}) for words in commands]
    assert steps == ["plan", "compile", "publish", "verify"]
    assert all(words[words.index(step) + 1] == "speculative" for words, step in zip(commands, steps, strict=True))
    assert script[0] == "set -euo pipefail"


def test_build_support_objects_are_deployed_with_the_serving_chart(serving_objects, default_config):
    accounts = of_kind(serving_objects, "ServiceAccount")
    for p in default_config.profiles:
        assert f"{p.name}-build" in accounts
        assert f"{p.name}-build-models" in of_kind(serving_objects, "PersistentVolumeClaim")
    config_maps = of_kind(serving_objects, "ConfigMap")
    assert "config.yaml" in config_maps["trn-specdec-config"]["data"]
    assert "code.tar.gz" in config_maps["trn-specdec-build-code"]["binaryData"]


def test_shipped_config_round_trips_to_the_same_config(serving_objects, default_config):
    import yaml

    from config import parse_config

    text = of_kind(serving_objects, "ConfigMap")["trn-specdec-config"]["data"]["config.yaml"]
    assert parse_config(yaml.safe_load(text)) == default_config


def test_unknown_profile_is_a_clear_error(default_config):
    from config import ConfigError

    with pytest.raises(ConfigError, match="no profile named 'nope'"):
        render_build_job(default_config, "nope", EXAMPLE_ACCOUNT)


def test_every_job_command_parses_with_the_model_build_cli(default_config):
    import shlex

    from model_build.cli import build_parser

    parser = build_parser()
    for p in default_config.profiles:
        for line in build_script(default_config, p, "bucket").splitlines():
            if line.startswith("python3 -m model_build"):
                args = parser.parse_args(shlex.split(line)[3:])
                assert args.profile == p.name and args.bucket == "bucket" and args.models_root == "/models"


def test_a_vllm_neuron_build_runs_the_deployments_own_command_line():
    """The compile cache is filled by exactly the vLLM command line the service runs."""
    import shlex

    from charts import render_serving
    from config import load_config
    from model_build.cli import build_parser
    from tests.conftest import ROOT
    from tests.engine.command_lines import vllm_argv

    config = load_config(ROOT / "config" / "vllm-neuron.yaml")
    deployments = {o["metadata"]["name"]: o for o in render_serving(config, "bucket") if o["kind"] == "Deployment"}
    parser = build_parser()
    for p in config.profiles:
        (line,) = [x for x in build_script(config, p, "bucket").splitlines() if " compile " in x]
        args = parser.parse_args(shlex.split(line)[3:])
        (vllm,) = [c for c in deployments[p.name]["spec"]["template"]["spec"]["containers"] if c["name"] == "vllm"]
        assert args.vllm_argv_json == vllm_argv(vllm)  # what the start-up guard runs (parsed: a list)
        assert args.port == p.port
