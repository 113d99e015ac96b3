"""S3 transfers for compiled artifacts and staged checkpoints: parallel, idempotent, resumable.

- Every object carries its SHA-256 as metadata (x-amz-meta-sha256), the identity the manifest lists.
- S3 rejects bytes damaged in transit: a single PUT carries that SHA-256 as its S3 checksum (already
  computed, so S3 checks the stored bytes against the manifest's hash for free); a multipart part carries
  a CRC32, the AWS CLI's default, which botocore computes as it sends at a fraction of SHA-256's cost.
  SHA-256 per part would hash every byte a second time on both ends (measured in
  benchmarks/publish_bench.py).
- An object already present with the same size and sha256 metadata is skipped after one HeadObject:
  republishing an unchanged tree sends no data.
- Large files go up as multipart uploads of `part_size` bytes. An interrupted upload is resumed: parts
  S3 already holds are reused when their size, MD5 ETag (what S3 gives a part under SSE-S3) and, when S3
  lists it, CRC32 match the local bytes, so a re-run re-sends only what is missing. Abandoned uploads are
  removed by the bucket's lifecycle rule (stacks/constructs/model_bucket.py), never by us: another
  publisher may still be using them.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import io
import itertools
import math
import os
import threading
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

from config.exit_codes import EXIT_FAILED
from model_build import aws_clients
from model_build.errors import BuildError
from model_build.progress import DEFAULT_LOG_INTERVAL_S, Progress

MIB = 1 << 20
MIN_PART_SIZE = 5 * MIB  # S3's minimum for every part but the last
MAX_PARTS = 10_000  # S3's maximum parts per upload
# s3transfer uses 8 MiB; 10,000 parts of 16 MiB reach 156 GiB per object (larger files get larger parts).
DEFAULT_PART_SIZE = 16 * MIB
DEFAULT_CONCURRENCY = 8
SHA256_META = "sha256"  # user metadata key: x-amz-meta-sha256
PART_CHECKSUM = "CRC32"  # S3 checksum of each multipart part (see the module docstring)
_PART_FIELD = "ChecksumCRC32"
_READ_CHUNK = 8 * MIB
# Which ready task runs first. Big files (hashed, then their parts) go before new small files, which fill
# the slots left over: each multipart completion then overlaps other uploads instead of all of them
# piling up at the end, and the publish ends on short requests. In benchmarks/publish_bench.py this took
# the median of 9 runs from parity with `aws s3 sync` (10.0 s vs 10.1 s, first in first out) to 9.9 s vs 10.3 s.
_PRIORITY = {"start": 0, "complete": 0, "head": 0, "hash": 1, "part": 1, "object": 2, "put": 2}
_MAX_RESTARTS = 2


class FileEntry(Protocol):
    """Anything with a relative path, size and sha256: a LocalFile or a manifest.ManifestFile."""

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
        if not 1 <= self.concurrency <= 64:
            raise BuildError(f"concurrency {self.concurrency} is outside 1..64; pass --concurrency 8")

    def part_size_for(self, size: int) -> int:
        """The configured part size, raised (in whole MiB) when a file would need more than 10,000 parts."""
        if size <= self.part_size * MAX_PARTS:
            return self.part_size
        return math.ceil(size / MAX_PARTS / MIB) * MIB


@dataclass(frozen=True)
class LocalFile:
    path: str  # relative to the tree root, "/" separated
    abspath: Path
    size: int
    sha256: str
    mtime_ns: int


@dataclass(frozen=True)
class RemoteObject:
    size: int
    sha256: str | None  # None when the object has no x-amz-meta-sha256 (not written by model_build)
    etag: str = ""


def _etag(value: str) -> str:
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


def list_tree(root: Path, *, exclude: Callable[[str], bool] = lambda _: False) -> list[str]:
    """Relative "/" paths of every regular file under root, sorted, minus the excluded ones."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            if full.is_file() and not exclude(rel):
                out.append(rel)
    return sorted(out)


