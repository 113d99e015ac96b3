"""The one Job skeleton (charts/jobs/job.py): every run-time Job (stage, build, bench in each mode) renders from it, so
they share the script prelude, the code's environment and volumes, and the pod's fixed fields."""

from __future__ import annotations

import shlex
from datetime import timedelta

import cdk8s
import kubernetes_validate
import pytest
from cdk8s_plus_34 import k8s

from charts.code_bundle import unpack_command
from charts.jobs.bench import LOSSLESS, RUN, SWEEP, render_bench_job
from charts.jobs.job import ScriptJob, code_volumes, job_script, scratch_volume
from charts.jobs.model_build import render_build_job
from charts.jobs.stage import render_stage_job
from tests.conftest import EXAMPLE_ACCOUNT

ACCOUNT = EXAMPLE_ACCOUNT


def _jobs(config) -> dict[str, dict]:
    jobs = {"stage": render_stage_job(config, sorted(config.models), ACCOUNT)[0]}
    jobs |= {f"build {p.name}": render_build_job(config, p.name, ACCOUNT)[0] for p in config.profiles}
    for mode, run_id in ((RUN, "r1"), (LOSSLESS, "lossless-r1"), (SWEEP, "sweep-r1")):
        jobs[f"bench {run_id}"] = render_bench_job(config, ACCOUNT, run_id, [], mode=mode)[0]
    return jobs


@pytest.fixture(scope="module", params=["default", "plugin"])
def jobs(request, default_config, plugin_config) -> dict[str, dict]:
    return _jobs(default_config if request.param == "default" else plugin_config)


def _pod(job: dict) -> dict:
    return job["spec"]["template"]["spec"]


def test_every_job_runs_its_steps_after_the_same_prelude(jobs):
    for name, job in jobs.items():
        (container,) = _pod(job)["containers"]
        assert container["command"][:2] == ["/bin/bash", "-c"], name
        lines = [line for line in container["command"][2].splitlines() if not line.startswith("trap ")]
        assert lines[0] == "set -euo pipefail", name
        assert lines[1] == unpack_command(), name
        assert "pip install --quiet --no-cache-dir --disable-pip-version-check --require-hashes" in lines[2], name


def test_every_job_mounts_each_of_its_volumes_and_has_the_shipped_code(jobs):
    for name, job in jobs.items():
        pod = _pod(job)
        (container,) = pod["containers"]
        mounted = [m["name"] for m in container["volumeMounts"]]
        assert mounted == [v["name"] for v in pod["volumes"]], name
        assert {"code", "shared-code", "config"} <= set(mounted), name
        assert [e["name"] for e in container["env"][:3]] == ["PYTHONPATH", "PYTHONUNBUFFERED", "AWS_REGION"], name
        assert pod["restartPolicy"] == "Never", name


def test_every_job_is_a_valid_kubernetes_job(jobs, default_config):
    for job in jobs.values():
        kubernetes_validate.validate(job, f"{default_config.kubernetes_version}.0", strict=True)


def test_durations_render_as_whole_seconds_and_a_trap_runs_on_exit():
    app = cdk8s.App()
    chart = cdk8s.Chart(app, "c", disable_resource_name_hashes=True)
    script = job_script(requirements="/r.txt", steps=["echo done"], on_exit="rm -rf /scratch/x /scratch/y")
    ScriptJob(
        chart,
        "job",
        name="j",
        labels={"app": "j"},
        container="c",
        image="img",
        script=script,
        region="us-east-2",
        service_account="sa",
        placement={"node_selector": {"role": "system"}},
        resources=k8s.ResourceRequirements(),
        security_context=k8s.SecurityContext(),
        volumes=[scratch_volume(3), *code_volumes("own-code")],
        retries=0,
        deadline=timedelta(hours=1, minutes=30),
        keep_finished=timedelta(days=2),
    )
    (job,) = chart.to_json()
    assert job["spec"]["activeDeadlineSeconds"] == 5400
    assert job["spec"]["ttlSecondsAfterFinished"] == 2 * 24 * 3600
    assert script.splitlines()[1] == "trap 'rm -rf /scratch/x /scratch/y' EXIT"
    assert shlex.split(script.splitlines()[1])[1] == "rm -rf /scratch/x /scratch/y"
    assert script.splitlines()[-1] == "echo done"
    pod = _pod(job)
    assert pod["nodeSelector"] == {"role": "system"}
    assert pod["volumes"][0] == {"name": "scratch", "emptyDir": {"sizeLimit": "3Gi"}}
    assert pod["containers"][0]["volumeMounts"][0] == {"name": "scratch", "mountPath": "/scratch"}


def test_each_bench_mode_has_its_own_deadline(default_config):
    deadlines = {
        mode.command + mode.run_id_prefix: render_bench_job(default_config, ACCOUNT, "r", [], mode=mode)[0]["spec"][
            "activeDeadlineSeconds"
        ]
        for mode in (RUN, LOSSLESS, SWEEP)
    }
    assert deadlines == {"run": 4 * 3600, "runlossless-": 4 * 3600, "sweepsweep-": 12 * 3600}
