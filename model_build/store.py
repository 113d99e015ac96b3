"""One S3 bucket as the publisher sees it: small reads and writes, the multipart primitives, and the checks of
what a prefix holds. The uploader (model_build/uploader.py) drives transfers through these public methods only.

Every object carries its SHA-256 as metadata (x-amz-meta-sha256), the identity the manifest lists. S3 rejects
bytes damaged in transit: a single PUT carries that SHA-256 as its S3 checksum; a multipart part a CRC32, which
botocore computes as it sends. Abandoned multipart uploads are left to the bucket's lifecycle rule: another
publisher may still be using them.
"""

from __future__ import annotations

import base64
import hashlib
import io
import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Protocol, TextIO

from cloud import aws
from model_build.errors import BuildError
from model_build.progress import DEFAULT_LOG_INTERVAL_S, Progress

MIB = 1 << 20
MIN_PART_SIZE = 5 * MIB  # S3's minimum for every part but the last
MAX_PART_SIZE = 5 * 1024 * MIB  # S3's maximum part size (user guide, "Amazon S3 multipart upload limits")
MAX_PARTS = 10_000  # S3's maximum parts per upload
# s3transfer uses 8 MiB; 10,000 parts of 16 MiB reach 156 GiB per object (larger files get larger parts).
DEFAULT_PART_SIZE = 16 * MIB
DEFAULT_CONCURRENCY = 8
SHA256_META = "sha256"  # user metadata key: x-amz-meta-sha256
PART_CHECKSUM = "CRC32"  # S3 checksum of each multipart part (see the module docstring)
PART_FIELD = "ChecksumCRC32"
READ_CHUNK = 8 * MIB


class FileEntry(Protocol):
    """Anything with a relative path, size and sha256: an uploader.LocalFile or a manifest.ManifestFile."""

    @property
    def path(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def sha256(self) -> str: ...


@dataclass(frozen=True)
class TransferSettings:
    part_size: int = DEFAULT_PART_SIZE
    concurrency: int = DEFAULT_CONCURRENCY
    progress_interval: float = DEFAULT_LOG_INTERVAL_S

    def __post_init__(self) -> None:
        if self.part_size < MIN_PART_SIZE:
            raise BuildError(
                f"part size {self.part_size} bytes is below S3's minimum of {MIN_PART_SIZE} (5 MiB); "
                "pass --part-size-mib 5 or more"
            )
        if self.part_size > MAX_PART_SIZE:
            raise BuildError(
                f"part size {self.part_size} bytes is above S3's maximum of {MAX_PART_SIZE} (5 GiB); "
                f"pass --part-size-mib {MAX_PART_SIZE // MIB} or less"
            )
        if not 1 <= self.concurrency <= 64:
            raise BuildError(f"concurrency {self.concurrency} is outside 1..64; pass --concurrency 8")

    def part_size_for(self, size: int) -> int:
        """The configured part size, raised (in whole MiB) when a file would need more than 10,000 parts."""
        if size <= self.part_size * MAX_PARTS:
            return self.part_size
        return math.ceil(size / MAX_PARTS / MIB) * MIB


@dataclass(frozen=True)
class RemoteObject:
    size: int
    sha256: str | None  # None when the object has no x-amz-meta-sha256 (not written by model_build)
    etag: str = ""
    checksum_sha256: str | None = None  # S3's own full-object SHA-256 (a single PUT with one), hex; when asked for


@dataclass(frozen=True)
class Listed:
    """One object as ListObjectsV2 shows it: what S3 computed and stamped, none of it settable by a writer."""

    size: int
    etag: str
    mtime: int  # Last-Modified, whole seconds since the epoch


def strip_etag(value: str) -> str:
    return value.strip('"')


@dataclass
class TransferStats:
    """What one upload did. bytes_sent counts request bodies S3 accepted (botocore retries excluded)."""

    bytes_sent: int = 0
    bytes_reused: int = 0  # parts of an interrupted upload found on S3 and not sent again
    objects_uploaded: int = 0
    objects_skipped: int = 0  # already present with matching size and sha256
    parts_sent: int = 0
    parts_reused: int = 0
    parent: TransferStats | None = field(default=None, repr=False, compare=False)  # also receives every add
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)
        if self.parent is not None:
            self.parent.add(**counts)

    @staticmethod
    def counters() -> tuple[str, ...]:
        return ("bytes_sent", "bytes_reused", "objects_uploaded", "objects_skipped", "parts_sent", "parts_reused")

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.counters()}


