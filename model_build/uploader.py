"""The uploader: hashes a local tree and sends it to an S3Store (model_build/store.py) in parallel, idempotently
and resumably, through the store's public methods only.

- An object already present with the same size and sha256 is skipped: republishing an unchanged tree sends no
  data. What was hashed is remembered in the tree (HASH_CACHE_NAME: size, mtime and ctime, SHA-256, and the
  ETag S3 gave the bytes), so an unchanged tree is not read again: a re-publish costs a listing and a stat per
  file, and an object whose listed ETag is the one S3 gave these bytes needs no HeadObject.
- Large files go up as multipart uploads of `part_size` bytes. An interrupted upload is resumed: parts
  S3 already holds are reused when their size, MD5 ETag (what S3 gives a part under SSE-S3) and, when S3
  lists it, CRC32 match the local bytes, so a re-run re-sends only what is missing. SHA-256 per part would
  hash every byte a second time on both ends (measured in perf/publish_bench.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import threading
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cloud import aws
from config.exit_codes import EXIT_FAILED
from model_build.errors import BuildError
from model_build.progress import Progress
from model_build.store import PART_FIELD, READ_CHUNK, RemoteObject, S3Store, TransferSettings, TransferStats

HASH_CACHE_NAME = ".trn-specdec-hashes.json"  # in the tree's root; never uploaded
_MAX_RESTARTS = 2


@dataclass(frozen=True)
class LocalFile:
    path: str  # relative to the tree root, "/" separated
    abspath: Path
    size: int
    sha256: str
    mtime_ns: int
    ctime_ns: int = field(default=0, compare=False)
    etag: str | None = field(default=None, compare=False)  # the ETag S3 gave these bytes, when known


def list_tree(root: Path, *, exclude: Callable[[str], bool] = lambda _: False) -> list[str]:
    """Relative "/" paths of every regular file under root, sorted, minus the excluded ones and the hash cache."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            if full.is_file() and rel != HASH_CACHE_NAME and not exclude(rel):
                out.append(rel)
    return sorted(out)


