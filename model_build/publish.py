"""Publish a tree (a compiled artifact or a staged checkpoint) to its S3 prefix, manifest.json last.

The manifest is the commit point: serving only trusts a prefix that has one, and publish writes it
only after a listing of the prefix, taken once every upload finished, shows every object it lists as
this run left it (same size and ETag). So:
- a publish that dies leaves no manifest: nothing half-written is ever served; re-running resumes;
- a prefix that already has a manifest is never overwritten (serving may be reading it); a re-publish
  of the same content only checks (and repairs missing objects), sending no data; it compares every
  object's ETag with the local bytes, so an object damaged or replaced with its size and metadata intact is
  reported (non-zero exit), never called "already published";
- two publishers of the same content both end with the same complete prefix: the manifest is created
  with an S3 conditional write (If-None-Match: *), the loser compares and accepts identical content;
- the manifest records each object's ETag and Last-Modified as S3 listed them before the commit, so the shallow
  checks (verify and serving's init step) see a later same-size replacement without reading any object.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from config.bucket_layout import BUILD_RECORD_NAME, MANIFEST_NAME, artifact_prefix, manifest_key
from config.exit_codes import EXIT_FAILED
from model_build.artifact_plan import ArtifactPlan
from model_build.errors import BuildError, build_command
from model_build.store import S3Store, TransferStats
from model_build.uploader import LocalFile, Uploader, list_tree
from serving_pod.manifest import BuildRecord, Manifest, ManifestFile, mismatches


@dataclass
class PublishResult:
    url: str
    manifest: Manifest
    stats: TransferStats
    already_published: bool  # a manifest with the same content was there before this run
    wrote_manifest: bool  # this run created manifest.json

    def summary(self) -> str:
        s = self.stats
        state = "already published" if self.already_published else "published"
        return (
            f"{state}: {self.url} ({len(self.manifest.files)} files, {self.manifest.total_bytes} bytes); "
            f"this run sent {s.bytes_sent} bytes in {s.objects_uploaded} objects, reused {s.bytes_reused} bytes "
            f"of interrupted uploads, skipped {s.objects_skipped} objects already present"
        )


def _excluded(rel: str) -> bool:
    return rel == MANIFEST_NAME or rel.endswith(".tmp") or rel.startswith(".cache/")


GUARD_INTERVAL_S = 2.0


class ManifestAppeared(BuildError):
    """Another publisher committed this prefix while we were uploading: stop writing to it."""


def read_manifest(store: S3Store, key: str) -> Manifest | None:
    text = store.get_text(key)
    if text is None:
        return None
    try:
        return Manifest.from_json(text)
    except (ValueError, TypeError, KeyError) as err:
        raise BuildError(f"{store.url(key)} is not a readable manifest ({err})", EXIT_FAILED) from None


def manifest_guard(store: S3Store, key: str, interval: float | None = None) -> Callable[[], None]:
    """Before writes, at most every `interval` seconds: has someone committed the prefix? Then stop.

    Narrows (cannot close) the window in which a publisher with other content, started before the
    commit, could still overwrite a committed object; the serving check and verify catch the rest.
    """
    interval = GUARD_INTERVAL_S if interval is None else interval
    lock = threading.Lock()
    last = [-interval - 1.0]

    def guard() -> None:
        with lock:
            now = time.monotonic()
            if now - last[0] < interval:
                return
            last[0] = now
        if store.head(key) is not None:
            raise ManifestAppeared(f"{store.url(key)} appeared while uploading")

    return guard


def publish_tree(
    store: S3Store,
    prefix: str,
    root: Path,
    make_manifest: Callable[[list[ManifestFile]], Manifest],
    *,
    what: str,
) -> PublishResult:
    url = store.url(prefix)
    key = manifest_key(prefix)
    paths = list_tree(root, exclude=_excluded)
    if not paths:
        raise BuildError(f"{root} holds no files to publish")
    before = store.totals.as_dict()
    uploader = Uploader(store, root)

    def this_run() -> TransferStats:  # everything the store did since this publish began, even across an abort
        return TransferStats(**{k: v - before[k] for k, v in store.totals.as_dict().items()})

    files: list[LocalFile] | None = None
    existing = read_manifest(store, key)
    existed_before = existing is not None
    if existing is None:
        commit = _upload_and_commit(store, prefix, uploader, paths, make_manifest)
        if commit.ours:
            return PublishResult(url, commit.manifest, this_run(), already_published=False, wrote_manifest=True)
        existing, files = commit.manifest, commit.files

    # The prefix is committed. Never change what it serves; only restore objects it lists, byte for byte.
    if files is None:
        files = uploader.hash_files(paths)  # unchanged files come from the hash cache, unread
    _hold_published(store, prefix, uploader, existing, make_manifest(_entries(files)), files, what=what, root=root)
    return PublishResult(url, existing, this_run(), already_published=existed_before, wrote_manifest=False)


class _Commit(NamedTuple):
    """How a first upload ended: this run's manifest committed (`ours`), or another publisher's found in its place."""

    manifest: Manifest
    ours: bool
    files: list[LocalFile] | None  # the files this run uploaded and hashed, None when the upload stopped


def _upload_and_commit(
    store: S3Store,
    prefix: str,
    uploader: Uploader,
    paths: list[str],
    make_manifest: Callable[[list[ManifestFile]], Manifest],
) -> _Commit:
    key = manifest_key(prefix)
    try:
        # The upload ends by confirming every object against a fresh listing (skipped ones by the ETag of
        # the HeadObject that matched them, written ones by the ETag S3 returned), so the manifest may follow.
        files, _ = uploader.upload_tree(prefix, paths, guard=manifest_guard(store, key))
    except BuildError:
        existing = read_manifest(store, key)
        if existing is None:
            raise  # nothing committed: a plain failure; re-running resumes
        return _Commit(existing, ours=False, files=None)  # another publisher committed meanwhile
    manifest = make_manifest(_stamped(files, store, prefix))
    if store.put_if_absent(key, manifest.to_json().encode()):
        return _Commit(manifest, ours=True, files=files)
    existing = read_manifest(store, key)  # lost the race to commit: compare with the winner
    if existing is None:
        raise BuildError(f"{store.url(key)} vanished while publishing; re-run")
    return _Commit(existing, ours=False, files=files)


def _hold_published(
    store: S3Store,
    prefix: str,
    uploader: Uploader,
    existing: Manifest,
    local: Manifest,
    files: list[LocalFile],
    *,
    what: str,
    root: Path,
) -> None:
    """A committed prefix against the local tree: the same content, every listed object present (restored if
    missing) and holding the bytes it lists, and nothing else under it; else a BuildError saying what to delete."""
    url = store.url(prefix)
    if not existing.same_content(local):
        diffs = "; ".join(local.differences(existing))
        raise BuildError(
            f"{url} already holds a complete {what} (manifest of {existing.created_at}) that differs from {root}: "
            f"{diffs}. Serving may be reading it, so publish never overwrites it. To replace it on purpose, "
            f"delete it first (aws s3 rm --recursive {url}) and re-run",
            EXIT_FAILED,
        )
    repaired = uploader.upload(prefix, files)  # one listing; sends data only for missing objects
    if repaired.objects_uploaded:
        _confirm(store, prefix, existing, url)
    # Same size and sha256 metadata say nothing about the bytes: compare ETags with the local tree (no download).
    damaged = uploader.check_etags(prefix, files)
    if damaged:
        raise BuildError(
            f"{url} is published (manifest of {existing.created_at}) but its objects are not the bytes it lists: "
            + _first_five(damaged, "; ")
            + f". Publish never overwrites a published object (serving may be reading it): delete the damaged ones "
            f"(aws s3 rm {url}<file>) and publish again, which restores them from {root}; or delete the prefix "
            f"(aws s3 rm --recursive {url}) and publish again",
            EXIT_FAILED,
        )
    unlisted = unlisted_keys(store, prefix, existing)
    if unlisted:
        raise BuildError(
            f"{url} is published (manifest of {existing.created_at}) but also holds objects its manifest does not "
            f"list: {_first_five(unlisted, ', ')}"
            + ". Serving mounts the whole prefix and nothing checked them: delete them ("
            + "; ".join(f"aws s3 rm {url}{key}" for key in unlisted[:3])
            + ("; ..." if len(unlisted) > 3 else "")
            + ") and publish again",
            EXIT_FAILED,
        )


def _first_five(items: list[str], sep: str) -> str:
    """The first five of `items` and how many more there are."""
    return sep.join(items[:5]) + (f" (and {len(items) - 5} more)" if len(items) > 5 else "")


def unlisted_keys(store: S3Store, prefix: str, manifest: Manifest) -> list[str]:
    """Objects under a committed prefix that its manifest does not list (relative to the prefix): publish and verify
    both refuse them, because serving mounts the whole prefix."""
    listed = {prefix + f.path for f in manifest.files} | {prefix + MANIFEST_NAME}
    return sorted(key.removeprefix(prefix) for key in store.list_objects(prefix) if key not in listed)


def _entries(files: list[LocalFile]) -> list[ManifestFile]:
    return [ManifestFile(f.path, f.size, f.sha256) for f in files]


def _stamped(files: list[LocalFile], store: S3Store, prefix: str) -> list[ManifestFile]:
    """The manifest's entries with the ETag and Last-Modified S3 shows for each confirmed object (one listing), so
    the shallow checks (verify, serving's init step) can tell a replacement from the object published."""
    listed = store.list_stamped(prefix)
    out = []
    for f in files:
        o = listed.get(prefix + f.path)
        if o is None or o.size != f.size or (f.etag is not None and o.etag != f.etag):
            raise BuildError(
                f"{store.url(prefix + f.path)} changed between the upload's last check and the manifest; nothing "
                "was committed: re-run (another publisher may be writing this prefix)"
            )
        out.append(ManifestFile(f.path, f.size, f.sha256, etag=o.etag, mtime=o.mtime))
    return out


def _confirm(store: S3Store, prefix: str, manifest: Manifest, url: str) -> None:
    problems = store.check_present(prefix, manifest.files)
    if problems:
        raise BuildError(
            f"{url} has a manifest but its objects disagree with it: "
            + "; ".join(problems[:5])
            + ". Run python -m model_build verify --deep; delete the prefix and publish again if it fails",
            EXIT_FAILED,
        )


def read_build_record(from_dir: Path, plan: ArtifactPlan) -> BuildRecord:
    compile_cmd = f"python -m model_build compile {plan.profile} --out {from_dir}"
    if not from_dir.is_dir():
        raise BuildError(f"--from {from_dir} is not a directory; pass the --out directory of compile")
    path = from_dir / BUILD_RECORD_NAME
    if not path.is_file():
        raise BuildError(
            f"{from_dir} has no {BUILD_RECORD_NAME}, so it is not a finished compile (compile writes it last). "
            f"Compile first: {compile_cmd}, or run {build_command(plan.profile)}"
        )
    try:
        record = BuildRecord.from_json(path.read_text())
    except (ValueError, TypeError) as err:
        raise BuildError(f"{path} is unreadable ({err}); recompile: {compile_cmd}") from None
    stand_in = Manifest(digest=record.digest, inputs=record.inputs, files=[], created_at=record.created_at)
    problems = mismatches(stand_in, plan.digest, plan.inputs)
    if problems:
        raise BuildError(
            f"{from_dir} was compiled for different inputs than profile {plan.profile} needs:\n"
            + "\n".join(f"  - {p}" for p in problems)
            + f"\nRecompile it: {compile_cmd}   (or {build_command(plan.profile)})",
            EXIT_FAILED,
        )
    return record


def publish_artifact(store: S3Store, plan: ArtifactPlan, from_dir: Path) -> PublishResult:
    """Publish a compile's output to artifacts/<digest>/ after checking it was built for this profile."""
    record = read_build_record(from_dir, plan)

    def make_manifest(files: list[ManifestFile]) -> Manifest:
        # Timestamps come from the build record, so every publisher of one compile writes identical bytes.
        return Manifest(
            digest=plan.digest, inputs=plan.inputs, files=files, created_at=record.created_at, builder=record.builder
        )

    return publish_tree(store, artifact_prefix(plan.digest), from_dir, make_manifest, what="artifact")
