"""Shipped code: the archives the jobs unpack hold everything their commands import, and are reproducible."""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
import tarfile

import pytest

from charts.bench_job import bench_code_files
from charts.code_bundle import build_archive
from charts.model_build_job import build_code_files
from tests.charts.conftest import of_kind


def _unpack(serving_objects, name: str, dest) -> None:
    blob = base64.b64decode(of_kind(serving_objects, "ConfigMap")[name]["binaryData"]["code.tar.gz"])
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")


def _run(args: list[str], pythonpath, cwd) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(pythonpath), "PYTHONNOUSERSITE": "1"}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_archives_are_reproducible():
    files = build_code_files()
    assert build_archive(files) == build_archive(list(reversed(files)))


def test_build_archive_runs_model_build_plan_against_the_shipped_config(serving_objects, tmp_path):
    code = tmp_path / "code"
    _unpack(serving_objects, "trn-specdec-build-code", code)
    config = tmp_path / "config.yaml"
    config.write_text(of_kind(serving_objects, "ConfigMap")["trn-specdec-config"]["data"]["config.yaml"])
    result = _run(["-m", "model_build", "--config", str(config), "plan", "speculative"], code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "enable_fused_speculation" in result.stdout


def test_bench_archive_runs_the_bench_cli(serving_objects, tmp_path):
    code = tmp_path / "code"
    _unpack(serving_objects, "trn-specdec-bench-code", code)
    result = _run(["-m", "bench", "run", "--help"], code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(str(p.relative_to(code)) for p in code.rglob("*.py")) == bench_code_files()


@pytest.mark.parametrize("name", ["trn-specdec-build-code", "trn-specdec-bench-code"])
def test_archives_leave_room_in_their_manifest(serving_objects, name):
    """An early warning: the archive is most of its chart group's manifest, whose hard limit (the kubectl handler's
    event, holding the old and the new manifest) tests/stacks/test_workloads_stack.py checks."""
    assert len(of_kind(serving_objects, "ConfigMap")[name]["binaryData"]["code.tar.gz"]) < 80_000
