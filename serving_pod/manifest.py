"""The artifact manifest: written last by `publish`, checked by `verify` and the serving init step.

Standard library only: the serving pod's init container runs this module with the Neuron image's own
python3 against the read-only S3 mount, with no extra packages.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MANIFEST_SCHEMA = 1  # the file names and keys are in config/bucket_layout.py


@dataclass(frozen=True)
class ManifestFile:
    """One listed object. `etag` and `mtime` are what S3 itself reported for the object publish confirmed (from the
    listing taken after every upload): S3 computes both, no writer can set them, and a replacement changes them, so
    a check compares them instead of reading the bytes. Manifests written before they were recorded have "" and 0:
    nothing to compare. They are stamps of one upload, not content: `same_content` ignores them."""

    path: str  # relative to the artifact prefix, "/" separated
    size: int
    sha256: str
    etag: str = ""  # S3's ETag (MD5 of the bytes for a single PUT under SSE-S3; of the parts' MD5s, "-N", multipart)
    mtime: int = 0  # S3's Last-Modified in whole seconds since the epoch: the mtime Mountpoint shows for the file


@dataclass(frozen=True)
class Manifest:
    digest: str
    inputs: dict[str, Any]  # model_build.digest.artifact_inputs(...) at compile time
    files: list[ManifestFile]
    created_at: str
    builder: dict[str, str] = field(default_factory=dict)  # versions of NxDI, neuronx-cc, torch-neuronx, ...
    schema: int = MANIFEST_SCHEMA

    def to_json(self) -> str:
        return _dump(self)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        data = _load(text, "manifest", "rebuild with this version of model_build")
        files = [ManifestFile(**f) for f in data.pop("files")]
        return cls(files=files, **data)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def same_content(self, other: Manifest) -> bool:
        """Same artifact: digest, inputs and every file's path, size and sha256 (timestamps may differ)."""
        return _content_key(self) == _content_key(other)

    def differences(
        self, other: Manifest, *, mine: str = "local", theirs: str = "published", limit: int = 5
    ) -> list[str]:
        """The first few ways two manifests differ, as sentences."""
        ours, others = {f.path: f for f in self.files}, {f.path: f for f in other.files}
        out = []
        for path in sorted(set(ours) | set(others)):
            a, b = ours.get(path), others.get(path)
            if a is None:
                out.append(f"{path}: only {theirs}")
            elif b is None:
                out.append(f"{path}: only {mine}")
            elif (a.size, a.sha256) != (b.size, b.sha256):
                out.append(
                    f"{path}: {mine} {a.size} bytes sha256 {a.sha256[:12]}..., {theirs} {b.size} bytes {b.sha256[:12]}..."
                )
        if self.digest != other.digest or self.inputs != other.inputs:
            out.insert(0, f"digest or inputs differ ({mine} {self.digest}, {theirs} {other.digest})")
        return out[:limit] + ([f"... and {len(out) - limit} more"] if len(out) > limit else [])


def _content_key(m: Manifest) -> tuple[Any, ...]:
    return (m.digest, m.inputs, sorted((f.path, f.size, f.sha256) for f in m.files))


@dataclass(frozen=True)
class BuildRecord:
    """What `compile` built, recorded next to its output: `publish` turns it into the manifest."""

    profile: str
    digest: str
    inputs: dict[str, Any]
    builder: dict[str, str]
    created_at: str
    neuron_config: dict[str, Any]  # the NxDI keyword arguments used ({"target": {...}, "draft": {...} | None})
    schema: int = MANIFEST_SCHEMA

    def to_json(self) -> str:
        return _dump(self)

    @classmethod
    def from_json(cls, text: str) -> BuildRecord:
        return cls(**_load(text, "build record", "recompile"))


def _dump(record: Manifest | BuildRecord) -> str:
    """The one JSON form of both files: sorted keys, so the same record is the same bytes."""
    return json.dumps(asdict(record), indent=1, sort_keys=True)


def _load(text: str, what: str, fix: str) -> dict[str, Any]:
    """A manifest's or build record's fields, refused with `fix` unless written with this MANIFEST_SCHEMA: both
    files share the schema number, so a reader never guesses at an older layout."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"{what} is {type(data).__name__} JSON, not an object; {fix}")
    if data.get("schema") != MANIFEST_SCHEMA:
        raise ValueError(f"{what} schema {data.get('schema')!r} is not {MANIFEST_SCHEMA}; {fix}")
    return data


def mismatches(manifest: Manifest, expected_digest: str, expected_inputs: dict[str, Any]) -> list[str]:
    """Every way the manifest disagrees with the profile the server is about to run, as sentences."""
    problems: list[str] = []
    if manifest.digest != expected_digest:
        problems.append(f"digest: manifest has {manifest.digest}, profile needs {expected_digest}")
    _differ("", expected_inputs, manifest.inputs, problems)
    return problems


def _differ(path: str, want: Any, have: Any, out: list[str]) -> None:
    """Name the innermost differing key (e.g. neuron_config.target.ctx_batch_size), not a whole dict."""
    if isinstance(want, dict) and isinstance(have, dict):
        for key in sorted(set(want) | set(have)):
            _differ(f"{path}{key}.", want.get(key), have.get(key), out)
    elif want != have:
        out.append(f"{path.rstrip('.')}: artifact was built with {json.dumps(have)}, profile needs {json.dumps(want)}")


def file_problems(root: Path, files: list[ManifestFile], *, deep: bool = False, s3_times: bool = False) -> list[str]:
    """Local copies (a mount or a directory) checked against a file list: sizes always, sha256 if deep.

    `s3_times`: `root` is a Mountpoint for S3 mount, whose files carry their object's Last-Modified as mtime
    (awslabs/mountpoint-s3 mountpoint-s3-fs/src/superblock/inode.rs, InodeStat::for_file; it exposes no ETag or
    checksum: no extended attributes, doc/SEMANTICS.md). A file whose mtime is not the one the manifest recorded
    was written again after publish: it alone is hashed, so a same-size replacement fails without reading the
    others, and a byte-identical re-send (publish restoring a deleted object) passes."""
    problems: list[str] = []
    for f in files:
        path = root / f.path
        try:
            st = path.stat()
        except OSError:
            problems.append(f"{f.path}: missing from {root}")
            continue
        rewritten = s3_times and f.mtime > 0 and int(st.st_mtime) != f.mtime
        if st.st_size != f.size:
            problems.append(f"{f.path}: {st.st_size} bytes on disk, manifest says {f.size} (truncated or replaced)")
        elif (deep or rewritten) and (actual := sha256_file(path)) != f.sha256:
            how = (
                f"written again after publish (S3 time {int(st.st_mtime)}, manifest recorded {f.mtime}) and "
                if rewritten
                else ""
            )
            problems.append(f"{f.path}: {how}sha256 is {actual}, manifest says {f.sha256} (corrupted or replaced)")
    return problems


def sha256_file(path: Path, chunk: int = 8 << 20) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
