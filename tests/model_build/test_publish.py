"""publish: manifest last, idempotent, resumable, safe with concurrent publishers, never overwrites."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from config.bucket_layout import BUILD_RECORD_NAME, MANIFEST_NAME, artifact_prefix
from model_build.errors import BuildError
from model_build.publish import publish_artifact
from model_build.store import MIB, TransferSettings
from model_build.uploader import HASH_CACHE_NAME
from model_build.verify import verify_artifact
from serving_pod.manifest import Manifest
from tests.iam_check import S3Calls, denied, statements_by_service_account
from tests.model_build.conftest import MOTO_ACCOUNT, FaultyClient, fake_compile, our_s3_client, tree_bytes


@pytest.fixture
def compiled(tmp_path: Path, plans) -> Path:
    out = tmp_path / "speculative"
    fake_compile(out, plans["speculative"])
    return out


def _manifest(s3: Any, bucket: str, digest: str) -> Manifest | None:
    try:
        body = s3.get_object(Bucket=bucket, Key=artifact_prefix(digest) + MANIFEST_NAME)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None
    return Manifest.from_json(body.decode())


def _keys(s3: Any, bucket: str, prefix: str) -> set[str]:
    return {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])}


def test_publish_then_verify(compiled, plans, make_store, s3, bucket):
    plan = plans["speculative"]
    recorder = FaultyClient(s3, operation="none", after=0)
    result = publish_artifact(make_store(recorder), plan, compiled)
    assert result.wrote_manifest and not result.already_published
    assert result.stats.bytes_sent == tree_bytes(compiled)

    manifest = _manifest(s3, bucket, plan.digest)
    assert manifest is not None and manifest.digest == plan.digest and manifest.inputs == plan.inputs
    assert {f.path for f in manifest.files} == {
        p.relative_to(compiled).as_posix() for p in compiled.rglob("*") if p.is_file() and p.name != HASH_CACHE_NAME
    }  # every file but the uploader's hash cache, which stays local
    assert BUILD_RECORD_NAME in {f.path for f in manifest.files}
    assert manifest.builder == {"neuronx-distributed-inference": "0.6.10598+test"}
    # The manifest is the very last write, and a listing of the prefix taken after every object's last
    # write confirmed them (each with the ETag this run got) before it.
    prefix = artifact_prefix(plan.digest)
    manifest_key = prefix + MANIFEST_NAME
    writes = [e for e in recorder.events if e[0] in ("put_object", "complete_multipart_upload")]
    assert writes[-1] == ("put_object", manifest_key)
    commit = recorder.events.index(("put_object", manifest_key))
    last_write = max(i for i, e in enumerate(recorder.events[:commit]) if e in writes)
    assert ("list_objects_v2", prefix) in recorder.events[last_write + 1 : commit]
    assert verify_artifact(make_store(), plan).ok
    assert verify_artifact(make_store(), plan, deep=True).ok


def test_republishing_an_unchanged_tree_sends_no_data(compiled, plans, make_store, s3):
    publish_artifact(make_store(), plans["speculative"], compiled)
    counting = FaultyClient(s3, operation="none", after=0)
    result = publish_artifact(make_store(counting), plans["speculative"], compiled)
    assert result.already_published and not result.wrote_manifest
    assert result.stats.bytes_sent == 0 and counting.body_bytes == 0 and counting.sent == []


@pytest.mark.parametrize(("operation", "after"), [("upload_part", 1), ("put_object", 2)])
def test_an_interrupted_publish_leaves_no_manifest_and_the_rerun_sends_only_the_rest(
    compiled, plans, make_store, s3, bucket, operation, after
):
    plan = plans["speculative"]
    prefix = artifact_prefix(plan.digest)
    seen_at_failure: dict[str, Any] = {}

    def look_from_outside() -> None:
        seen_at_failure["keys"] = _keys(s3, bucket, prefix)
        seen_at_failure["manifest"] = _manifest(s3, bucket, plan.digest)

    faulty = FaultyClient(s3, operation=operation, after=after, on_fail=look_from_outside)
    first = make_store(faulty)
    with pytest.raises(BuildError, match="no manifest was written") as err:
        publish_artifact(first, plan, compiled)
    assert err.value.code == 2
    assert seen_at_failure["manifest"] is None
    assert _manifest(s3, bucket, plan.digest) is None
    assert first.totals.bytes_sent == faulty.body_bytes > 0

    second = make_store()
    result = publish_artifact(second, plan, compiled)
    assert result.wrote_manifest
    assert first.totals.bytes_sent + result.stats.bytes_sent == tree_bytes(compiled)
    assert result.stats.objects_skipped + result.stats.parts_reused > 0
    assert verify_artifact(make_store(), plan, deep=True).ok


def test_a_missing_object_under_a_published_prefix_is_restored_on_republish(compiled, plans, make_store, s3, bucket):
    plan = plans["speculative"]
    publish_artifact(make_store(), plan, compiled)
    s3.delete_object(Bucket=bucket, Key=artifact_prefix(plan.digest) + "model.pt")
    assert not verify_artifact(make_store(), plan).ok
    result = publish_artifact(make_store(), plan, compiled)
    assert result.already_published and result.stats.bytes_sent == (compiled / "model.pt").stat().st_size
    assert verify_artifact(make_store(), plan, deep=True).ok


def test_two_concurrent_publishers_of_one_digest_end_consistent(compiled, plans, make_store, s3, bucket):
    plan = plans["speculative"]
    barrier = threading.Barrier(2, timeout=30)

    class MeetFirst(FaultyClient):
        """Both publishers reach their first upload before either continues: they really overlap."""

        def __getattr__(self, name: str) -> Any:
            inner = super().__getattr__(name)
            if name not in ("put_object", "upload_part"):
                return inner

            def call(**kwargs: Any) -> Any:
                if not self.met:
                    self.met = True
                    barrier.wait()
                return inner(**kwargs)

            return call

    results: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        client = MeetFirst(s3, operation="none", after=0)
        client.met = False
        try:
            results.append(publish_artifact(make_store(client), plan, compiled))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert sum(r.wrote_manifest for r in results) == 1
    published = _manifest(s3, bucket, plan.digest)
    assert published is not None
    assert all(r.manifest.to_json() == published.to_json() for r in results)  # identical bytes either way
    assert verify_artifact(make_store(), plan, deep=True).ok


def test_a_published_artifact_with_other_content_is_never_overwritten(tmp_path, plans, make_store, s3, bucket):
    plan = plans["speculative"]
    fake_compile(tmp_path / "a", plan, seed=1)
    fake_compile(tmp_path / "b", plan, seed=2)
    publish_artifact(make_store(), plan, tmp_path / "a")
    before = _manifest(s3, bucket, plan.digest)
    with pytest.raises(BuildError, match="never overwrites it") as err:
        publish_artifact(make_store(), plan, tmp_path / "b")
    assert err.value.code == 1 and "aws s3 rm --recursive" in str(err.value)
    assert "model.pt: local 1048593 bytes sha256" in str(err.value)  # names what differs
    assert _manifest(s3, bucket, plan.digest) == before
    assert verify_artifact(make_store(), plan, deep=True).ok  # still the first artifact, byte for byte


def test_a_compile_for_other_inputs_is_refused_naming_the_field(tmp_path, plans, make_store):
    out = tmp_path / "baseline-build"
    fake_compile(out, plans["baseline"])
    with pytest.raises(BuildError) as err:
        publish_artifact(make_store(), plans["speculative"], out)
    text = str(err.value)
    assert err.value.code == 1
    assert "num_speculative_tokens: artifact was built with 0, profile needs 7" in text
    assert "python -m model_build compile speculative" in text and "make build PROFILE=speculative" in text


def test_a_directory_without_build_record_is_not_a_finished_compile(tmp_path, plans, make_store, compiled):
    (compiled / BUILD_RECORD_NAME).unlink()
    with pytest.raises(BuildError, match="not a finished compile") as err:
        publish_artifact(make_store(), plans["speculative"], compiled)
    assert err.value.code == 2


def test_manifest_timestamps_come_from_the_build_not_the_publish(compiled, plans, make_store, s3, bucket):
    plan = plans["speculative"]
    publish_artifact(make_store(), plan, compiled)
    record = json.loads((compiled / BUILD_RECORD_NAME).read_text())
    assert _manifest(s3, bucket, plan.digest).created_at == record["created_at"]


class CommitsMidway(FaultyClient):
    """After this publisher's first write goes through, another publisher commits the prefix."""

    def __init__(self, client: Any, other: Any) -> None:
        super().__init__(client, operation="none", after=0)
        self.other = other
        self.fired = False

    def __getattr__(self, name: str) -> Any:
        inner = super().__getattr__(name)
        if name not in ("put_object", "upload_part"):
            return inner

        def call(**kwargs: Any) -> Any:
            result = inner(**kwargs)
            if not self.fired:
                self.fired = True
                self.other()
            return result

        return call


