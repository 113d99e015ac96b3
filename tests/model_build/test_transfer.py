"""The uploader against a real S3 API on loopback (moto server): checksums, skipping, resuming."""

from __future__ import annotations

import base64
import hashlib
import io
import zlib
from pathlib import Path
from typing import Any

import pytest

from config.exit_codes import EXIT_FAILED
from model_build.errors import BuildError
from model_build.transfer import MIB, PART_CHECKSUM, S3Store, TransferSettings, hash_files, list_tree
from tests.model_build.conftest import ARTIFACT_FILES, SMALL, FaultyClient, tree_bytes, write_tree

PREFIX = "artifacts/test/"
BIG = "weights/tp0_sharded_checkpoint.safetensors"  # 12 MiB: parts of 5, 5 and 2 MiB


def _files(root: Path, store: S3Store):
    return hash_files(root, list_tree(root), store.settings, stream=store.stream)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    write_tree(root, ARTIFACT_FILES)
    return root


def test_upload_stores_content_sha256_metadata_and_an_s3_checksum(tree, make_store, s3, bucket):
    """Single PUTs carry the content SHA-256 as S3 checksum; multipart parts a CRC32, combined by S3."""
    store = make_store()
    files = _files(tree, store)
    stats = store.upload(PREFIX, files)
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
    make_store().upload(PREFIX, _files(tree, make_store()))
    counting = FaultyClient(s3, operation="none", after=0)
    store = make_store(counting)
    stats = store.upload(PREFIX, _files(tree, store))
    assert (stats.bytes_sent, stats.objects_uploaded, stats.objects_skipped) == (0, 0, len(ARTIFACT_FILES))
    assert counting.body_bytes == 0 and counting.sent == []


def test_a_changed_file_is_the_only_one_sent_again(tree, make_store):
    store = make_store()
    store.upload(PREFIX, _files(tree, store))
    (tree / "model.pt").write_bytes(b"new weights" * 1000)
    stats = store.upload(PREFIX, _files(tree, store))
    assert stats.bytes_sent == 11_000 and stats.objects_uploaded == 1 and stats.objects_skipped == 5


def test_an_interrupted_multipart_upload_resumes_with_the_parts_s3_already_has(tree, make_store, s3):
    faulty = FaultyClient(s3, operation="upload_part", after=1)
    first = make_store(faulty)
    with pytest.raises(BuildError, match=r"re-run the same command") as err:
        first.upload(PREFIX, _files(tree, first))
    assert BIG in str(err.value)
    part_bytes = [n for key, n in faulty.sent if key.endswith(BIG)]
    assert len(part_bytes) == 1  # exactly one part (of 5 or 2 MiB) got through before the "crash"

    second = make_store()
    stats = second.upload(PREFIX, _files(tree, second))
    assert stats.parts_reused == 1 and stats.bytes_reused == part_bytes[0]
    # Nothing is sent twice: the two runs together sent the tree exactly once.
    assert first.totals.bytes_sent == faulty.body_bytes
    assert first.totals.bytes_sent + stats.bytes_sent == tree_bytes(tree)
    body = s3.get_object(Bucket=second.bucket, Key=PREFIX + BIG)["Body"].read()
    assert body == (tree / BIG).read_bytes()


def test_a_different_part_size_on_resume_starts_a_fresh_upload(tree, make_store, s3):
    faulty = FaultyClient(s3, operation="upload_part", after=1)
    with pytest.raises(BuildError):
        make_store(faulty).upload(PREFIX, _files(tree, make_store()))
    store = make_store(settings=TransferSettings(part_size=6 * MIB, concurrency=2, progress_interval=3600))
    stats = store.upload(PREFIX, _files(tree, store))
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
    stats = store.upload(PREFIX, _files(tree, store))
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
    stats = store.upload(PREFIX, _files(tree, store))
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
        store.upload(PREFIX, _files(tree, store))
    assert err.value.code == EXIT_FAILED


def test_an_object_rewritten_with_the_same_content_in_another_layout_is_accepted(tree, make_store, s3, bucket):
    """A single-PUT copy of a multipart object has another ETag but the same bytes and sha256: no conflict."""
    data = (tree / BIG).read_bytes()
    overwriter = _Overwriter(s3, PREFIX + BIG, data, hashlib.sha256(data).hexdigest())
    store = make_store(overwriter)
    store.upload(PREFIX, _files(tree, store))
    assert overwriter.done
    assert s3.head_object(Bucket=bucket, Key=PREFIX + BIG)["ETag"].count("-") == 0  # the rewrite is what S3 holds


def test_a_file_that_changes_after_hashing_is_refused(tree, make_store):
    store = make_store()
    files = _files(tree, store)
    (tree / "neuron_config.json").write_bytes(b"{}")
    with pytest.raises(BuildError, match="changed while it was being published"):
        store.upload(PREFIX, files)


def test_missing_bucket_is_an_environment_error(aws_env, s3):
    store = S3Store(s3, "no-such-bucket-here", SMALL)
    with pytest.raises(BuildError, match="does not exist") as err:
        store.ensure_bucket()
    assert err.value.code == 2


def test_part_size_rules():
    with pytest.raises(BuildError, match="5 MiB"):
        TransferSettings(part_size=4 * MIB)
    with pytest.raises(BuildError, match="concurrency"):
        TransferSettings(concurrency=0)
    s = TransferSettings(part_size=5 * MIB)
    assert s.part_size_for(50 * 1024 * MIB) == 6 * MIB  # 10,000 parts of 5 MiB are 48.8 GiB
    assert s.part_size_for(10 * MIB) == 5 * MIB


def test_hashing_matches_hashlib_and_lists_relative_paths(tree):
    files = hash_files(tree, list_tree(tree, exclude=lambda rel: rel.endswith(".json")), SMALL, stream=io.StringIO())
    assert [f.path for f in files] == sorted(p for p in ARTIFACT_FILES if not p.endswith(".json"))
    for f in files:
        assert f.sha256 == hashlib.sha256((tree / f.path).read_bytes()).hexdigest()
