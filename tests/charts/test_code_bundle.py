"""Shipped code: the archives the jobs unpack (the shared one and their own) hold everything their commands import,
and are reproducible."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import tarfile

import pytest
import yaml

from charts.code_bundle import build_archive
from charts.jobs.bench import bench_code_files
from charts.jobs.model_build import build_code_files
from tests.charts.conftest import of_kind
from tests.conftest import EXAMPLE_ACCOUNT

SHARED = "trn-specdec-shared-code"


def _unpack(serving_objects, name: str, dest) -> None:
    blob = base64.b64decode(of_kind(serving_objects, "ConfigMap")[name]["binaryData"]["code.tar.gz"])
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")


def _unpack_job_code(serving_objects, name: str, dest) -> None:
    """As unpack_command() does: the shared archive, then the Job's own, into one directory."""
    _unpack(serving_objects, SHARED, dest)
    _unpack(serving_objects, name, dest)


def _run(args: list[str], pythonpath, cwd) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(pythonpath), "PYTHONNOUSERSITE": "1"}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_archives_are_reproducible():
    files = build_code_files()
    assert build_archive(files) == build_archive(list(reversed(files)))


def test_build_archive_runs_model_build_plan_against_the_shipped_config(serving_objects, tmp_path):
    code = tmp_path / "code"
    _unpack_job_code(serving_objects, "trn-specdec-build-code", code)
    config = tmp_path / "config.yaml"
    config.write_text(of_kind(serving_objects, "ConfigMap")["trn-specdec-config"]["data"]["config.yaml"])
    result = _run(["-m", "model_build", "--config", str(config), "plan", "speculative"], code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "enable_fused_speculation" in result.stdout


def test_build_archive_holds_every_module_model_build_imports(serving_objects, tmp_path):
    """The archives leave some config modules out (build_code_files): every model_build module must still import."""
    code = tmp_path / "code"
    _unpack_job_code(serving_objects, "trn-specdec-build-code", code)
    probe = (
        "import importlib, pkgutil, model_build\n"
        "for m in pkgutil.iter_modules(model_build.__path__):\n"
        "    m.name == '__main__' or importlib.import_module('model_build.' + m.name)"
    )
    result = _run(["-c", probe], code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(str(p.relative_to(code)) for p in code.rglob("*.py")) == build_code_files()


def test_bench_archive_runs_the_bench_cli(serving_objects, tmp_path):
    code = tmp_path / "code"
    _unpack_job_code(serving_objects, "trn-specdec-bench-code", code)
    result = _run(["-m", "bench", "run", "--help"], code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(str(p.relative_to(code)) for p in code.rglob("*.py")) == bench_code_files()


def test_bench_archive_holds_the_sweep_subpackage_and_the_aws_clients(serving_objects, tmp_path):
    """`bench sweep` in the Job imports the sweep pipeline (bench/sweep/, a subpackage) and the AWS clients
    (cloud/, from the shared archive) only when it runs, so `bench run --help` would not notice them missing; and
    its report.md imports the tuner's prediction (bench.tune) only when it is written, after the whole sweep ran
    (the journey's bench-sweep step found it missing: tests/journey)."""
    code = tmp_path / "code"
    _unpack_job_code(serving_objects, "trn-specdec-bench-code", code)
    probe = (
        "import bench.sweep.run, bench.sweep.adaptive, bench.sweep.analysis, bench.sweep.report, bench.tune, cloud.aws"
    )
    result = _run(["-c", probe], code, tmp_path)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", [SHARED, "trn-specdec-build-code", "trn-specdec-bench-code"])
def test_archives_leave_room_in_their_manifest(serving_objects, name):
    """An early warning: the archive is most of its chart group's manifest, whose hard limit (the kubectl handler's
    event, 256 KiB, holding the old and the new manifest) tests/stacks/test_workloads_stack.py checks. 100 000
    base64 characters per archive leave two manifests about 60 KiB below that limit."""
    assert len(of_kind(serving_objects, "ConfigMap")[name]["binaryData"]["code.tar.gz"]) < 100_000


def test_every_job_mounts_and_unpacks_the_shared_and_its_own_archive(default_config, serving_objects):
    """Both archives' ConfigMaps are deployed, mounted, and unpacked (shared first) where PYTHONPATH points."""
    from charts.jobs.bench import render_bench_job
    from charts.jobs.model_build import render_build_job
    from charts.jobs.stage import render_stage_job

    account, build, bench = EXAMPLE_ACCOUNT, "trn-specdec-build-code", "trn-specdec-bench-code"
    jobs = [
        (render_build_job(default_config, "speculative", account), build),
        (render_stage_job(default_config, sorted(default_config.models), account), build),
        (render_bench_job(default_config, account, "run1", []), bench),
    ]
    archives = {n for n, c in of_kind(serving_objects, "ConfigMap").items() if "code.tar.gz" in c.get("binaryData", {})}
    assert archives == {SHARED, build, bench}
    for objects, own in jobs:
        (pod,) = [o["spec"]["template"]["spec"] for o in objects if o["kind"] == "Job"]
        (container,) = pod["containers"]
        volumes = {v["name"]: v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v}
        mounts = {volumes[m["name"]]: m["mountPath"] for m in container["volumeMounts"] if m["name"] in volumes}
        assert archives & set(mounts) == {SHARED, own}
        (unpack,) = [line for line in container["command"][-1].splitlines() if "tar -xzf" in line]
        unpacked = unpack.split(" && ")[1:]
        target = next(e["value"] for e in container["env"] if e["name"] == "PYTHONPATH").split(":")[0]
        assert unpacked == [f"tar -xzf {mounts[name]}/code.tar.gz -C {target}" for name in (SHARED, own)]


def test_the_shipped_config_carries_the_crossovers_thresholds_not_its_path(tmp_path, monkeypatch):
    """The Jobs load config.yaml from the trn-specdec-config ConfigMap in a pod, where neither the laptop's folders
    nor the sweep's crossover.json exist (issue 35, finding 1: `make stage/build/bench` failed at config load there).
    Loaded in an empty working directory it is the same config: the same spill thresholds, the same Envoy bootstrap,
    and no path of the laptop in it."""
    from charts import render_serving
    from charts.envoy_bootstrap import spill_thresholds
    from config import load_config
    from tests.charts.conftest import TEST_BUCKET
    from tests.conftest import crossover_entry, crossover_file_dict, default_config_dict

    laptop = tmp_path / "laptop"
    laptop.mkdir()
    entry = crossover_entry(crossover=6, last_paying=3, grid=[1, 2, 4, 8])
    (laptop / "crossover.json").write_text(json.dumps(crossover_file_dict(entry)))
    data = default_config_dict()
    data["endpoint"] = {"weights": {"baseline": 50, "speculative": 50}, "crossover_file": "crossover.json"}
    (laptop / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    original = load_config(laptop / "config.yaml")
    objects = render_serving(original, TEST_BUCKET)
    shipped = of_kind(objects, "ConfigMap")["trn-specdec-config"]["data"]["config.yaml"]
    assert str(tmp_path) not in shipped and "crossover.json" not in shipped

    pod_config = tmp_path / "pod" / "etc" / "config.yaml"
    pod_config.parent.mkdir(parents=True)
    pod_config.write_text(shipped)
    (tmp_path / "pod" / "work").mkdir()
    monkeypatch.chdir(tmp_path / "pod" / "work")
    in_pod = load_config(pod_config)
    assert spill_thresholds(in_pod) == spill_thresholds(original) == {"speculative": 3}
    assert in_pod.model_dump() == original.model_dump()

    def envoy(objects):
        return of_kind(objects, "ConfigMap")["endpoint-envoy"]["data"]["envoy.yaml"]

    assert envoy(render_serving(in_pod, TEST_BUCKET)) == envoy(objects)


# --- packages the Jobs install: hash-pinned from the lock, complete, or not at all -----------------------


def _requirements(text: str) -> dict[str, str]:
    """name -> the pin line of each entry (every entry must carry hashes)."""
    from packaging.utils import canonicalize_name

    entries = {}
    for block in text.split("\n"):
        if block and not block.startswith(" "):
            entries[canonicalize_name(block.split("==")[0])] = block
    hashed = [b for b in text.split("\n") if b.strip().startswith("--hash=sha256:")]
    assert len(hashed) >= len(entries)
    return entries


def _job_requirement_files(serving_objects, tmp_path) -> dict[str, str]:
    _unpack(serving_objects, "trn-specdec-build-code", tmp_path)
    files = {p.stem: p.read_text() for p in (tmp_path / "requirements").glob("*.txt")}
    (bench,) = of_kind(serving_objects, "ConfigMap")["trn-specdec-bench-requirements"]["data"].values()
    return files | {"bench": bench}


def test_job_requirements_hold_every_dependency_of_what_they_install(serving_objects, tmp_path):
    """pip --require-hashes refuses a dependency the file lacks: check the closure here, against the installed
    distributions' own metadata (markers evaluated for a Linux x86_64 CPython 3.11, the bench image's)."""
    from importlib.metadata import distribution

    from packaging.markers import Marker
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    env = {"python_version": "3.11", "python_full_version": "3.11.9", "sys_platform": "linux"}
    env |= {"platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix", "extra": ""}
    files = _job_requirement_files(serving_objects, tmp_path)
    assert set(files) == {"build", "stage", "bench"}
    roots = {"build": {"boto3"}, "stage": {"boto3", "huggingface-hub"}, "bench": {"aiohttp", "pydantic", "pyyaml"}}
    for name, text in files.items():
        entries = _requirements(text)
        assert roots[name] <= set(entries), name
        for package, pin in entries.items():
            marker = pin.rstrip(" \\").partition(";")[2].strip()
            if marker and not Marker(marker).evaluate(env):
                continue  # not installed on Linux/3.11 (e.g. colorama, Windows only)
            for raw in distribution(package).requires or []:
                req = Requirement(raw)
                if req.marker is None or req.marker.evaluate(env):
                    assert canonicalize_name(req.name) in entries, f"{name}: {package} needs {req.name}"


def test_jobs_install_only_hash_checked_wheels(default_config):
    from charts.jobs.bench import bench_script
    from charts.jobs.model_build import build_script
    from charts.jobs.stage import stage_script

    scripts = {
        "bench": bench_script(default_config, "bucket", "run1", []),
        "build": build_script(default_config, default_config.profiles[0], "bucket"),
        "stage": stage_script(sorted(default_config.models), "bucket"),
    }
    for name, script in scripts.items():
        installs = [line for line in script.splitlines() if "pip install" in line]
        assert len(installs) == 1, name
        args = installs[0].split("|| ")[-1].split()
        assert args[:2] == ["pip", "install"] and "--require-hashes" in args, name
        assert args[args.index("--only-binary") + 1] == ":all:" and "-r" in args and "--target" in args, name
        assert not [a for a in args[2:] if "==" in a], name  # nothing named outside the hashed file
    assert scripts["build"].count('python3 -c "import boto3"') == 1  # only when the image lacks it
