"""The serving init check, run against local directories standing in for the read-only S3 mount."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from config.bucket_layout import BUILD_RECORD_NAME, MANIFEST_NAME
from serving_pod import check_mounted
from serving_pod.manifest import BuildRecord, Manifest, ManifestFile, sha256_file
from tests.conftest import ROOT
from tests.model_build.conftest import fake_compile

FILE = "weights/tp0_sharded_checkpoint.safetensors"


@pytest.fixture
def mounted(tmp_path: Path, plans) -> Path:
    """What /models/artifacts/<digest> looks like after a publish: the files plus manifest.json."""
    plan = plans["speculative"]
    root = tmp_path / "artifacts" / plan.digest
    fake_compile(root, plan)
    files = [
        ManifestFile(p.relative_to(root).as_posix(), p.stat().st_size, sha256_file(p))
        for p in sorted(root.rglob("*"))
        if p.is_file()
    ]
    manifest = Manifest(plan.digest, plan.inputs, files, created_at="2026-01-02T03:04:05+00:00")
    (root / MANIFEST_NAME).write_text(manifest.to_json())
    return root


def _run(capsys, root: Path, expected: dict, *extra: str) -> tuple[int, str]:
    code = check_mounted.main(["--dir", str(root), "--expected-json", json.dumps(expected), *extra])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("deep", [False, True])
def test_matching_artifact_passes(mounted, plans, capsys, deep):
    code, text = _run(capsys, mounted, plans["speculative"].expected(), *(["--deep"] if deep else []))
    assert code == 0 and text.startswith(f"OK: {mounted} matches profile speculative")


def test_copy_to_copies_the_listed_files_after_a_passing_check(mounted, plans, capsys, tmp_path):
    local = tmp_path / "node-local"
    code, text = _run(capsys, mounted, plans["speculative"].expected(), "--copy-to", str(local))
    assert code == 0 and f"to {local}" in text
    listed = Manifest.from_json((mounted / MANIFEST_NAME).read_text()).files
    assert sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file()) == sorted(
        f.path for f in listed
    )
    assert all((local / f.path).read_bytes() == (mounted / f.path).read_bytes() for f in listed)


def test_copy_to_copies_nothing_when_the_check_fails(mounted, plans, capsys, tmp_path):
    local = tmp_path / "node-local"
    code, _ = _run(capsys, mounted, plans["baseline"].expected(), "--copy-to", str(local))
    assert code == 1 and not local.exists()


def test_mismatch_names_the_field_and_the_build_command(mounted, plans, capsys):
    expected = plans["speculative"].expected()
    expected["inputs"] = {**expected["inputs"], "num_speculative_tokens": 5}
    code, text = _run(capsys, mounted, expected)
    assert code == 1
    assert "num_speculative_tokens: artifact was built with 7, profile needs 5" in text
    assert "make build PROFILE=speculative" in text


def test_artifact_of_another_profile_fails_on_digest_and_inputs(mounted, plans, capsys):
    code, text = _run(capsys, mounted, plans["baseline"].expected())
    assert code == 1 and f"digest: manifest has {plans['speculative'].digest}" in text
    assert "make build PROFILE=baseline" in text


@pytest.mark.parametrize("missing", ["manifest", "directory"])
def test_unpublished_artifact_fails_with_the_build_command(mounted, plans, capsys, missing):
    root = mounted
    if missing == "manifest":
        (mounted / MANIFEST_NAME).unlink()
    else:
        root = mounted.parent / ("0" * 20)
    code, text = _run(capsys, root, plans["speculative"].expected())
    assert code == 1 and "no manifest.json" in text and "never published" in text
    assert "make build PROFILE=speculative" in text


def test_truncated_file_is_caught_by_the_size_check_without_deep(mounted, plans, capsys):
    path = mounted / FILE
    path.write_bytes(path.read_bytes()[:1000])
    code, text = _run(capsys, mounted, plans["speculative"].expected())
    assert code == 1 and f"{FILE}: 1000 bytes on disk" in text and "truncated" in text


def test_same_size_corruption_needs_deep(mounted, plans, capsys):
    path = mounted / FILE
    data = bytearray(path.read_bytes())
    data[0] ^= 1
    path.write_bytes(bytes(data))
    assert _run(capsys, mounted, plans["speculative"].expected())[0] == 0
    code, text = _run(capsys, mounted, plans["speculative"].expected(), "--deep")
    assert code == 1 and f"{FILE}: sha256 is" in text


PUBLISHED_AT = 1_790_000_000  # the S3 Last-Modified publish recorded; Mountpoint shows it as each file's mtime


@pytest.fixture
def stamped(mounted: Path) -> Path:
    """The mount as Mountpoint shows a current publish: every file's mtime is the Last-Modified in the manifest."""
    manifest = Manifest.from_json((mounted / MANIFEST_NAME).read_text())
    files = [dataclasses.replace(f, etag="0" * 32, mtime=PUBLISHED_AT) for f in manifest.files]
    for f in files:
        os.utime(mounted / f.path, (PUBLISHED_AT, PUBLISHED_AT))
    (mounted / MANIFEST_NAME).write_text(dataclasses.replace(manifest, files=files).to_json())
    return mounted


