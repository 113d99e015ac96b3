"""verify: exit codes, and failures that name the field or file and the command that fixes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config.bucket_layout import MANIFEST_NAME, artifact_prefix
from model_build.cli import main
from model_build.publish import publish_artifact
from model_build.verify import verify_artifact
from tests.model_build.conftest import fake_compile, our_s3_client

FILE = "weights/tp0_sharded_checkpoint.safetensors"


@pytest.fixture
def published(tmp_path: Path, plans, make_store, bucket):
    out = tmp_path / "speculative"
    fake_compile(out, plans["speculative"])
    publish_artifact(make_store(), plans["speculative"], out)
    return plans["speculative"]


def _verify(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["verify", "speculative", "--part-size-mib", "5", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("deep", [False, True])
def test_a_good_artifact_passes(published, capsys, deep):
    code, out, _ = _verify(capsys, *(["--deep"] if deep else []))
    assert code == 0 and out.startswith("OK: s3://") and published.digest in out


def test_a_missing_manifest_fails_with_the_build_command(bucket, capsys):
    code, _, err = _verify(capsys)
    assert code == 1
    assert "manifest.json is missing" in err and "make build PROFILE=speculative" in err


def test_a_truncated_object_is_named_by_the_cheap_and_the_deep_check(published, s3, bucket, capsys):
    key = artifact_prefix(published.digest) + FILE
    data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    s3.put_object(Bucket=bucket, Key=key, Body=data[: len(data) // 2])
    for args in ([], ["--deep"]):
        code, _, err = _verify(capsys, *args)
        assert code == 1 and FILE in err, args
        assert "python -m model_build publish speculative --from" in err
    assert "truncated" in _verify(capsys, "--deep")[2]


def _reads(client) -> list[tuple[str, str]]:
    """Every (operation, key) the client sends, recorded as botocore builds each request."""
    seen: list[tuple[str, str]] = []
    client.meta.events.register(
        "before-parameter-build.s3", lambda model, params, **_: seen.append((model.name, params.get("Key", "")))
    )
    return seen


@pytest.mark.parametrize("path", ["neuron_config.json", FILE])  # a single PUT and a 3-part upload
def test_a_same_size_replacement_is_caught_by_the_shallow_check_without_reading_objects(
    published, s3, bucket, make_store, path
):
    """Other bytes of the same size with the sha256 metadata copied: the sizes and metadata look right, but the
    ETag S3 computed for the new object is not the one the manifest recorded at publish. Only HEADs and a listing:
    the one object read is the manifest."""

    key = artifact_prefix(published.digest) + path
    head = s3.head_object(Bucket=bucket, Key=key)
    data = bytearray(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    data[len(data) // 2] ^= 0xFF  # one flipped byte, same size, same metadata
    s3.put_object(Bucket=bucket, Key=key, Body=bytes(data), Metadata=head["Metadata"])
    client = our_s3_client()
    sent = _reads(client)
    report = verify_artifact(make_store(client), published)
    assert [p for p in report.problems if p.startswith(f"{path}: S3 ETag is")], report.problems
    assert "--deep tells which" in report.problems[0]
    assert {op for op, k in sent if op == "GetObject" or k == key} == {"GetObject", "HeadObject"}
    assert [k for op, k in sent if op == "GetObject"] == [artifact_prefix(published.digest) + MANIFEST_NAME]


def test_a_replacement_that_carries_its_own_sha256_is_caught_by_s3s_checksum(published, s3, bucket, make_store):
    """A single PUT stores S3's own SHA-256 of the bytes (ChecksumMode=ENABLED returns it): compared with the
    manifest's sha256 directly, whatever the metadata claims."""
    import base64
    import hashlib

    key = artifact_prefix(published.digest) + "neuron_config.json"
    head = s3.head_object(Bucket=bucket, Key=key)
    data = b"{" + b" " * (head["ContentLength"] - 2) + b"}"
    checksum = base64.b64encode(hashlib.sha256(data).digest()).decode()
    s3.put_object(
        Bucket=bucket,
        Key=key,
        Body=data,
        Metadata=head["Metadata"],
        ChecksumAlgorithm="SHA256",
        ChecksumSHA256=checksum,
    )
    report = verify_artifact(make_store(), published)
    (problem,) = report.problems
    assert problem.startswith(
        "neuron_config.json: S3's own SHA-256 of the object is " + hashlib.sha256(data).hexdigest()
    )


