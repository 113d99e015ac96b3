"""The in-cluster benchmark Job: valid, on the system nodes, hitting every ClusterIP service, pinned client deps."""

from __future__ import annotations

import re
import shlex

import kubernetes_validate
import pytest

from charts.code_bundle import locked_requirements
from charts.jobs.bench import LOSSLESS, RUNTIME_PACKAGES, SWEEP, bench_script, endpoints, render_bench_job
from tests.charts.conftest import vllm_of_kind
from tests.conftest import EXAMPLE_ACCOUNT


@pytest.fixture(scope="module")
def job(default_config):
    (obj,) = render_bench_job(default_config, EXAMPLE_ACCOUNT, "20261126-000000", ["--requests", "16"])
    return obj


def test_job_validates_against_the_clusters_schemas(job, default_config):
    kubernetes_validate.validate(job, f"{default_config.kubernetes_version}.0", strict=True)


def test_job_benchmarks_every_service_baseline_first(job, default_config, serving_objects):
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    run = shlex.split(script.splitlines()[-1])
    targets = [run[i + 1] for i, a in enumerate(run) if a == "--endpoint"]
    assert targets == endpoints(default_config)
    assert targets[0].startswith("baseline=")
    services = vllm_of_kind(serving_objects, "Service")
    for target in targets:
        name, url = target.split("=", 1)
        assert (
            url
            == f"http://{name}.{default_config.namespace}.svc.cluster.local:{services[name]['spec']['ports'][0]['port']}"
        )
    assert run[-2:] == ["--requests", "16"]
    assert "--cloudwatch" in run and any(a.startswith("s3://") and "/results/" in a for a in run)


def test_job_runs_on_system_nodes_with_the_bench_identity(job):
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"trn-specdec/node-role": "system"}
    assert pod["serviceAccountName"] == "bench" and "tolerations" not in pod


def test_client_dependencies_are_pinned_to_the_lock_file_with_hashes():
    assert RUNTIME_PACKAGES == ("aiohttp", "pydantic", "pyyaml", "boto3")
    pins = dict(re.findall(r"^([a-z0-9_.-]+)==(\S+)", locked_requirements(*RUNTIME_PACKAGES), re.MULTILINE))
    assert {"aiohttp", "pydantic", "pyyaml", "boto3"} <= pins.keys()
    assert all(v[0].isdigit() for v in pins.values())
    assert locked_requirements(*RUNTIME_PACKAGES).count("--hash=sha256:") >= len(pins)


def test_bench_run_command_parses_with_the_bench_cli(default_config):
    from bench.__main__ import build_parser

    line = bench_script(default_config, "bucket", "run1", []).splitlines()[-1]
    args = build_parser().parse_args(shlex.split(line)[3:])
    assert args.command == "run" and len(args.endpoint) == len(default_config.profiles)


def test_the_lossless_job_runs_the_check_and_publishes_nothing(default_config):
    (obj,) = render_bench_job(default_config, EXAMPLE_ACCOUNT, "lossless-20261126-000000", [], mode=LOSSLESS)
    kubernetes_validate.validate(obj, f"{default_config.kubernetes_version}.0", strict=True)
    assert obj["metadata"]["name"] == "bench-lossless-20261126-000000"
    run = shlex.split(obj["spec"]["template"]["spec"]["containers"][0]["command"][2].splitlines()[-1])
    assert "--lossless" in run and "--cloudwatch" not in run
    assert "s3://trn-specdec-models-000000000000-us-east-2/results/lossless-20261126-000000.json" in run


def test_the_sweep_job_runs_bench_sweep_and_uploads_under_its_own_results_prefix(default_config):
    from bench.__main__ import build_parser

    (obj,) = render_bench_job(default_config, EXAMPLE_ACCOUNT, "sweep-20261126-000000", ["--repeats", "2"], mode=SWEEP)
    kubernetes_validate.validate(obj, f"{default_config.kubernetes_version}.0", strict=True)
    assert obj["spec"]["activeDeadlineSeconds"] == 12 * 3600  # a default sweep takes about 6 h on a trn2
    run = shlex.split(obj["spec"]["template"]["spec"]["containers"][0]["command"][2].splitlines()[-1])
    args = build_parser().parse_args(run[3:])
    assert args.command == "sweep" and args.repeats == 2 and args.no_plots and args.cloudwatch
    assert [e.split("=")[0] for e in args.endpoint] == ["baseline", "speculative"]
    assert args.upload == "s3://trn-specdec-models-000000000000-us-east-2/results/sweep-20261126-000000/"