class HashCache:
    """What was hashed under a root, so an unchanged file is not read again: path -> size, mtime, ctime (any
    write or metadata change moves one of them), SHA-256 and, once known, the ETag S3 gave the bytes. A file
    whose stat differs is hashed again; a cache that cannot be read or written is ignored (it only saves time)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / HASH_CACHE_NAME
        self._lock = threading.Lock()
        self._dirty = False
        try:
            self._entries: dict[str, list[Any]] = json.loads(self.path.read_text())["files"]
        except (OSError, ValueError, KeyError, TypeError):
            self._entries = {}

    def lookup(self, rel: str, st: os.stat_result) -> LocalFile | None:
        with self._lock:
            entry = self._entries.get(rel)
        if not isinstance(entry, list) or len(entry) != 5:
            return None
        size, mtime_ns, ctime_ns, sha256, etag = entry
        if (size, mtime_ns, ctime_ns) != (st.st_size, st.st_mtime_ns, st.st_ctime_ns):
            return None
        return LocalFile(rel, self.root / rel, size, sha256, mtime_ns, ctime_ns, etag)

    def remember(self, f: LocalFile) -> None:
        with self._lock:
            self._entries[f.path] = [f.size, f.mtime_ns, f.ctime_ns, f.sha256, f.etag]
            self._dirty = True

    def save(self) -> None:
        with self._lock:
            if not self._dirty:
                return
            text = json.dumps({"version": 1, "files": self._entries}, separators=(",", ":"))
            self._dirty = False
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            tmp.write_text(text)
            tmp.replace(self.path)
        except OSError:
            pass  # a read-only tree: the next run hashes again


def _hash_one(root: Path, rel: str, cache: HashCache, progress: Progress | None = None) -> LocalFile:
    full = root / rel
    before = full.stat()
    if (known := cache.lookup(rel, before)) is not None:
        if progress is not None:
            progress.advance(known.size)
        return known
    h = hashlib.sha256()
    with full.open("rb") as f:
        while block := f.read(READ_CHUNK):
            h.update(block)
            if progress is not None:
                progress.advance(len(block))
    hashed = LocalFile(rel, full, before.st_size, h.hexdigest(), before.st_mtime_ns, before.st_ctime_ns)
    cache.remember(hashed)
    return hashed


def _hashers(settings: TransferSettings) -> int:
    """Files hashed at once: hashing is CPU-bound (it releases the GIL), so about one per core."""
    return max(1, min(settings.concurrency // 2, os.cpu_count() or 1))


class Uploader:
    """Publishes files of one local tree (`root`) into a store: hashing, uploads, and the ETag check."""

    def __init__(self, store: S3Store, root: Path) -> None:
        self.store = store
        self.root = root
        self.settings = store.settings
        self.cache = HashCache(root)

    def hash_files(self, paths: Sequence[str]) -> list[LocalFile]:
        """SHA-256 of every file, in parallel; an unchanged file's from the hash cache, without reading it."""
        total = sum((self.root / p).stat().st_size for p in paths)
        progress = Progress("hashing", total, stream=self.store.stream, interval=self.settings.progress_interval)
        try:
            with ThreadPoolExecutor(_hashers(self.settings)) as pool:
                return list(pool.map(lambda rel: _hash_one(self.root, rel, self.cache, progress), paths))
        finally:
            progress.close()
            self.cache.save()

    def upload(
        self, prefix: str, files: Sequence[LocalFile], *, guard: Callable[[], None] | None = None
    ) -> TransferStats:
        """Upload hashed files under prefix, skipping objects that already match; resume interrupted ones."""
        return self._transfer(prefix, list(files), [], guard)[1]

    def upload_tree(
        self, prefix: str, paths: Sequence[str], *, guard: Callable[[], None] | None = None
    ) -> tuple[list[LocalFile], TransferStats]:
        """Hash and upload in one pass: a few files are hashed at a time while earlier ones are uploading."""
        known: list[LocalFile] = []
        to_hash: list[str] = []
        for rel in paths:
            f = self.cache.lookup(rel, (self.root / rel).stat())
            if f is None:
                to_hash.append(rel)
            else:
                known.append(f)
        files, stats = self._transfer(prefix, known, to_hash, guard)
        by_path = {f.path: f for f in files}
        return [by_path[rel] for rel in paths], stats

    def _transfer(
        self, prefix: str, hashed: list[LocalFile], to_hash: list[str], guard: Callable[[], None] | None
    ) -> tuple[list[LocalFile], TransferStats]:
        """The one upload engine (see _UploadRun). A final listing must show every file with the ETag this run
        left, so when this returns, every object is confirmed as this run left it; one that another writer
        replaced meanwhile is looked at with HeadObject and refused unless its size and sha256 are ours."""
        run = _UploadRun(self.store, prefix, self.root, self.cache, to_hash, guard)
        try:
            results, etags = run.run(hashed)
        finally:
            self.cache.save()  # what was hashed stays known even when the upload fails
        files = [results[p] for p in [f.path for f in hashed] + to_hash]
        self._confirm_listed(prefix, files, etags)
        for path in run.written:  # S3 computed these ETags from the bytes this run sent
            self.cache.remember(replace(results[path], etag=etags[path]))
        self.cache.save()
        return [replace(f, etag=etags[f.path]) if f.path in run.written else f for f in files], run.stats

    def _confirm_listed(self, prefix: str, files: Sequence[LocalFile], etags: dict[str, str]) -> None:
        listed = self.store.list_objects(prefix)
        for f in files:
            size, etag = listed.get(prefix + f.path, (None, None))
            if (size, etag) == (f.size, etags[f.path]):
                continue
            # Replaced since this run wrote it: fine only if by the same content (another publisher of this
            # digest with another part size gives another ETag); otherwise the prefix is being fought over.
            _read_back(self.store.head(prefix + f.path), f, self.store.url(prefix + f.path))

    def check_etags(self, prefix: str, files: Sequence[LocalFile]) -> list[str]:
        """Compare each object's ETag from one listing with the ETag the local bytes give: a cheap content check
        that catches an object replaced or damaged with its size and sha256 metadata intact.

        Under SSE-S3 (the models bucket's encryption) a single PUT's ETag is the MD5 of its bytes and a
        multipart object's is the MD5 of its parts' MD5s, "-N" (the part size is read with one HeadObject
        PartNumber=1). A file whose ETag S3 gave before (the hash cache) is not read; the others cost one
        local MD5 pass and no S3 data transfer.
        """
        listed = self.store.list_objects(prefix)
        unknown = [f for f in files if f.etag is None or f.etag != listed.get(prefix + f.path, (None, None))[1]]
        progress = Progress(
            "checking ETags",
            sum(f.size for f in unknown),
            stream=self.store.stream,
            interval=self.settings.progress_interval,
        )

        def one(f: LocalFile) -> str | None:
            size, etag = listed.get(prefix + f.path, (None, None))
            if size is None or etag is None:
                return f"{f.path}: missing from {self.store.url(prefix)}"
            if size != f.size:
                return f"{f.path}: size is {size} bytes, expected {f.size}"
            if f.etag == etag:
                return None
            part_size = self.store.first_part_size(prefix + f.path) if "-" in etag else None
            local = _local_etag(f.abspath, f.size, part_size, progress)
            if local != etag:
                return f"{f.path}: S3 ETag {etag} differs from the local bytes' {local} (damaged or replaced)"
            self.cache.remember(replace(f, etag=etag))
            return None

        try:
            return [p for p in self.store.map(one, files) if p]
        finally:
            progress.close()
            self.cache.save()


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


