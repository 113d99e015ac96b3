"""The uploader against a real S3 API on loopback (moto server): checksums, skipping, resuming."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import zlib
from pathlib import Path
from typing import Any

import pytest

from config.exit_codes import EXIT_FAILED
from model_build.errors import BuildError
from model_build.store import MIB, PART_CHECKSUM, S3Store, TransferSettings, make_s3_client
from model_build.uploader import HASH_CACHE_NAME, Uploader, list_tree
from tests.model_build.conftest import (
    ARTIFACT_FILES,
    MOTO_ACCOUNT,
    SMALL,
    FaultyClient,
    tree_bytes,
    write_tree,
)
from tests.silent_endpoint import SHOWN, attempts_shown, refused_port, silent_server

PREFIX = "artifacts/test/"
BIG = "weights/tp0_sharded_checkpoint.safetensors"  # 12 MiB: parts of 5, 5 and 2 MiB


def _files(root: Path, store: S3Store):
    return Uploader(store, root).hash_files(list_tree(root))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    write_tree(root, ARTIFACT_FILES)
    return root


def test_upload_stores_content_sha256_metadata_and_an_s3_checksum(tree, make_store, s3, bucket):
    """Single PUTs carry the content SHA-256 as S3 checksum; multipart parts a CRC32, combined by S3."""
    store = make_store()
    files = _files(tree, store)
    stats = Uploader(store, tree).upload(PREFIX, files)
    assert stats.objects_uploaded == len(ARTIFACT_FILES) and stats.bytes_sent == tree_bytes(tree)
    assert stats.parts_sent == 3  # only the 12 MiB file is multipart
    for f in files:
        head = s3.head_object(Bucket=bucket, Key=PREFIX + f.path, ChecksumMode="ENABLED")
        assert head["Metadata"]["sha256"] == hashlib.sha256((tree / f.path).read_bytes()).hexdigest() == f.sha256
        assert head["ContentLength"] == f.size
        if f.path == BIG:
            data = (tree / f.path).read_bytes()
            parts = [data[i : i + 5 * MIB] for i in range(0, len(data), 5 * MIB)]
            composite = zlib.crc32(b"".join(zlib.crc32(p).to_bytes(4, "big") for p in parts)).to_bytes(4, "big")
            assert head["ChecksumCRC32"].split("-")[0] == base64.b64encode(composite).decode()  # S3 appends "-3"
        else:
            assert head["ChecksumSHA256"] == base64.b64encode(bytes.fromhex(f.sha256)).decode()
        body = s3.get_object(Bucket=bucket, Key=PREFIX + f.path)["Body"].read()
        assert body == (tree / f.path).read_bytes()


def test_second_upload_of_the_same_tree_sends_nothing(tree, make_store, s3):
    Uploader(make_store(), tree).upload(PREFIX, _files(tree, make_store()))
    counting = FaultyClient(s3, operation="none", after=0)
    store = make_store(counting)
    stats = Uploader(store, tree).upload(PREFIX, _files(tree, store))
    assert (stats.bytes_sent, stats.objects_uploaded, stats.objects_skipped) == (0, 0, len(ARTIFACT_FILES))
    assert counting.body_bytes == 0 and counting.sent == []


def test_a_changed_file_is_the_only_one_sent_again(tree, make_store):
    store = make_store()
    Uploader(store, tree).upload(PREFIX, _files(tree, store))
    (tree / "model.pt").write_bytes(b"new weights" * 1000)
    stats = Uploader(store, tree).upload(PREFIX, _files(tree, store))
    assert stats.bytes_sent == 11_000 and stats.objects_uploaded == 1 and stats.objects_skipped == 5


def test_an_interrupted_multipart_upload_resumes_with_the_parts_s3_already_has(tree, make_store, s3):
    faulty = FaultyClient(s3, operation="upload_part", after=1)
    first = make_store(faulty)
    with pytest.raises(BuildError, match=r"re-run the same command") as err:
        Uploader(first, tree).upload(PREFIX, _files(tree, first))
    assert BIG in str(err.value)
    part_bytes = [n for key, n in faulty.sent if key.endswith(BIG)]
    assert len(part_bytes) == 1  # exactly one part (of 5 or 2 MiB) got through before the "crash"

    second = make_store()
    stats = Uploader(second, tree).upload(PREFIX, _files(tree, second))
    assert stats.parts_reused == 1 and stats.bytes_reused == part_bytes[0]
    # Nothing is sent twice: the two runs together sent the tree exactly once.
    assert first.totals.bytes_sent == faulty.body_bytes
    assert first.totals.bytes_sent + stats.bytes_sent == tree_bytes(tree)
    body = s3.get_object(Bucket=second.bucket, Key=PREFIX + BIG)["Body"].read()
    assert body == (tree / BIG).read_bytes()


def test_a_different_part_size_on_resume_starts_a_fresh_upload(tree, make_store, s3):
    faulty = FaultyClient(s3, operation="upload_part", after=1)
    with pytest.raises(BuildError):
        Uploader(make_store(faulty), tree).upload(PREFIX, _files(tree, make_store()))
    store = make_store(settings=TransferSettings(part_size=6 * MIB, concurrency=2, progress_interval=3600))
    stats = Uploader(store, tree).upload(PREFIX, _files(tree, store))
    assert stats.parts_reused == 0 and stats.parts_sent == 2
    assert s3.get_object(Bucket=store.bucket, Key=PREFIX + BIG)["Body"].read() == (tree / BIG).read_bytes()


def test_resuming_an_upload_started_for_other_content_ends_with_the_right_metadata(tree, make_store, s3, bucket):
    """Parts match but the abandoned upload was created with another file's sha256: detected, redone."""
    data = (tree / BIG).read_bytes()
    key = PREFIX + BIG
    upload = s3.create_multipart_upload(
        Bucket=bucket, Key=key, Metadata={"sha256": "0" * 64}, ChecksumAlgorithm=PART_CHECKSUM
    )
    s3.upload_part(Bucket=bucket, Key=key, UploadId=upload["UploadId"], PartNumber=1, Body=data[: 5 * MIB])
    store = make_store()
    stats = Uploader(store, tree).upload(PREFIX, _files(tree, store))
    assert stats.parts_reused == 1  # the planted part was taken, then the stale metadata was caught ...
    assert stats.parts_sent == 2 + 3  # ... and the file was sent again in a fresh upload
    head = s3.head_object(Bucket=bucket, Key=key)
    assert head["Metadata"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data


def test_an_upload_begun_with_another_checksum_algorithm_is_not_resumed(tree, make_store, s3, bucket):
    """S3 refuses parts whose checksum kind differs from the upload's, so such an upload is left alone."""
    data = (tree / BIG).read_bytes()
    key = PREFIX + BIG
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm="SHA256")
    s3.upload_part(
        Bucket=bucket,
        Key=key,
        UploadId=upload["UploadId"],
        PartNumber=1,
        Body=data[: 5 * MIB],
        ChecksumAlgorithm="SHA256",
    )
    store = make_store()
    stats = Uploader(store, tree).upload(PREFIX, _files(tree, store))
    assert (stats.parts_reused, stats.parts_sent) == (0, 3)
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data