@pytest.mark.parametrize("same_content", [True, False])
def test_a_publisher_stops_writing_once_another_commits_the_prefix(
    tmp_path, plans, make_store, s3, bucket, monkeypatch, same_content
):
    monkeypatch.setattr("model_build.publish.GUARD_INTERVAL_S", 0.0)  # check before every write
    plan = plans["speculative"]
    fake_compile(tmp_path / "winner", plan, seed=1)
    fake_compile(tmp_path / "late", plan, seed=1 if same_content else 2)
    winner: list[Any] = []
    client = CommitsMidway(s3, lambda: winner.append(publish_artifact(make_store(), plan, tmp_path / "winner")))
    late = make_store(client, settings=TransferSettings(part_size=5 * MIB, concurrency=1, progress_interval=3600))
    if same_content:
        result = publish_artifact(late, plan, tmp_path / "late")
        assert not result.wrote_manifest and not result.already_published
    else:
        with pytest.raises(BuildError, match="never overwrites it"):
            publish_artifact(late, plan, tmp_path / "late")
    assert winner and winner[0].wrote_manifest
    assert len(client.sent) == 1  # the late publisher's one write before the commit, none after
    assert verify_artifact(make_store(), plan, deep=True).ok  # what is served is the winner, byte for byte


def test_the_build_role_allows_every_s3_call_of_publish_and_verify(synth, compiled, plans, make_store, aws_env):
    """What the build Job runs (an interrupted publish, its resumption, verify --deep), checked call by call
    against the synthesized Pod Identity role of that profile's build service account."""

    client = our_s3_client()
    calls = S3Calls(client)
    plan = plans["speculative"]
    with pytest.raises(BuildError):
        publish_artifact(make_store(FaultyClient(client, operation="upload_part", after=1)), plan, compiled)
    publish_artifact(make_store(client), plan, compiled)
    assert publish_artifact(make_store(client), plan, compiled).already_published  # the ETag check's calls too
    assert verify_artifact(make_store(client), plan, deep=True).ok
    assert {"ListMultipartUploads", "ListParts", "CompleteMultipartUpload", "HeadObject"} <= calls.operations
    statements = statements_by_service_account(synth)[f"{plan.profile}-build"]
    assert denied(statements, calls.calls, MOTO_ACCOUNT, "us-east-2") == []


