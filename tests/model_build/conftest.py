"""model_build fixtures: a bucket on the shared moto server, small transfer settings, synthetic compile outputs."""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from config import DeploymentConfig
from model_build.compile import write_build_record
from model_build.plan import BuildPlan, build_plan
from model_build.store import MIB, S3Store, TransferSettings
from model_build.uploader import HASH_CACHE_NAME
from serving_pod.manifest import BuildRecord
from tests.conftest import MOTO_ACCOUNT

FIXTURES = Path(__file__).parent / "fixtures"
# 5 MiB parts (S3's minimum) so a 12 MiB file is a 3-part multipart upload; a log line never fires in tests.
SMALL = TransferSettings(part_size=5 * MIB, concurrency=4, progress_interval=3600)


@pytest.fixture(scope="session")
def nxdi_recorded() -> dict[str, Any]:
    return json.loads((FIXTURES / "nxdi_v0_6_10598.json").read_text())


@pytest.fixture
def s3(aws_env: str) -> Any:
    """The tests' S3 client, made as our commands make theirs (tests wrap it in FaultyClient and hand it to stores)."""
    return our_s3_client()


def our_s3_client() -> Any:
    """An S3 client whose every call names moto's account as the bucket owner, as cloud.aws.s3_client's do (with
    botocore's default timeouts: tests that cut cloud.aws's bounds must not cut this one's)."""
    import boto3

    from cloud import aws

    client = boto3.client("s3", region_name="us-east-2")
    aws.expect_owner(client, MOTO_ACCOUNT)
    return client


@pytest.fixture
def bucket(s3: Any, default_config: DeploymentConfig) -> str:
    name = default_config.models_bucket_name(MOTO_ACCOUNT)
    s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
    return name


@pytest.fixture
def make_store(s3: Any, bucket: str) -> Callable[..., S3Store]:
    def make(client: Any = None, settings: TransferSettings = SMALL) -> S3Store:
        return S3Store(client or our_s3_client(), bucket, settings, stream=io.StringIO())

    return make


@pytest.fixture
def plans(default_config: DeploymentConfig) -> dict[str, BuildPlan]:
    return {
        p.name: build_plan(default_config, p, bucket=default_config.models_bucket_name(MOTO_ACCOUNT))
        for p in default_config.profiles
    }


# Sizes of a synthetic compile output: one multipart file (3 parts of 5, 5, 2 MiB), the rest single PUTs.
ARTIFACT_FILES = {
    "neuron_config.json": 2_000,
    "model.pt": 1 * MIB + 17,
    "weights/tp0_sharded_checkpoint.safetensors": 12 * MIB,
    "weights/tp1_sharded_checkpoint.safetensors": 300_000,
    "weights/tp2_sharded_checkpoint.safetensors": 300_001,
    "weights/tp3_sharded_checkpoint.safetensors": 0,
}


def write_tree(root: Path, files: dict[str, int], *, seed: int = 0) -> None:
    """Files of the given sizes with distinct pseudo-random content."""
    import random

    rng = random.Random(seed)
    for rel, size in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rng.randbytes(size))


def fake_compile(out: Path, plan: BuildPlan, *, seed: int = 0, files: dict[str, int] | None = None) -> BuildRecord:
    """What `compile` leaves behind, minus NxDI: output files, then build-inputs.json last."""
    write_tree(out, files or ARTIFACT_FILES, seed=seed)
    record = BuildRecord(
        profile=plan.profile,
        digest=plan.digest,
        inputs=plan.inputs,
        builder={"neuronx-distributed-inference": "0.6.10598+test"},
        created_at="2026-01-02T03:04:05+00:00",
        neuron_config={"target": plan.target_kwargs, "draft": plan.draft_kwargs},
    )
    write_build_record(out, record)
    return record


def tree_bytes(root: Path) -> int:
    """Bytes of the files a publish sends (the uploader's hash cache stays local)."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and p.name != HASH_CACHE_NAME)


class FaultyClient:
    """A boto3 S3 client that fails `operation` after `after` successful calls, like a pod killed mid-upload.

    It counts the body bytes of the calls that went through, independently of the uploader's own count.
    `on_fail` runs at the moment of the first failure (e.g. to look at the bucket from outside).
    """

    def __init__(self, client: Any, *, operation: str, after: int, on_fail: Callable[[], None] | None = None) -> None:
        self._client = client
        self.operation = operation
        self.after = after
        self.on_fail = on_fail
        self.calls = 0
        self.failures = 0
        self.body_bytes = 0
        self.sent: list[tuple[str, int]] = []  # (key, body bytes) of every call that went through
        self.events: list[tuple[str, str]] = []  # (operation, key or prefix) of writes, HEADs, listings, in order
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._client, name)
        if name == "get_paginator":

            def paginator(operation: str) -> Any:
                return _RecordedPaginator(real(operation), operation, self)

            return paginator
        if name in ("complete_multipart_upload", "head_object"):

            def recorded(**kwargs: Any) -> Any:
                result = real(**kwargs)
                with self._lock:
                    self.events.append((name, kwargs["Key"]))
                return result

            return recorded
        if name not in ("put_object", "upload_part"):
            return real

        def call(**kwargs: Any) -> Any:
            if name == self.operation:
                with self._lock:
                    fail = self.calls >= self.after
                    if fail:
                        self.failures += 1
                        first = self.failures == 1
                    else:
                        self.calls += 1
                if fail:
                    if first and self.on_fail:
                        self.on_fail()
                    raise ConnectionError(f"injected failure of {name} after {self.after} calls")
            result = real(**kwargs)
            with self._lock:  # the request went through: S3 accepted ContentLength bytes of body
                self.body_bytes += kwargs["ContentLength"]
                self.sent.append((kwargs["Key"], kwargs["ContentLength"]))
                self.events.append((name, kwargs["Key"]))
            return result

        return call


class _RecordedPaginator:
    """A paginator whose listing is recorded as one event once all its pages have been read."""

    def __init__(self, real: Any, operation: str, owner: FaultyClient) -> None:
        self._real, self._operation, self._owner = real, operation, owner

    def paginate(self, **kwargs: Any) -> list[Any]:
        pages = list(self._real.paginate(**kwargs))
        with self._owner._lock:
            self._owner.events.append((self._operation, kwargs.get("Prefix", "")))
        return pages


def env_without_aws() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