def _bytes_read() -> int:
    return int(next(x for x in Path("/proc/self/io").read_text().splitlines() if x.startswith("rchar:")).split()[1])


def test_a_same_size_replacement_after_publish_fails_without_deep(stamped, plans, capsys):
    """S3 gives a replaced object a new Last-Modified: that file (only) is hashed, and its bytes are not listed."""
    path = stamped / FILE
    data = bytearray(path.read_bytes())
    data[0] ^= 1
    path.write_bytes(bytes(data))
    os.utime(path, (PUBLISHED_AT + 3600, PUBLISHED_AT + 3600))
    code, text = _run(capsys, stamped, plans["speculative"].expected())
    assert code == 1
    assert (
        f"{FILE}: written again after publish (S3 time {PUBLISHED_AT + 3600}, manifest recorded {PUBLISHED_AT})" in text
    )
    assert "corrupted or replaced" in text


def test_a_byte_identical_re_send_passes_and_unchanged_files_are_not_read(stamped, plans, capsys):
    """publish restoring a deleted object gives it a new Last-Modified but the same bytes: hashed, accepted. The
    files whose S3 time is the recorded one are not read at all (the 12 MiB one would show)."""
    os.utime(stamped / "model.pt", (PUBLISHED_AT + 60, PUBLISHED_AT + 60))
    before = _bytes_read()
    code, text = _run(capsys, stamped, plans["speculative"].expected())
    read = _bytes_read() - before
    assert code == 0, text
    assert (stamped / "model.pt").stat().st_size <= read < (stamped / FILE).stat().st_size


def test_unreadable_manifest_and_bad_arguments(mounted, plans, capsys):
    (mounted / MANIFEST_NAME).write_text("{not json")
    code, text = _run(capsys, mounted, plans["speculative"].expected())
    assert code == 1 and "not a readable manifest" in text
    assert check_mounted.main(["--dir", str(mounted), "--expected-json", "nope"]) == 2
    assert check_mounted.main(["--dir", str(mounted), "--expected-json", '{"digest": "x"}']) == 2