def _hash_one(root: Path, rel: str, progress: Progress | None = None) -> LocalFile:
    full = root / rel
    before = full.stat()
    h = hashlib.sha256()
    with full.open("rb") as f:
        while block := f.read(_READ_CHUNK):
            h.update(block)
            if progress is not None:
                progress.advance(len(block))
    return LocalFile(rel, full, before.st_size, h.hexdigest(), before.st_mtime_ns)


def _hashers(settings: TransferSettings) -> int:
    """Files hashed at once: hashing is CPU-bound (it releases the GIL), so about one per core."""
    return max(1, min(settings.concurrency // 2, os.cpu_count() or 1))


def hash_files(
    root: Path, paths: Sequence[str], settings: TransferSettings, *, stream: TextIO | None = None
) -> list[LocalFile]:
    """SHA-256 of every file, in parallel."""
    total = sum((root / p).stat().st_size for p in paths)
    progress = Progress("hashing", total, stream=stream, interval=settings.progress_interval)
    try:
        with ThreadPoolExecutor(_hashers(settings)) as pool:
            return list(pool.map(lambda rel: _hash_one(root, rel, progress), paths))
    finally:
        progress.close()


@dataclass
class _Multipart:
    key: str
    file: LocalFile
    upload_id: str
    part_size: int
    count: int
    existing: dict[int, dict[str, Any]]  # parts S3 already holds for this upload (resume)
    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    remaining: int = 0
    gone: bool = False  # completed or aborted by another publisher

    def part_range(self, number: int) -> tuple[int, int]:
        offset = (number - 1) * self.part_size
        return offset, min(self.part_size, self.file.size - offset)


_TaskInfo = tuple[str, str, LocalFile | None, _Multipart | None]  # kind, path, file, multipart upload


class _Stopped(Exception):
    """A queued task saw that the transfer is being abandoned."""


class _RestartFresh(Exception):
    def __init__(self, file: LocalFile) -> None:
        self.file = file


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
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except Exception as err:
            status = _status(err)
            if status == 404:
                raise BuildError(
                    f"bucket {self.bucket} does not exist (or is in another account or region); deploy the Models "
                    "stack (make deploy) or pass --bucket NAME"
                ) from None
            if status == 403:
                raise BuildError(
                    f"access to bucket {self.bucket} is denied for the current AWS credentials; use the deployer "
                    "role locally, or run in the cluster where the model-build Pod Identity role grants it"
                ) from None
            raise

    def head(self, key: str) -> RemoteObject | None:
        try:
            r = self.client.head_object(Bucket=self.bucket, Key=key)
        except Exception as err:
            if _status(err) == 404:
                return None
            raise self._denied(err, key) from err
        return RemoteObject(int(r["ContentLength"]), (r.get("Metadata") or {}).get(SHA256_META), _etag(r["ETag"]))

    def get_text(self, key: str) -> str | None:
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
        except Exception as err:
            if _status(err) == 404:
                return None
            raise self._denied(err, key) from err
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
            if _status(err) in (409, 412):  # ConditionalRequestConflict, PreconditionFailed
                return False
            raise self._denied(err, key) from err
        return True

    def list_objects(self, prefix: str) -> dict[str, tuple[int, str]]:
        """Size and ETag of every object under prefix (ListObjectsV2: one request per 1,000 keys)."""
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
            return {o["Key"]: (int(o["Size"]), _etag(o["ETag"])) for page in pages for o in page.get("Contents", [])}
        except Exception as err:
            raise self._denied(err, prefix) from err

    def _denied(self, err: Exception, key: str) -> Exception:
        if _no_answer(err):
            return BuildError(
                f"S3 did not answer for {self.url(key)} ({err}), {aws_clients.ATTEMPTS} attempts of at most "
                f"{aws_clients.READ_S:g} s each. Nothing was published (no manifest was written); check the network "
                "path (NAT gateway, VPC endpoint, proxy, AWS_ENDPOINT_URL) and re-run: it resumes"
            )
        if _status(err) == 403:
            return BuildError(
                f"access denied to {self.url(key)}; the credentials in use lack S3 permissions on this prefix "
                "(in the cluster the model-build Pod Identity role grants them)"
            )
        return err

    def _map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        with ThreadPoolExecutor(self.settings.concurrency) as pool:
            return list(pool.map(fn, items))

    # --- checks ----------------------------------------------------------------------------------

    def check_present(self, prefix: str, files: Sequence[FileEntry]) -> list[str]:
        """HeadObject every file: problems name the file (missing, wrong size, wrong sha256 metadata)."""
        remote = self._map(lambda f: self.head(prefix + f.path), files)
        problems = []
        for f, r in zip(files, remote, strict=True):
            if r is None:
                problems.append(f"{f.path}: missing from {self.url(prefix)}")
            elif r.size != f.size:
                problems.append(f"{f.path}: size is {r.size} bytes, expected {f.size}")
            elif r.sha256 != f.sha256:
                problems.append(f"{f.path}: sha256 metadata is {r.sha256 or 'absent'}, expected {f.sha256}")
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
                if _status(err) == 404:
                    return f"{f.path}: missing from {self.url(prefix)}"
                raise self._denied(err, key) from err
            h, size = hashlib.sha256(), 0
            with body:
                for chunk in body.iter_chunks(_READ_CHUNK):
                    h.update(chunk)
                    size += len(chunk)
                    progress.advance(len(chunk))
            if size != f.size:
                return f"{f.path}: object has {size} bytes, expected {f.size} (truncated or replaced)"
            if h.hexdigest() != f.sha256:
                return f"{f.path}: content sha256 is {h.hexdigest()}, expected {f.sha256} (corrupted or replaced)"
            return None

        try:
            return [p for p in self._map(one, files) if p]
        finally:
            progress.close()

    def check_etags(self, prefix: str, files: Sequence[LocalFile]) -> list[str]:
        """Compare each object's ETag from one listing with the ETag the local bytes give: a cheap content check
        that catches an object replaced or damaged with its size and sha256 metadata intact.

        Under SSE-S3 (the models bucket's encryption) a single PUT's ETag is the MD5 of its bytes and a
        multipart object's is the MD5 of its parts' MD5s, "-N" (the part size is read with one HeadObject
        PartNumber=1). Costs one local MD5 pass over the tree and no S3 data transfer.
        """
        listed = self.list_objects(prefix)
        progress = Progress(
            "checking ETags", sum(f.size for f in files), stream=self.stream, interval=self.settings.progress_interval
        )

        def one(f: LocalFile) -> str | None:
            size, etag = listed.get(prefix + f.path, (None, None))
            if size is None or etag is None:
                return f"{f.path}: missing from {self.url(prefix)}"
            if size != f.size:
                return f"{f.path}: size is {size} bytes, expected {f.size}"
            part_size = self._first_part_size(prefix + f.path) if "-" in etag else None
            local = _local_etag(f.abspath, f.size, part_size, progress)
            if local != etag:
                return f"{f.path}: S3 ETag {etag} differs from the local bytes' {local} (damaged or replaced)"
            return None

        try:
            return [p for p in self._map(one, files) if p]
        finally:
            progress.close()

    def _first_part_size(self, key: str) -> int:
        try:
            return int(self.client.head_object(Bucket=self.bucket, Key=key, PartNumber=1)["ContentLength"])
        except Exception as err:
            raise self._denied(err, key) from err

    # --- upload ----------------------------------------------------------------------------------

    def upload(
        self, prefix: str, files: Sequence[LocalFile], *, guard: Callable[[], None] | None = None
    ) -> TransferStats:
        """Upload hashed files under prefix, skipping objects that already match; resume interrupted ones."""
        return self._transfer(prefix, list(files), None, [], guard)[1]

    def upload_tree(
        self, prefix: str, root: Path, paths: Sequence[str], *, guard: Callable[[], None] | None = None
    ) -> tuple[list[LocalFile], TransferStats]:
        """Hash and upload in one pass: a few files are hashed at a time while earlier ones are uploading."""
        return self._transfer(prefix, [], root, list(paths), guard)

    def _transfer(
        self,
        prefix: str,
        hashed: list[LocalFile],
        root: Path | None,
        to_hash: list[str],
        guard: Callable[[], None] | None,
    ) -> tuple[list[LocalFile], TransferStats]:
        """The one upload engine (see _UploadRun). A final listing must show every file with the ETag this run
        left, so when this returns, every object is confirmed as this run left it; one that another writer
        replaced meanwhile is looked at with HeadObject and refused unless its size and sha256 are ours."""
        run = _UploadRun(self, prefix, root, to_hash, guard)
        results, etags = run.run(hashed)
        files = [results[p] for p in [f.path for f in hashed] + to_hash]
        self._confirm_listed(prefix, files, etags)
        return files, run.stats

    def _confirm_listed(self, prefix: str, files: Sequence[LocalFile], etags: dict[str, str]) -> None:
        listed = self.list_objects(prefix)
        for f in files:
            size, etag = listed.get(prefix + f.path, (None, None))
            if (size, etag) == (f.size, etags[f.path]):
                continue
            # Replaced since this run wrote it: fine only if by the same content (another publisher of this
            # digest with another part size gives another ETag); otherwise the prefix is being fought over.
            _read_back(self.head(prefix + f.path), f, self.url(prefix + f.path))

    def _put_small(
        self,
        key: str,
        f: LocalFile,
        stats: TransferStats,
        progress: Progress,
        stop: threading.Event,
        guard: Callable[[], None],
    ) -> str:
        if stop.is_set():
            raise _Stopped
        guard()
        data = f.abspath.read_bytes()
        if len(data) != f.size or hashlib.sha256(data).hexdigest() != f.sha256:
            raise _changed(f)
        return self._put_bytes(key, f, data, stats, progress)

    def _hash_and_put(
        self,
        prefix: str,
        root: Path,
        rel: str,
        stats: TransferStats,
        progress: Progress,
        stop: threading.Event,
        guard: Callable[[], None],
    ) -> tuple[LocalFile, str]:
        """A new small file: one read feeds both its hash and its PutObject, so it cannot change in between."""
        if stop.is_set():
            raise _Stopped
        full = root / rel
        before = full.stat()
        data = full.read_bytes()
        progress.advance(len(data))
        f = LocalFile(rel, full, len(data), hashlib.sha256(data).hexdigest(), before.st_mtime_ns)
        guard()
        return f, self._put_bytes(prefix + rel, f, data, stats, progress)

    def _put_bytes(self, key: str, f: LocalFile, data: bytes, stats: TransferStats, progress: Progress) -> str:
        """PutObject with the SHA-256 as S3 checksum: S3 stores the bytes only if they hash to the manifest's."""
        resp = self.client.put_object(
            Bucket=self.bucket,
            Key=key,
            Body=io.BytesIO(data),  # a stream, so botocore sends Expect: 100-continue like s3transfer does
            ContentLength=len(data),
            Metadata={SHA256_META: f.sha256},
            ChecksumAlgorithm="SHA256",
            ChecksumSHA256=base64.b64encode(bytes.fromhex(f.sha256)).decode(),
        )
        stats.add(bytes_sent=len(data))
        progress.advance(len(data))
        return _etag(resp["ETag"])

    def _start_multipart(
        self, key: str, f: LocalFile, resume: bool, stop: threading.Event, guard: Callable[[], None]
    ) -> _Multipart:
        if stop.is_set():
            raise _Stopped
        guard()
        part_size = self.settings.part_size_for(f.size)
        count = math.ceil(f.size / part_size)
        upload_id, existing = self._resumable_upload(key, f, part_size, count) if resume else (None, {})
        if upload_id is None:
            upload_id = self.client.create_multipart_upload(
                Bucket=self.bucket, Key=key, Metadata={SHA256_META: f.sha256}, ChecksumAlgorithm=PART_CHECKSUM
            )["UploadId"]
        return _Multipart(key, f, upload_id, part_size, count, existing, remaining=count)

    def _resumable_upload(
        self, key: str, f: LocalFile, part_size: int, count: int
    ) -> tuple[str | None, dict[int, dict[str, Any]]]:
        """The in-progress upload of this key whose parts fit this file's layout and cover the most of it."""
        best: tuple[str | None, dict[int, dict[str, Any]]] = (None, {})
        uploads = [
            u
            for page in self.client.get_paginator("list_multipart_uploads").paginate(Bucket=self.bucket, Prefix=key)
            for u in page.get("Uploads", [])
            if u["Key"] == key and u.get("ChecksumAlgorithm") == PART_CHECKSUM  # parts must carry the same kind
        ]
        for u in uploads:
            try:
                parts = {
                    p["PartNumber"]: p
                    for page in self.client.get_paginator("list_parts").paginate(
                        Bucket=self.bucket, Key=key, UploadId=u["UploadId"]
                    )
                    for p in page.get("Parts", [])
                }
            except Exception as err:
                if _error_code(err) == "NoSuchUpload":
                    continue
                raise
            layout = _Multipart(key, f, "", part_size, count, {})
            fits = all(1 <= n <= count and p["Size"] == layout.part_range(n)[1] for n, p in parts.items())
            if fits and len(parts) > len(best[1]):
                best = (u["UploadId"], parts)
        return best

    def _send_part(
        self,
        mpu: _Multipart,
        number: int,
        stats: TransferStats,
        progress: Progress,
        stop: threading.Event,
        guard: Callable[[], None],
    ) -> None:
        if stop.is_set():
            raise _Stopped
        if mpu.gone:
            return
        offset, length = mpu.part_range(number)
        prior = mpu.existing.get(number)
        with _FileSlice(mpu.file.abspath, offset, length) as part:
            checksum: str | None = None
            if prior is not None:  # resuming: hash first, to reuse a part S3 already holds
                crc, md5 = 0, hashlib.md5(usedforsecurity=False)
                while block := part.read(_READ_CHUNK):
                    crc = zlib.crc32(block, crc)
                    md5.update(block)
                if part.tell() != length:
                    raise _changed(mpu.file)
                checksum = base64.b64encode(crc.to_bytes(4, "big")).decode()
                if _same_part(prior, length, checksum, md5.hexdigest()):
                    mpu.results[number] = {"PartNumber": number, "ETag": prior["ETag"], _PART_FIELD: checksum}
                    stats.add(parts_reused=1, bytes_reused=length)
                    progress.advance(length)
                    return
                part.seek(0)
            guard()
            # Without a precomputed checksum botocore computes the CRC32 as it sends; S3 verifies it and
            # returns it, and CompleteMultipartUpload checks the object against the per-part checksums.
            extra = {_PART_FIELD: checksum} if checksum else {}
            try:
                resp = self.client.upload_part(
                    Bucket=self.bucket,
                    Key=mpu.key,
                    UploadId=mpu.upload_id,
                    PartNumber=number,
                    Body=part,  # streamed from the file: memory stays flat whatever the part size
                    ContentLength=length,
                    ChecksumAlgorithm=PART_CHECKSUM,
                    **extra,
                )
            except Exception as err:
                if _error_code(err) == "NoSuchUpload":
                    mpu.gone = True
                    return
                raise
        returned = resp.get(_PART_FIELD)
        if not returned or (checksum and returned != checksum):
            raise RuntimeError(f"UploadPart of {mpu.key} part {number} returned checksum {returned!r}, expected one")
        mpu.results[number] = {"PartNumber": number, "ETag": resp["ETag"], _PART_FIELD: returned}
        stats.add(parts_sent=1, bytes_sent=length)
        progress.advance(length)

    def _complete(self, mpu: _Multipart, stop: threading.Event) -> str:
        if stop.is_set():
            raise _Stopped
        f = mpu.file
        now = f.abspath.stat()
        if (now.st_size, now.st_mtime_ns) != (f.size, f.mtime_ns):
            raise _changed(f)
        if not mpu.gone:
            try:
                self.client.complete_multipart_upload(
                    Bucket=self.bucket,
                    Key=mpu.key,
                    UploadId=mpu.upload_id,
                    MultipartUpload={"Parts": [mpu.results[n] for n in sorted(mpu.results)]},
                )
            except Exception as err:
                if _error_code(err) != "NoSuchUpload":
                    raise
                mpu.gone = True
        remote = self.head(mpu.key)
        if remote is not None and remote.size == f.size and remote.sha256 == f.sha256:
            return remote.etag
        # Another publisher finished or aborted this upload, or the resumed upload carried stale metadata.
        raise _RestartFresh(f)


def _read_back(remote: RemoteObject | None, f: LocalFile, url: str) -> None:
    """HeadObject of an object that changed since this run wrote it: it must still have our size and sha256."""
    if remote is None or remote.size != f.size or remote.sha256 != f.sha256:
        found = "nothing" if remote is None else f"{remote.size} bytes, sha256 {remote.sha256}"
        raise BuildError(
            f"{url} reads back as {found} after this run wrote it ({f.size} bytes, sha256 {f.sha256}); another "
            "publisher is writing different content to this prefix. Stop it, then re-run",
            EXIT_FAILED,
        )


def _local_etag(path: Path, size: int, part_size: int | None, progress: Progress) -> str:
    """The ETag S3 gives these bytes under SSE-S3: a single PUT's is their MD5 (`part_size` None), a multipart
    upload's the MD5 of its parts' MD5s and "-<parts>"."""
    step = part_size or max(size, 1)
    digests = []
    with path.open("rb") as fh:
        for _ in range(max(1, math.ceil(size / step))):
            h, left = hashlib.md5(usedforsecurity=False), step
            while left > 0 and (chunk := fh.read(min(_READ_CHUNK, left))):
                h.update(chunk)
                left -= len(chunk)
                progress.advance(len(chunk))
            digests.append(h)
    if part_size is None:
        return digests[0].hexdigest()
    return f"{hashlib.md5(b''.join(d.digest() for d in digests), usedforsecurity=False).hexdigest()}-{len(digests)}"


def _same_part(prior: dict[str, Any], size: int, crc32_b64: str, md5_hex: str) -> bool:
    """Reuse a listed part only if its size, MD5 ETag (SSE-S3) and listed CRC32 (when given) all match."""
    if prior.get("Size") != size or str(prior.get("ETag", "")).strip('"') != md5_hex:
        return False
    return prior.get(_PART_FIELD, crc32_b64) == crc32_b64


class _FileSlice:
    """A read-only, seekable window onto part of a file: the body of one UploadPart request."""

    def __init__(self, path: Path, offset: int, length: int) -> None:
        self._file = path.open("rb")
        self._offset, self._length, self._pos = offset, length, 0
        self._file.seek(offset)

    def read(self, size: int = -1) -> bytes:
        left = self._length - self._pos
        size = left if size is None or size < 0 else min(size, left)
        data = self._file.read(size)
        self._pos += len(data)
        return data

    def seek(self, pos: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self._length}[whence]
        self._pos = max(0, min(base + pos, self._length))
        self._file.seek(self._offset + self._pos)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def __len__(self) -> int:
        return self._length

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> _FileSlice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _changed(f: LocalFile) -> BuildError:
    return BuildError(
        f"{f.abspath} changed while it was being published; finish or stop whatever writes it, then re-run"
    )


class _UploadRun:
    """One upload of files under a prefix: a thread pool fed by the main thread, which owns all bookkeeping.

    Tasks: hash a file -> (its size matches a listed object) HeadObject -> PutObject, or
    CreateMultipartUpload / resume -> UploadPart x N -> CompleteMultipartUpload. A single-PUT file with no
    listed object of its size is read once, hashed and sent in one task. Every written object ends with the
    ETag S3 gave this run (written, or matched by HeadObject). `guard` runs before each write; publish uses it
    to stop if another publisher commits the prefix meanwhile. One method per step; `_on_<kind>` handles a
    finished task of that kind.
    """

    def __init__(
        self, store: S3Store, prefix: str, root: Path | None, to_hash: list[str], guard: Callable[[], None] | None
    ) -> None:
        self.store, self.prefix, self.root = store, prefix, root
        self.settings = store.settings
        self.stats = TransferStats(parent=store.totals)
        self.sizes = {key: size for key, (size, _) in store.list_objects(prefix).items()}
        self.check = guard or (lambda: None)
        file_sizes = {rel: (root / rel).stat().st_size for rel in to_hash} if root is not None else {}
        # A new single-PUT file is hashed from the bytes it sends; the others are hashed first, largest first,
        # so that hashing the big files overlaps the upload of the small ones instead of following it.
        self.put_now = [
            rel
            for rel, size in file_sizes.items()
            if size <= self.settings.part_size_for(size) and self.sizes.get(prefix + rel) != size
        ]
        self.queue = deque(sorted(set(file_sizes) - set(self.put_now), key=lambda rel: (-file_sizes[rel], rel)))
        self.progress = Progress(
            "publishing" if to_hash else "uploading",
            sum(file_sizes.values()) + sum(file_sizes[rel] for rel in self.put_now),
            stream=store.stream,
            interval=self.settings.progress_interval,
        )
        self.stop = threading.Event()
        self.pending: dict[Future[Any], _TaskInfo] = {}
        self.restarts: dict[str, int] = {}
        self.results: dict[str, LocalFile] = {}
        self.etags: dict[str, str] = {}
        self.hashing = 0
        self.ready: list[tuple[int, int, _TaskInfo, Callable[..., Any], tuple[Any, ...]]] = []  # a heap
        self.order = itertools.count()

    def run(self, hashed: list[LocalFile]) -> tuple[dict[str, LocalFile], dict[str, str]]:
        """Upload everything; the files by path and the ETag each object has after this run."""
        pool = ThreadPoolExecutor(self.settings.concurrency, thread_name_prefix="s3-upload")
        try:
            for f in hashed:
                self._decide(f)
            self._feed_hashers()
            for rel in self.put_now:
                s = self.store
                self._submit("put", rel, None, None, s._hash_and_put, self.prefix, self.root, rel, *self._write_args())
            self._pump(pool)
            while self.pending:
                done, _ = wait(self.pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    self._finished(fut, *self.pending.pop(fut))
                self._pump(pool)
        except BaseException:
            self.stop.set()
            for fut in self.pending:
                fut.cancel()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            if self.progress.total:
                self.progress.close()
        return self.results, self.etags

    def _write_args(self) -> tuple[Any, ...]:
        return (self.stats, self.progress, self.stop, self.check)

    def _submit(self, kind: str, path: str, f: LocalFile | None, mpu: _Multipart | None, fn: Any, *args: Any) -> None:
        heapq.heappush(self.ready, (_PRIORITY[kind], next(self.order), (kind, path, f, mpu), fn, args))

    def _pump(self, pool: ThreadPoolExecutor) -> None:
        """Keep `concurrency` tasks running, the most urgent first (see _PRIORITY)."""
        while self.ready and len(self.pending) < self.settings.concurrency:
            _, _, info, fn, args = heapq.heappop(self.ready)
            self.pending[pool.submit(fn, *args)] = info

    def _start(self, f: LocalFile, *, resume: bool = True) -> None:
        self.progress.add_total(f.size)
        key, s = self.prefix + f.path, self.store
        if f.size <= self.settings.part_size_for(f.size):
            self._submit("object", f.path, f, None, s._put_small, key, f, *self._write_args())
        else:
            self._submit("start", f.path, f, None, s._start_multipart, key, f, resume, self.stop, self.check)

    def _decide(self, f: LocalFile) -> None:
        """A hashed file: skip it if an object of its size may already be it (HeadObject tells), else send it."""
        self.results[f.path] = f
        if self.sizes.get(self.prefix + f.path) == f.size:
            self._submit("head", f.path, f, None, self.store.head, self.prefix + f.path)
        else:
            self._start(f)

    def _feed_hashers(self) -> None:
        while self.queue and self.hashing < _hashers(self.settings):
            self.hashing += 1
            rel = self.queue.popleft()
            self._submit("hash", rel, None, None, _hash_one, self.root, rel, self.progress)

    def _finished(self, fut: Future[Any], kind: str, path: str, f: LocalFile | None, mpu: _Multipart | None) -> None:
        try:
            result = fut.result()
        except _RestartFresh:
            self._restart(path, f)
            return
        except Exception as err:
            raise _upload_failed(path, self.store.url(self.prefix), err) from err
        getattr(self, f"_on_{kind}")(path, f, mpu, result)

    def _restart(self, path: str, f: LocalFile | None) -> None:
        assert f is not None
        self.restarts[path] = self.restarts.get(path, 0) + 1
        if self.restarts[path] > _MAX_RESTARTS:
            raise BuildError(
                f"{self.store.url(self.prefix + path)} keeps changing under this upload; another publisher "
                "with different content is writing the same prefix. Stop it, then re-run"
            ) from None
        self._start(f, resume=False)

    def _on_hash(self, path: str, f: LocalFile | None, mpu: _Multipart | None, result: LocalFile) -> None:
        self.hashing -= 1
        self._decide(result)
        self._feed_hashers()

    def _on_put(self, path: str, f: LocalFile | None, mpu: _Multipart | None, result: Any) -> None:
        self.results[path], self.etags[path] = result
        self.stats.add(objects_uploaded=1)

    def _on_head(self, path: str, f: LocalFile | None, mpu: _Multipart | None, result: Any) -> None:
        assert f is not None
        if result is not None and result.size == f.size and result.sha256 == f.sha256:
            self.etags[path] = result.etag
            self.stats.add(objects_skipped=1)
        else:
            self._start(f)

    def _on_start(self, path: str, f: LocalFile | None, mpu: _Multipart | None, result: _Multipart) -> None:
        for number in range(1, result.count + 1):
            self._submit("part", path, f, result, self.store._send_part, result, number, *self._write_args())

    def _on_part(self, path: str, f: LocalFile | None, mpu: _Multipart | None, result: Any) -> None:
        assert mpu is not None
        mpu.remaining -= 1
        if mpu.remaining == 0:
            self._submit("complete", path, f, mpu, self.store._complete, mpu, self.stop)

    def _on_object(self, path: str, f: LocalFile | None, mpu: _Multipart | None, result: str) -> None:
        self.etags[path] = result
        self.stats.add(objects_uploaded=1)

    _on_complete = _on_object


def _upload_failed(path: str, url: str, err: Exception) -> BuildError:
    if isinstance(err, BuildError):
        return err
    if _no_answer(err):
        return BuildError(
            f"uploading {path} to {url}: S3 did not answer ({err}), {aws_clients.ATTEMPTS} attempts of at most "
            f"{aws_clients.READ_S:g} s each. Nothing was published (no manifest was written); check the network path "
            "and re-run the same command: it skips what is already uploaded and resumes partial files"
        )
    return BuildError(
        f"uploading {path} to {url} failed: {type(err).__name__}: {err}. Nothing was published (no manifest "
        "was written); re-run the same command: it skips what is already uploaded and resumes partial files"
    )


def _no_answer(err: Exception) -> bool:
    """A connection refused, reset or timed out: the endpoint gave no answer at all (after every retry)."""
    from botocore.exceptions import ConnectionClosedError, ConnectionError, ReadTimeoutError

    return isinstance(err, ConnectionError | ReadTimeoutError | ConnectionClosedError)


def _status(err: Exception) -> int | None:
    response = getattr(err, "response", None)
    if not isinstance(response, dict):
        return None
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if status is None and response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
        return 404
    return status


def _error_code(err: Exception) -> str | None:
    response = getattr(err, "response", None)
    return response.get("Error", {}).get("Code") if isinstance(response, dict) else None


def make_s3_client(region: str, settings: TransferSettings, stream: TextIO | None = None) -> Any:
    """A boto3 S3 client sized for the transfer pool, every call bounded (model_build/aws_clients.py: a silent
    endpoint fails a request within SILENT_BOUND_S, each attempt shown). AWS_ENDPOINT_URL is honoured by boto3."""
    return aws_clients.client(
        "s3", region, stream=stream, max_pool_connections=settings.concurrency + 4, tcp_keepalive=True
    )
