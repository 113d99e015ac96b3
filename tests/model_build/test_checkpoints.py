"""stage-checkpoints: the upload half, fed from a local directory (no hub access here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from config.bucket_layout import MANIFEST_NAME, checkpoint_prefix
from config.profiles import HfModel
from model_build.checkpoints import select_models, stage_checkpoints
from model_build.cli import main
from model_build.errors import BuildError
from serving_pod.manifest import Manifest
from tests.iam_check import S3Calls, denied, statements_by_service_account
from tests.model_build.conftest import MIB, MOTO_ACCOUNT, FaultyClient, our_s3_client, write_tree

SNAPSHOT = {
    "config.json": 700,
    "generation_config.json": 200,
    "tokenizer.json": 300_000,
    "model-00001-of-00002.safetensors": 7 * MIB,
    "model-00002-of-00002.safetensors": 1 * MIB,
    ".cache/huggingface/download/config.json.metadata": 100,  # huggingface_hub bookkeeping: not uploaded
}


def _fake_hub(root: Path, calls: list[str]):
    def download(model: HfModel, scratch: Path) -> Path:
        calls.append(f"{model.hf_id}@{model.revision}")
        local = root / model.hf_id / model.revision
        if not local.exists():
            write_tree(local, SNAPSHOT, seed=len(calls))
        return local

    return download


def test_staging_publishes_each_model_under_its_pinned_revision(default_config, make_store, s3, bucket, tmp_path):
    calls: list[str] = []
    keys = select_models(default_config, None)
    results = stage_checkpoints(
        make_store(), default_config, keys, scratch=tmp_path, download=_fake_hub(tmp_path, calls), log=lambda _: None
    )
    assert list(results) == ["qwen3-32b", "qwen3-1-7b"]
    for key in keys:
        model = default_config.models[key]
        prefix = checkpoint_prefix(model.hf_id, model.revision)
        listed = {o["Key"][len(prefix) :] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]}
        assert listed == {p for p in SNAPSHOT if not p.startswith(".cache/")} | {MANIFEST_NAME}
        manifest = Manifest.from_json(s3.get_object(Bucket=bucket, Key=prefix + MANIFEST_NAME)["Body"].read().decode())
        assert manifest.digest == model.revision and manifest.inputs["hf_id"] == model.hf_id

    downloads = len(calls)
    again = stage_checkpoints(
        make_store(), default_config, keys, scratch=tmp_path, download=_fake_hub(tmp_path, calls), log=lambda _: None
    )
    assert all(r.already_published and r.stats.bytes_sent == 0 for r in again.values())
    assert len(calls) == downloads  # staged models are not downloaded again

    forced = stage_checkpoints(
        make_store(),
        default_config,
        keys,
        scratch=tmp_path,
        download=_fake_hub(tmp_path, calls),
        log=lambda _: None,
        force=True,
    )
    assert len(calls) == 2 * downloads
    assert all(r.already_published and r.stats.bytes_sent == 0 for r in forced.values())


def test_default_selection_is_every_model_a_profile_uses(default_config):
    assert select_models(default_config, None) == default_config.models_in_use() == ["qwen3-32b", "qwen3-1-7b"]
    assert select_models(default_config, ["qwen3-0-6b"]) == ["qwen3-0-6b"]
    with pytest.raises(BuildError, match="--model nope is not a key of models"):
        select_models(default_config, ["nope"])


def test_without_huggingface_hub_the_command_says_what_to_install(bucket, capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as on a machine without it: import fails
    code = main(["stage-checkpoints", "--model", "qwen3-0-6b", "--scratch", str(tmp_path)])
    assert code == 2
    assert "huggingface_hub" in capsys.readouterr().err


def test_the_stage_role_allows_every_s3_call_of_staging(synth, default_config, make_store, bucket, tmp_path, aws_env):
    """An interrupted staging run and its resumption, call by call against the staging Job's synthesized role."""

    from charts.jobs.stage import STAGE_SERVICE_ACCOUNT

    client = our_s3_client()
    calls = S3Calls(client)
    keys = select_models(default_config, None)
    hub = _fake_hub(tmp_path, [])
    with pytest.raises(BuildError):
        faulty = FaultyClient(client, operation="upload_part", after=1)
        stage_checkpoints(make_store(faulty), default_config, keys, scratch=tmp_path, download=hub, log=lambda _: None)
    stage_checkpoints(make_store(client), default_config, keys, scratch=tmp_path, download=hub, log=lambda _: None)
    assert {"ListMultipartUploads", "ListParts", "CompleteMultipartUpload", "PutObject"} <= calls.operations
    statements = statements_by_service_account(synth)[STAGE_SERVICE_ACCOUNT]
    assert denied(statements, calls.calls, MOTO_ACCOUNT, "us-east-2") == []