class _Overwriter:
    """Another writer: right after this run writes `key`, it puts `body` (with `sha256` metadata) there."""

    def __init__(self, client: Any, key: str, body: bytes, sha256: str) -> None:
        self._client, self.key, self.body, self.sha256 = client, key, body, sha256
        self.done = False

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._client, name)
        if name not in ("put_object", "complete_multipart_upload"):
            return real

        def call(**kwargs: Any) -> Any:
            result = real(**kwargs)
            if kwargs["Key"] == self.key and not self.done:
                self.done = True
                self._client.put_object(
                    Bucket=kwargs["Bucket"], Key=self.key, Body=self.body, Metadata={"sha256": self.sha256}
                )
            return result

        return call


def test_an_object_replaced_with_other_content_after_it_was_written_is_caught(tree, make_store, s3, bucket):
    other = b"another compile's bytes"
    store = make_store(_Overwriter(s3, PREFIX + "model.pt", other, hashlib.sha256(other).hexdigest()))
    with pytest.raises(BuildError, match=r"model.pt reads back as 23 bytes.*another publisher") as err:
        Uploader(store, tree).upload(PREFIX, _files(tree, store))
    assert err.value.code == EXIT_FAILED


def test_an_object_rewritten_with_the_same_content_in_another_layout_is_accepted(tree, make_store, s3, bucket):
    """A single-PUT copy of a multipart object has another ETag but the same bytes and sha256: no conflict."""
    data = (tree / BIG).read_bytes()
    overwriter = _Overwriter(s3, PREFIX + BIG, data, hashlib.sha256(data).hexdigest())
    store = make_store(overwriter)
    Uploader(store, tree).upload(PREFIX, _files(tree, store))
    assert overwriter.done
    assert s3.head_object(Bucket=bucket, Key=PREFIX + BIG)["ETag"].count("-") == 0  # the rewrite is what S3 holds


