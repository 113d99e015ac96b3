"""`make build`'s orchestration against a scripted kubectl on PATH (no cluster here): the profile's devices
are freed before the Job starts and its Deployment is scaled back whether the Job succeeds or fails."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from charts.build import run_build
from charts.kubectl import follow_job

FAKE_KUBECTL = """#!{python}
import json, os, sys
log = os.environ["FAKE_KUBECTL_LOG"]
with open(log, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
if "get" in args and "job" in args:
    calls = sum(1 for line in open(log) if '"get", "job"' in line)
    final = os.environ["FAKE_JOB_RESULT"]
    status = {{"active": 1}} if calls < 3 else {{"conditions": [{{"type": final, "status": "True"}}]}}
    print(json.dumps({{"status": status}}))
elif "logs" in args:
    print("compiling...")
elif "apply" in args:
    sys.stdin.read()
"""


@pytest.fixture
def fake_kubectl(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "kubectl"
    script.write_text(FAKE_KUBECTL.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "kubectl.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_KUBECTL_LOG", str(log))
    return lambda: [json.loads(line) for line in log.read_text().splitlines()]


def test_follow_job_reports_completion_and_failure(fake_kubectl, monkeypatch):
    monkeypatch.setenv("FAKE_JOB_RESULT", "Complete")
    assert follow_job("ns", "job-a", poll_s=0) is True
    monkeypatch.setenv("FAKE_JOB_RESULT", "Failed")
    assert follow_job("ns", "job-b", poll_s=0) is False


@pytest.mark.parametrize(("result", "code"), [("Complete", 0), ("Failed", 1)])
def test_build_frees_the_devices_then_scales_the_service_back(aws_env, fake_kubectl, monkeypatch, result, code):
    monkeypatch.setenv("FAKE_JOB_RESULT", result)
    assert run_build(None, "speculative", poll_s=0) == code  # verify finds no artifact in the empty bucket
    calls = fake_kubectl()
    verbs = [c[2] for c in calls]
    assert calls[0] == ["-n", "trn-specdec", "scale", "deploy/speculative", "--replicas=0"]
    assert verbs.index("apply") < verbs.index("get")
    assert calls[-1] == ["-n", "trn-specdec", "scale", "deploy/speculative", "--replicas=1"]