def sha256_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


class S3Store:
    """One bucket, seen through a boto3 S3 client (any object with the same methods, e.g. a test wrapper)."""

    def __init__(
        self, client: Any, bucket: str, settings: TransferSettings | None = None, *, stream: TextIO | None = None
    ) -> None:
        self.client = client
        self.bucket = bucket
        self.settings = settings or TransferSettings()
        self.stream = stream
        self.totals = TransferStats()  # everything this store did, kept even when an upload fails

    def url(self, key: str = "") -> str:
        return f"s3://{self.bucket}/{key}"

    # --- small operations ------------------------------------------------------------------------

    def ensure_bucket(self) -> None:
        """The command's one HeadBucket (cloud.aws.check_bucket); commands call it once, before any transfer."""
        aws.check_bucket(self.client, self.bucket)

    def head(self, key: str, *, checksums: bool = False) -> RemoteObject | None:
        """HeadObject; with `checksums`, ChecksumMode=ENABLED, so S3 also returns the checksum it stored with the
        object (S3 API reference, HeadObject: x-amz-checksum-mode)."""
        extra = {"ChecksumMode": "ENABLED"} if checksums else {}
        try:
            r = self.client.head_object(Bucket=self.bucket, Key=key, **extra)
        except Exception as err:
            if aws.http_status(err) == 404:
                return None
            raise self.explain(err, key) from err
        full = r.get("ChecksumSHA256")
        return RemoteObject(
            int(r["ContentLength"]),
            (r.get("Metadata") or {}).get(SHA256_META),
            strip_etag(r["ETag"]),
            base64.b64decode(full).hex() if full and "-" not in full else None,  # "-N": a composite of parts
        )

    def first_part_size(self, key: str) -> int:
        """The size of part 1 of a multipart object (HeadObject PartNumber=1): the part size it was sent with."""
        try:
            return int(self.client.head_object(Bucket=self.bucket, Key=key, PartNumber=1)["ContentLength"])
        except Exception as err:
            raise self.explain(err, key) from err

    def get_text(self, key: str) -> str | None:
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
        except Exception as err:
            if aws.http_status(err) == 404:
                return None
            raise self.explain(err, key) from err
        with body:
            return body.read().decode()

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Create the object only if no object has that key (S3 conditional write); False if one exists."""
        try:
            self.client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=data,
                ContentLength=len(data),
                IfNoneMatch="*",
                Metadata={SHA256_META: hashlib.sha256(data).hexdigest()},
                ChecksumAlgorithm="SHA256",
                ChecksumSHA256=sha256_b64(data),
                ContentType="application/json",
            )
        except Exception as err:
            if aws.http_status(err) in (409, 412):  # ConditionalRequestConflict, PreconditionFailed
                return False
            raise self.explain(err, key) from err
        return True

    def list_objects(self, prefix: str) -> dict[str, tuple[int, str]]:
        """Size and ETag of every object under prefix (ListObjectsV2: one request per 1,000 keys)."""
        return {key: (o.size, o.etag) for key, o in self.list_stamped(prefix).items()}

    def list_stamped(self, prefix: str) -> dict[str, Listed]:
        """Size, ETag and Last-Modified of every object under prefix, from one listing."""
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
            return {
                o["Key"]: Listed(int(o["Size"]), strip_etag(o["ETag"]), int(o["LastModified"].timestamp()))
                for page in pages
                for o in page.get("Contents", [])
            }
        except Exception as err:
            raise self.explain(err, prefix) from err

    def explain(self, err: Exception, key: str) -> Exception:
        """A sentence for an answer S3 did not give or a denial; any other error as it is."""
        if aws.unanswered(err):
            return BuildError(
                f"S3 did not answer for {self.url(key)} ({err}), {aws.ATTEMPTS} attempts of at most "
                f"{aws.READ_S:g} s each. Nothing was published (no manifest was written); {aws.NETWORK_FIX} and "
                "re-run: it resumes"
            )
        if aws.http_status(err) == 403:
            return BuildError(
                f"access denied to {self.url(key)}; the credentials in use lack S3 permissions on this prefix "
                "(in the cluster the model-build Pod Identity role grants them)"
            )
        return err

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        """fn over items, `concurrency` at a time."""
        with ThreadPoolExecutor(self.settings.concurrency) as pool:
            return list(pool.map(fn, items))

    # --- writes: one object, or the steps of a multipart upload ----------------------------------

    def put_object(self, key: str, data: bytes, sha256: str) -> str:
        """PutObject with the SHA-256 as S3 checksum: S3 stores the bytes only if they hash to the manifest's.
        Returns the ETag S3 gave them."""
        resp = self.client.put_object(
            Bucket=self.bucket,
            Key=key,
            Body=io.BytesIO(data),  # a stream, so botocore sends Expect: 100-continue like s3transfer does
            ContentLength=len(data),
            Metadata={SHA256_META: sha256},
            ChecksumAlgorithm="SHA256",
            ChecksumSHA256=base64.b64encode(bytes.fromhex(sha256)).decode(),
        )
        return strip_etag(resp["ETag"])

    def create_multipart(self, key: str, sha256: str) -> str:
        """A new multipart upload whose parts carry CRC32 checksums; its upload id."""
        return self.client.create_multipart_upload(
            Bucket=self.bucket, Key=key, Metadata={SHA256_META: sha256}, ChecksumAlgorithm=PART_CHECKSUM
        )["UploadId"]

    def uploads_in_progress(self, key: str) -> list[str]:
        """Upload ids of unfinished multipart uploads of exactly this key whose parts carry CRC32 checksums."""
        return [
            u["UploadId"]
            for page in self.client.get_paginator("list_multipart_uploads").paginate(Bucket=self.bucket, Prefix=key)
            for u in page.get("Uploads", [])
            if u["Key"] == key and u.get("ChecksumAlgorithm") == PART_CHECKSUM
        ]

    def parts(self, key: str, upload_id: str) -> dict[int, dict[str, Any]] | None:
        """The parts S3 holds for an upload, by number; None when the upload is gone (completed or aborted)."""
        try:
            return {
                p["PartNumber"]: p
                for page in self.client.get_paginator("list_parts").paginate(
                    Bucket=self.bucket, Key=key, UploadId=upload_id
                )
                for p in page.get("Parts", [])
            }
        except Exception as err:
            if aws.error_code(err) == "NoSuchUpload":
                return None
            raise

    def upload_part(
        self, key: str, upload_id: str, number: int, body: BinaryIO, length: int, checksum: str | None
    ) -> dict[str, Any] | None:
        """One part, streamed from `body`; {PartNumber, ETag, ChecksumCRC32} as S3 returned them, None when the
        upload is gone. Without `checksum` botocore computes the CRC32 as it sends; S3 checks it either way."""
        extra = {PART_FIELD: checksum} if checksum else {}
        try:
            resp = self.client.upload_part(
                Bucket=self.bucket,
                Key=key,
                UploadId=upload_id,
                PartNumber=number,
                Body=body,
                ContentLength=length,
                ChecksumAlgorithm=PART_CHECKSUM,
                **extra,
            )
        except Exception as err:
            if aws.error_code(err) == "NoSuchUpload":
                return None
            raise
        returned = resp.get(PART_FIELD)
        if not returned or (checksum and returned != checksum):
            raise RuntimeError(f"UploadPart of {key} part {number} returned checksum {returned!r}, expected one")
        return {"PartNumber": number, "ETag": resp["ETag"], PART_FIELD: returned}

    def complete_multipart(self, key: str, upload_id: str, parts: list[dict[str, Any]]) -> bool:
        """CompleteMultipartUpload; False when the upload is gone (another publisher completed or aborted it)."""
        try:
            self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
            )
        except Exception as err:
            if aws.error_code(err) != "NoSuchUpload":
                raise
            return False
        return True

    # --- checks ----------------------------------------------------------------------------------

    def check_present(self, prefix: str, files: Sequence[FileEntry]) -> list[str]:
        """HeadObject every file, reading no object: problems name the file (missing, wrong size, wrong sha256
        metadata; bytes that are not the ones listed, by what S3 computed from them: the full-object SHA-256 a
        single PUT stored, compared with the listed sha256, and the ETag the manifest recorded at publish)."""
        remote = self.map(lambda f: self.head(prefix + f.path, checksums=True), files)
        problems = []
        for f, r in zip(files, remote, strict=True):
            recorded = getattr(f, "etag", "")  # a manifest entry's; "" for one written before it was recorded
            if r is None:
                problems.append(f"{f.path}: missing from {self.url(prefix)}")
            elif r.size != f.size:
                problems.append(f"{f.path}: size is {r.size} bytes, expected {f.size}")
            elif r.sha256 != f.sha256:
                problems.append(f"{f.path}: sha256 metadata is {r.sha256 or 'absent'}, expected {f.sha256}")
            elif r.checksum_sha256 is not None and r.checksum_sha256 != f.sha256:
                problems.append(
                    f"{f.path}: S3's own SHA-256 of the object is {r.checksum_sha256}, expected {f.sha256} "
                    "(replaced or damaged at the same size)"
                )
            elif recorded and r.etag != recorded:
                problems.append(
                    f"{f.path}: S3 ETag is {r.etag}, the manifest recorded {recorded} at publish "
                    "(replaced at the same size, or sent again with another part size; --deep tells which)"
                )
        return problems

    def check_content(self, prefix: str, files: Sequence[FileEntry]) -> list[str]:
        """Stream every object and hash it: problems name the file whose bytes differ from the list."""
        progress = Progress(
            "verifying", sum(f.size for f in files), stream=self.stream, interval=self.settings.progress_interval
        )

        def one(f: FileEntry) -> str | None:
            key = prefix + f.path
            try:
                body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
            except Exception as err:
                if aws.http_status(err) == 404:
                    return f"{f.path}: missing from {self.url(prefix)}"
                raise self.explain(err, key) from err
            h, size = hashlib.sha256(), 0
            with body:
                for chunk in body.iter_chunks(READ_CHUNK):
                    h.update(chunk)
                    size += len(chunk)
                    progress.advance(len(chunk))
            if size != f.size:
                return f"{f.path}: object has {size} bytes, expected {f.size} (truncated or replaced)"
            if h.hexdigest() != f.sha256:
                return f"{f.path}: content sha256 is {h.hexdigest()}, expected {f.sha256} (corrupted or replaced)"
            return None

        try:
            return [p for p in self.map(one, files) if p]
        finally:
            progress.close()


def make_s3_client(region: str, settings: TransferSettings, owner: str, stream: TextIO | None = None) -> Any:
    """A boto3 S3 client sized for the transfer pool, every call bounded (cloud/aws.py: a silent endpoint fails
    a request within SILENT_BOUND_S, each attempt shown) and naming `owner` as the bucket's expected owner.
    AWS_ENDPOINT_URL is honoured by boto3."""
    return aws.s3_client(
        region, owner, stream=stream, max_pool_connections=settings.concurrency + 4, tcp_keepalive=True
    )