def test_a_file_that_changes_after_hashing_is_refused(tree, make_store):
    store = make_store()
    files = _files(tree, store)
    (tree / "neuron_config.json").write_bytes(b"{}")
    with pytest.raises(BuildError, match="changed while it was being published"):
        Uploader(store, tree).upload(PREFIX, files)


def test_part_size_rules():
    with pytest.raises(BuildError, match="5 MiB"):
        TransferSettings(part_size=4 * MIB)
    with pytest.raises(BuildError, match="concurrency"):
        TransferSettings(concurrency=0)
    s = TransferSettings(part_size=5 * MIB)
    assert s.part_size_for(50 * 1024 * MIB) == 6 * MIB  # 10,000 parts of 5 MiB are 48.8 GiB
    assert s.part_size_for(10 * MIB) == 5 * MIB


def test_hashing_matches_hashlib_and_lists_relative_paths(tree):
    store = S3Store(None, "unused", SMALL, stream=io.StringIO())
    files = Uploader(store, tree).hash_files(list_tree(tree, exclude=lambda rel: rel.endswith(".json")))
    assert [f.path for f in files] == sorted(p for p in ARTIFACT_FILES if not p.endswith(".json"))
    for f in files:
        assert f.sha256 == hashlib.sha256((tree / f.path).read_bytes()).hexdigest()