@pytest.mark.parametrize("path", ["neuron_config.json", "weights/tp0_sharded_checkpoint.safetensors"])
def test_republish_over_a_prefix_damaged_at_the_same_size_reports_it(compiled, plans, make_store, s3, bucket, path):
    """An object replaced by other bytes of the same size, sha256 metadata kept (a single PUT and a 3-part
    upload): publish names it and fails, where it used to say "already published"; the shallow verify (make build's)
    sees it too, from the ETag the manifest recorded, without reading the object."""
    plan = plans["speculative"]
    publish_artifact(make_store(), plan, compiled)
    key = artifact_prefix(plan.digest) + path
    head = s3.head_object(Bucket=bucket, Key=key)
    good = (compiled / path).read_bytes()
    damaged = bytes([good[0] ^ 0xFF]) + good[1:]
    s3.put_object(Bucket=bucket, Key=key, Body=damaged, Metadata=head["Metadata"])
    shallow = verify_artifact(make_store(), plan)  # sizes and metadata look right; S3's ETag does not
    assert [p for p in shallow.problems if p.startswith(f"{path}: S3 ETag is")], shallow.problems
    with pytest.raises(BuildError, match=f"{path}: S3 ETag .* differs from the local bytes") as err:
        publish_artifact(make_store(), plan, compiled)
    assert err.value.code == 1 and "already published" not in str(err.value)
    s3.delete_object(Bucket=bucket, Key=key)  # the fix the message gives: delete, publish again
    assert publish_artifact(make_store(), plan, compiled).already_published
    assert verify_artifact(make_store(), plan, deep=True).ok


def test_republish_over_a_prefix_with_an_object_its_manifest_does_not_list_refuses(
    compiled, plans, make_store, s3, bucket
):
    """Serving mounts the whole prefix, so an object nobody listed must not pass as "already published" (verify
    refuses it too); the fix the sentence gives works."""
    plan = plans["speculative"]
    publish_artifact(make_store(), plan, compiled)
    stray = artifact_prefix(plan.digest) + "weights/stray.safetensors"
    s3.put_object(Bucket=bucket, Key=stray, Body=b"not from this build")
    with pytest.raises(
        BuildError, match=r"also holds objects its manifest does not list: weights/stray\.safetensors"
    ) as err:
        publish_artifact(make_store(), plan, compiled)
    assert err.value.code == 1 and "already published" not in str(err.value)
    assert f"aws s3 rm s3://{bucket}/{stray}" in str(err.value)
    assert any("weights/stray.safetensors: not listed" in p for p in verify_artifact(make_store(), plan).problems)
    s3.delete_object(Bucket=bucket, Key=stray)
    assert publish_artifact(make_store(), plan, compiled).already_published