class _UploadRun:
    """One upload of files under a prefix: a thread pool fed by the main thread, which owns all bookkeeping.

    Tasks: hash a file -> (its size matches a listed object whose ETag is not the one S3 gave these bytes)
    HeadObject -> PutObject, or CreateMultipartUpload / resume -> UploadPart x N -> CompleteMultipartUpload.
    A single-PUT file with no listed object of its size is read once, hashed and sent in one task. Every
    written object ends with the ETag S3 gave this run (written, or matched by the listing or HeadObject).
    `guard` runs before each write; publish uses it to stop if another publisher commits the prefix
    meanwhile. One method per step (the task bodies are `_task_<kind>`, run in the pool); `_on_<kind>`
    handles a finished task of that kind on the main thread.
    """

    def __init__(
        self,
        store: S3Store,
        prefix: str,
        root: Path,
        cache: HashCache,
        to_hash: list[str],
        guard: Callable[[], None] | None,
    ) -> None:
        self.store, self.prefix, self.root, self.cache = store, prefix, root, cache
        self.settings = store.settings
        self.stats = TransferStats(parent=store.totals)
        self.listed = store.list_objects(prefix)
        self.check = guard or (lambda: None)
        file_sizes = {rel: (root / rel).stat().st_size for rel in to_hash}
        # A new single-PUT file is hashed from the bytes it sends; the others are hashed first, largest first,
        # so that hashing the big files overlaps the upload of the small ones instead of following it.
        self.put_now = [
            rel
            for rel, size in file_sizes.items()
            if size <= self.settings.part_size_for(size) and self._listed_size(rel) != size
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
        self.written: set[str] = set()  # paths whose object this run wrote
        self.hashing = 0
        # Tasks ready to run, first in first out. A priority heap (multipart steps before new small files) was
        # measured against this order and gave no difference above run-to-run noise (docs/measurements.md).
        self.ready: deque[tuple[_TaskInfo, Callable[..., Any], tuple[Any, ...]]] = deque()

    def _listed_size(self, rel: str) -> int | None:
        return self.listed.get(self.prefix + rel, (None, ""))[0]

    def run(self, hashed: list[LocalFile]) -> tuple[dict[str, LocalFile], dict[str, str]]:
        """Upload everything; the files by path and the ETag each object has after this run."""
        pool = ThreadPoolExecutor(self.settings.concurrency, thread_name_prefix="s3-upload")
        try:
            for f in hashed:
                self._decide(f)
            self._feed_hashers()
            for rel in self.put_now:
                self._submit("put", rel, None, None, self._task_hash_and_put, rel)
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

    # --- scheduling (main thread) ----------------------------------------------------------------

    def _submit(self, kind: str, path: str, f: LocalFile | None, mpu: _Multipart | None, fn: Any, *args: Any) -> None:
        self.ready.append(((kind, path, f, mpu), fn, args))

    def _pump(self, pool: ThreadPoolExecutor) -> None:
        """Keep `concurrency` tasks running, in the order they became ready."""
        while self.ready and len(self.pending) < self.settings.concurrency:
            info, fn, args = self.ready.popleft()
            self.pending[pool.submit(fn, *args)] = info

    def _start(self, f: LocalFile, *, resume: bool = True) -> None:
        self.progress.add_total(f.size)
        if f.size <= self.settings.part_size_for(f.size):
            self._submit("object", f.path, f, None, self._task_put_small, f)
        else:
            self._submit("start", f.path, f, None, self._task_start_multipart, f, resume)

    def _decide(self, f: LocalFile) -> None:
        """A hashed file: skip it if the listing shows the ETag S3 gave these bytes; HeadObject an object of its
        size that may be it; else send it."""
        self.results[f.path] = f
        size, etag = self.listed.get(self.prefix + f.path, (None, ""))
        if size == f.size and f.etag is not None and etag == f.etag:
            self.etags[f.path] = etag
            self.stats.add(objects_skipped=1)
        elif size == f.size:
            self._submit("head", f.path, f, None, self.store.head, self.prefix + f.path)
        else:
            self._start(f)

    def _feed_hashers(self) -> None:
        while self.queue and self.hashing < _hashers(self.settings):
            self.hashing += 1
            rel = self.queue.popleft()
            self._submit("hash", rel, None, None, _hash_one, self.root, rel, self.cache, self.progress)

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
        self.written.add(path)
        self.stats.add(objects_uploaded=1)

    def _on_head(self, path: str, f: LocalFile | None, mpu: _Multipart | None, result: RemoteObject | None) -> None:
        assert f is not None
        if result is not None and result.size == f.size and result.sha256 == f.sha256:
            self.etags[path] = result.etag
            self.stats.add(objects_skipped=1)
        else:
            self._start(f)

    def _on_start(self, path: str, f: LocalFile | None, mpu: _Multipart | None, result: _Multipart) -> None:
        for number in range(1, result.count + 1):
            self._submit("part", path, f, result, self._task_send_part, result, number)

    def _on_part(self, path: str, f: LocalFile | None, mpu: _Multipart | None, result: Any) -> None:
        assert mpu is not None
        mpu.remaining -= 1
        if mpu.remaining == 0:
            self._submit("complete", path, f, mpu, self._task_complete, mpu)

    def _on_object(self, path: str, f: LocalFile | None, mpu: _Multipart | None, result: str) -> None:
        self.etags[path] = result
        self.written.add(path)
        self.stats.add(objects_uploaded=1)

    _on_complete = _on_object

    # --- tasks (pool threads): each calls the store's public methods ------------------------------

    def _before_write(self) -> None:
        if self.stop.is_set():
            raise _Stopped
        self.check()

    def _task_put_small(self, f: LocalFile) -> str:
        self._before_write()
        data = f.abspath.read_bytes()
        if len(data) != f.size or hashlib.sha256(data).hexdigest() != f.sha256:
            raise _changed(f)
        return self._put(f, data)

    def _task_hash_and_put(self, rel: str) -> tuple[LocalFile, str]:
        """A new small file: one read feeds both its hash and its PutObject, so it cannot change in between."""
        if self.stop.is_set():
            raise _Stopped
        full = self.root / rel
        before = full.stat()
        data = full.read_bytes()
        self.progress.advance(len(data))
        f = LocalFile(rel, full, len(data), hashlib.sha256(data).hexdigest(), before.st_mtime_ns, before.st_ctime_ns)
        if len(data) == before.st_size:
            self.cache.remember(f)
        self.check()
        return f, self._put(f, data)

    def _put(self, f: LocalFile, data: bytes) -> str:
        etag = self.store.put_object(self.prefix + f.path, data, f.sha256)
        self.stats.add(bytes_sent=len(data))
        self.progress.advance(len(data))
        return etag

    def _task_start_multipart(self, f: LocalFile, resume: bool) -> _Multipart:
        self._before_write()
        key = self.prefix + f.path
        part_size = self.settings.part_size_for(f.size)
        count = math.ceil(f.size / part_size)
        upload_id, existing = self._resumable_upload(key, f, part_size, count) if resume else (None, {})
        if upload_id is None:
            upload_id = self.store.create_multipart(key, f.sha256)
        return _Multipart(key, f, upload_id, part_size, count, existing, remaining=count)

    def _resumable_upload(
        self, key: str, f: LocalFile, part_size: int, count: int
    ) -> tuple[str | None, dict[int, dict[str, Any]]]:
        """The in-progress upload of this key whose parts fit this file's layout and cover the most of it."""
        best: tuple[str | None, dict[int, dict[str, Any]]] = (None, {})
        layout = _Multipart(key, f, "", part_size, count, {})
        for upload_id in self.store.uploads_in_progress(key):
            parts = self.store.parts(key, upload_id)
            if parts is None:
                continue
            fits = all(1 <= n <= count and p["Size"] == layout.part_range(n)[1] for n, p in parts.items())
            if fits and len(parts) > len(best[1]):
                best = (upload_id, parts)
        return best

    def _task_send_part(self, mpu: _Multipart, number: int) -> None:
        if self.stop.is_set():
            raise _Stopped
        if mpu.gone:
            return
        offset, length = mpu.part_range(number)
        prior = mpu.existing.get(number)
        with _FileSlice(mpu.file.abspath, offset, length) as part:
            checksum: str | None = None
            if prior is not None:  # resuming: hash first, to reuse a part S3 already holds
                crc, md5 = 0, hashlib.md5(usedforsecurity=False)
                while block := part.read(READ_CHUNK):
                    crc = zlib.crc32(block, crc)
                    md5.update(block)
                if part.tell() != length:
                    raise _changed(mpu.file)
                checksum = base64.b64encode(crc.to_bytes(4, "big")).decode()
                if _same_part(prior, length, checksum, md5.hexdigest()):
                    mpu.results[number] = {"PartNumber": number, "ETag": prior["ETag"], PART_FIELD: checksum}
                    self.stats.add(parts_reused=1, bytes_reused=length)
                    self.progress.advance(length)
                    return
                part.seek(0)
            self.check()
            sent = self.store.upload_part(mpu.key, mpu.upload_id, number, part, length, checksum)  # type: ignore[arg-type]
        if sent is None:
            mpu.gone = True
            return
        mpu.results[number] = sent
        self.stats.add(parts_sent=1, bytes_sent=length)
        self.progress.advance(length)

    def _task_complete(self, mpu: _Multipart) -> str:
        if self.stop.is_set():
            raise _Stopped
        f = mpu.file
        now = f.abspath.stat()
        if (now.st_size, now.st_mtime_ns) != (f.size, f.mtime_ns):
            raise _changed(f)
        if not mpu.gone and not self.store.complete_multipart(
            mpu.key, mpu.upload_id, [mpu.results[n] for n in sorted(mpu.results)]
        ):
            mpu.gone = True
        remote = self.store.head(mpu.key)
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
            while left > 0 and (chunk := fh.read(min(READ_CHUNK, left))):
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
    return prior.get(PART_FIELD, crc32_b64) == crc32_b64


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


def _upload_failed(path: str, url: str, err: Exception) -> BuildError:
    if isinstance(err, BuildError):
        return err
    if aws.unanswered(err):
        return BuildError(
            f"uploading {path} to {url}: S3 did not answer ({err}), {aws.ATTEMPTS} attempts of at most "
            f"{aws.READ_S:g} s each. Nothing was published (no manifest was written); {aws.NETWORK_FIX} and re-run "
            "the same command: it skips what is already uploaded and resumes partial files"
        )
    return BuildError(
        f"uploading {path} to {url} failed: {type(err).__name__}: {err}. Nothing was published (no manifest "
        "was written); re-run the same command: it skips what is already uploaded and resumes partial files"
    )