class _CountingSha256:
    """Stands in for the uploader's hashlib: counts the SHA-256 objects made, one per file read to hash it."""

    def __init__(self) -> None:
        self.made = 0

    def sha256(self, *args: Any) -> Any:
        self.made += 1
        return hashlib.sha256(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(hashlib, name)


def test_an_unchanged_tree_is_hashed_from_the_cache_without_reading_a_file(tree, monkeypatch):
    import model_build.uploader as uploader

    counting = _CountingSha256()
    monkeypatch.setattr(uploader, "hashlib", counting)
    store = S3Store(None, "unused", SMALL, stream=io.StringIO())
    first = Uploader(store, tree).hash_files(list_tree(tree))
    assert counting.made == len(ARTIFACT_FILES)

    again = Uploader(store, tree).hash_files(list_tree(tree))  # a new run: the cache is read from the tree
    assert counting.made == len(ARTIFACT_FILES) and again == first

    (tree / "model.pt").write_bytes((tree / "model.pt").read_bytes() + b"x")
    changed = Uploader(store, tree).hash_files(list_tree(tree))
    assert counting.made == len(ARTIFACT_FILES) + 1
    assert [f.path for f in changed if f not in first] == ["model.pt"]


def test_a_file_rewritten_at_the_same_size_and_mtime_is_hashed_again(tree):
    """A write moves the ctime even when the size and the mtime are put back."""
    store = S3Store(None, "unused", SMALL, stream=io.StringIO())
    before = {f.path: f.sha256 for f in Uploader(store, tree).hash_files(list_tree(tree))}
    path = tree / "neuron_config.json"
    st = path.stat()
    path.write_bytes(bytes(st.st_size))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_mtime_ns == st.st_mtime_ns

    after = {f.path: f.sha256 for f in Uploader(store, tree).hash_files(list_tree(tree))}
    assert after["neuron_config.json"] == hashlib.sha256(bytes(st.st_size)).hexdigest() != before["neuron_config.json"]


def test_an_unchanged_reupload_costs_listings_only_and_never_sends_the_hash_cache(tree, make_store, s3, bucket):
    first = make_store()
    Uploader(first, tree).upload_tree(PREFIX, list_tree(tree))
    assert (tree / HASH_CACHE_NAME).is_file() and HASH_CACHE_NAME not in list_tree(tree)

    counting = FaultyClient(s3, operation="none", after=0)
    uploader = Uploader(make_store(counting), tree)
    files, stats = uploader.upload_tree(PREFIX, list_tree(tree))
    assert uploader.check_etags(PREFIX, files) == []

    assert (stats.bytes_sent, stats.objects_skipped) == (0, len(ARTIFACT_FILES))
    assert {operation for operation, _ in counting.events} == {"list_objects_v2"}  # no HeadObject, no write
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=PREFIX)["Contents"]
    assert sorted(o["Key"] for o in listed) == sorted(PREFIX + p for p in ARTIFACT_FILES)


@pytest.mark.parametrize("endpoint", ["silent", "refused"])
def test_an_upload_to_an_endpoint_that_does_not_answer_fails_with_each_attempt_shown(
    endpoint, fast_aws, monkeypatch, tmp_path
):
    (tmp_path / "weights.bin").write_bytes(b"x" * 1000)
    out = io.StringIO()
    with silent_server() as port:
        port = port if endpoint == "silent" else refused_port()
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        settings = TransferSettings(concurrency=1)
        store = S3Store(make_s3_client("us-east-2", settings, MOTO_ACCOUNT, out), "bucket-x", settings, stream=out)
        with pytest.raises(
            BuildError, match=r"S3 did not answer for s3://bucket-x/a/ .*3 attempts.*Nothing was published"
        ):
            Uploader(store, tmp_path).upload_tree("a/", ["weights.bin"])
    assert attempts_shown(out.getvalue()) == SHOWN


class _SilentAfterListing:
    """The moto client for listings, a client of the silent endpoint for everything else: S3 goes quiet once
    the transfer has started."""

    def __init__(self, answering: Any, silent: Any) -> None:
        self.answering, self.silent = answering, silent

    def get_paginator(self, name: str) -> Any:
        return self.answering.get_paginator(name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.silent, name)


def test_s3_going_silent_once_the_upload_started_fails_it_with_each_attempt_shown(
    aws_env, fast_aws, monkeypatch, tmp_path, s3, bucket
):
    (tmp_path / "weights.bin").write_bytes(b"x" * 1000)
    out = io.StringIO()
    settings = TransferSettings(concurrency=1)
    with silent_server() as port:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        client = _SilentAfterListing(s3, make_s3_client("us-east-2", settings, MOTO_ACCOUNT, out))
        with pytest.raises(
            BuildError, match=r"uploading weights.bin to s3://.*: S3 did not answer .*3 attempts.*re-run"
        ):
            Uploader(S3Store(client, bucket, settings, stream=out), tmp_path).upload_tree("a/", ["weights.bin"])
    assert attempts_shown(out.getvalue()) == SHOWN