def test_corrupted_bytes_are_named_by_the_deep_check_with_how_to_fix(published, s3, bucket, capsys):
    key = artifact_prefix(published.digest) + FILE
    head = s3.head_object(Bucket=bucket, Key=key)
    data = bytearray(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    data[len(data) // 2] ^= 0xFF
    s3.put_object(Bucket=bucket, Key=key, Body=bytes(data), Metadata=head["Metadata"])
    code, _, err = _verify(capsys, "--deep")
    assert code == 1 and f"{FILE}: content sha256" in err and "corrupted" in err
    assert "aws s3 rm" in err  # publish would not re-send it on its own; the fix says so


def test_a_manifest_from_before_the_stamps_still_verifies(published, s3, bucket, make_store):
    """Manifests published before ETag and Last-Modified were recorded have none: nothing to compare, no failure."""
    key = artifact_prefix(published.digest) + MANIFEST_NAME
    manifest = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    assert all(f["etag"] and f["mtime"] > 0 for f in manifest["files"])
    for f in manifest["files"]:
        del f["etag"], f["mtime"]
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(manifest).encode())
    assert verify_artifact(make_store(), published).ok


def test_the_deep_fix_works_delete_then_republish(published, s3, bucket, capsys, tmp_path):
    key = artifact_prefix(published.digest) + FILE
    head = s3.head_object(Bucket=bucket, Key=key)
    s3.put_object(Bucket=bucket, Key=key, Body=b"\0" * head["ContentLength"], Metadata=head["Metadata"])
    assert _verify(capsys, "--deep")[0] == 1
    s3.delete_object(Bucket=bucket, Key=key)
    assert main(["publish", "speculative", "--from", str(tmp_path / "speculative"), "--part-size-mib", "5"]) == 0
    assert _verify(capsys, "--deep")[0] == 0


def test_a_manifest_built_for_other_inputs_names_the_field(published, s3, bucket, capsys):
    key = artifact_prefix(published.digest) + MANIFEST_NAME
    manifest = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    manifest["inputs"]["num_speculative_tokens"] = 5
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(manifest).encode())
    code, _, err = _verify(capsys)
    assert code == 1
    assert "num_speculative_tokens: artifact was built with 5, profile needs 7" in err
    assert "make build PROFILE=speculative" in err


def test_a_local_manifest_file_is_checked_offline(published, s3, bucket, capsys, tmp_path, monkeypatch):
    body = s3.get_object(Bucket=bucket, Key=artifact_prefix(published.digest) + MANIFEST_NAME)["Body"].read()
    path = tmp_path / "manifest.json"
    path.write_bytes(body)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens: any AWS call would fail
    code, out, _ = _verify(capsys, "--manifest-file", str(path))
    assert code == 0 and str(path) in out
    code = main(["verify", "baseline", "--manifest-file", str(path)])
    err = capsys.readouterr().err
    assert code == 1 and "digest: manifest has" in err and "decoding: artifact was built with" in err


def test_an_object_the_manifest_does_not_list_is_reported_with_how_to_remove_it(published, s3, bucket, capsys):
    """Serving mounts the whole prefix; an extra object passed every check before."""
    prefix = artifact_prefix(published.digest)
    s3.put_object(Bucket=bucket, Key=prefix + "weights/extra.bin", Body=b"x")
    for args in ([], ["--deep"]):
        code, _, err = _verify(capsys, *args)
        assert code == 1, args
        assert "weights/extra.bin: not listed in manifest.json" in err
        assert f"aws s3 rm s3://{bucket}/{prefix}weights/extra.bin" in err