def test_runs_with_the_standard_library_alone_from_the_shipped_files(mounted, plans, tmp_path):
    """python -S in a directory holding only the files the init container gets (VERIFY_CODE): no site-packages
    (no pydantic, boto3, yaml), like the Neuron image's bare python3."""
    from charts.serving_chart import VERIFY_CODE

    for name in VERIFY_CODE:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, tmp_path / name)
    argv = [sys.executable, "-S", *plans["speculative"].check_mounted_argv()[1:]]
    argv[argv.index("--dir") + 1] = str(mounted)
    result = subprocess.run(argv, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("OK:")


def test_the_shipped_files_import_only_each_other_and_the_standard_library():
    from charts.serving_chart import VERIFY_CODE

    shipped = {name.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for name in VERIFY_CODE}
    for name in VERIFY_CODE:
        tree = ast.parse((ROOT / name).read_text())
        for block in [n for n in ast.walk(tree) if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"]:
            block.body = []  # imports for the type checker only never run
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                assert top in sys.stdlib_module_names or module in shipped, f"{name} imports {module}"


def test_exit_codes_are_the_projects():
    import config.exit_codes as project
    import serving_pod.check_mounted as script

    assert (script.EXIT_OK, script.EXIT_FAILED, script.EXIT_USAGE) == (
        project.EXIT_OK,
        project.EXIT_FAILED,
        project.EXIT_USAGE,
    )


def test_a_file_longer_than_the_manifest_says_fails_without_deep(mounted, plans, capsys):
    """A size check that only caught truncation (`size < expected`) would let this pass."""
    path = mounted / FILE
    size = path.stat().st_size
    with path.open("ab") as grown:
        grown.write(b"\0" * 10)
    code, text = _run(capsys, mounted, plans["speculative"].expected())
    assert code == 1 and f"{FILE}: {size + 10} bytes on disk, manifest says {size}" in text


SERVE_ARGV = ["vllm", "serve", "/models/checkpoints/q", "--max-num-seqs", "4", "--additional-config", '{"a":1}']
GRAPH_ARGS = ["--additional-config", '{"a":1}']


@pytest.fixture
def mounted_cache(tmp_path: Path) -> tuple[Path, dict]:
    """A published vllm-neuron cache: a NEFF, the build record with the vLLM argv the build ran, the manifest."""
    root = tmp_path / "artifacts" / "cafe"
    inputs = {"graph_args": GRAPH_ARGS, "stack": "vllm-neuron"}
    neff = root / "neuron" / "compile_cache" / "0123abcd" / "model.neff"
    neff.parent.mkdir(parents=True)
    neff.write_bytes(b"neff" * 100)
    record = BuildRecord("eagle3", "cafe", inputs, {}, "2026-01-02T03:04:05+00:00", {"vllm_argv": SERVE_ARGV})
    (root / BUILD_RECORD_NAME).write_text(record.to_json())
    files = [
        ManifestFile(p.relative_to(root).as_posix(), p.stat().st_size, sha256_file(p))
        for p in sorted(root.rglob("*"))
        if p.is_file()
    ]
    (root / MANIFEST_NAME).write_text(Manifest("cafe", inputs, files, created_at=record.created_at).to_json())
    return root, {"digest": "cafe", "inputs": inputs, "profile": "eagle3"}


def test_a_cache_built_by_the_serving_command_line_is_copied_and_checked(mounted_cache, capsys, tmp_path):
    root, expected = mounted_cache
    local = tmp_path / "vllm-cache"
    code, text = _run(capsys, root, expected, "--serve-argv-json", json.dumps(SERVE_ARGV), "--copy-to", str(local))
    assert code == 0, text
    assert "OK: the cache was built by the vLLM command line profile eagle3 serves with" in text
    assert "every listed file is there at its size" in text
    assert (local / "neuron" / "compile_cache" / "0123abcd" / "model.neff").stat().st_size == 400


def test_a_graph_flag_that_changed_only_in_serving_fails_before_the_copy(mounted_cache, capsys, tmp_path):
    root, expected = mounted_cache
    serving = [*SERVE_ARGV[:4], "8", *SERVE_ARGV[5:]]  # --max-num-seqs 8 in serving, 4 in the build
    local = tmp_path / "vllm-cache"
    code, text = _run(capsys, root, expected, "--serve-argv-json", json.dumps(serving), "--copy-to", str(local))
    assert code == 1 and not local.exists()
    assert "--max-num-seqs: the cache was built with '4', serving runs '8'" in text
    assert "make build PROFILE=eagle3" in text


def test_a_serving_command_line_without_the_profiles_graph_args_fails(mounted_cache, capsys):
    root, expected = mounted_cache
    code, text = _run(capsys, root, expected, "--serve-argv-json", json.dumps(SERVE_ARGV[:5]))
    assert code == 1
    assert "does not carry the profile's graph arguments --additional-config" in text


def test_a_copy_that_does_not_hold_the_listed_sizes_fails(mounted_cache, capsys, tmp_path, monkeypatch):
    """A short copy (node disk full, an interrupted read of the mount) must not reach vLLM, which would compile."""
    root, expected = mounted_cache
    real_copy = check_mounted.copy_listed

    def short_copy(directory, files, destination):
        copied = real_copy(directory, files, destination)
        (destination / files[0].path).write_bytes(b"")
        return copied

    monkeypatch.setattr(check_mounted, "copy_listed", short_copy)
    code, text = _run(capsys, root, expected, "--copy-to", str(tmp_path / "vllm-cache"))
    assert code == 1
    assert "FAIL: the copy in" in text and "does not hold what the manifest lists" in text
