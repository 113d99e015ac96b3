"""Stage Hugging Face checkpoints into the bucket once, at pinned revisions (no hub access at serve time).

snapshot_download into local scratch (it resumes and skips files it already has), then the same
idempotent uploader as artifacts publishes to checkpoints/<hf_id>/<revision>/ with a manifest last,
so `compile` and serving can tell a complete checkpoint from a half-staged one. A model whose manifest
is already there is not downloaded again (tens of GB) unless forced.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

from config.bucket_layout import checkpoint_prefix, manifest_key
from config.profiles import HfModel
from config.schema import DeploymentConfig
from model_build.errors import BuildError
from model_build.publish import PublishResult, publish_tree, read_manifest
from model_build.store import S3Store, TransferStats
from serving_pod.manifest import Manifest, ManifestFile

# Weights in formats NxDI does not load: skip them (Qwen3 repos ship safetensors).
IGNORE_PATTERNS = ["*.bin", "*.pth", "*.pt", "*.gguf", "*.msgpack", "*.h5", "original/*"]

Downloader = Callable[[HfModel, Path], Path]


def select_models(config: DeploymentConfig, requested: Iterable[str] | None) -> list[str]:
    keys = list(requested or []) or config.models_in_use()
    unknown = [k for k in keys if k not in config.models]
    if unknown:
        raise BuildError(
            f"--model {', '.join(unknown)} is not a key of models in the config; use one of {', '.join(config.models)}"
        )
    return list(dict.fromkeys(keys))


def hf_download(model: HfModel, scratch: Path) -> Path:
    """snapshot_download at the pinned revision into scratch/<hf_id>/<revision> (huggingface_hub imported lazily)."""
    try:
        hub = importlib.import_module("huggingface_hub")
    except ImportError:
        raise BuildError(
            "stage-checkpoints downloads with huggingface_hub, which this Python does not have; install it "
            "(pip install huggingface_hub) or run it in the Neuron image, which ships it"
        ) from None
    local = scratch / model.hf_id / model.revision
    local.mkdir(parents=True, exist_ok=True)
    hub.snapshot_download(
        repo_id=model.hf_id, revision=model.revision, local_dir=str(local), ignore_patterns=IGNORE_PATTERNS
    )
    return local


def publish_checkpoint(store: S3Store, model: HfModel, local_dir: Path) -> PublishResult:
    created_at = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        hub_version = importlib.metadata.version("huggingface_hub")
    except importlib.metadata.PackageNotFoundError:
        hub_version = "absent"

    def make_manifest(files: list[ManifestFile]) -> Manifest:
        return Manifest(
            digest=model.revision,
            inputs={"kind": "checkpoint", "hf_id": model.hf_id, "revision": model.revision},
            files=files,
            created_at=created_at,
            builder={"huggingface_hub": hub_version},
        )

    return publish_tree(
        store, checkpoint_prefix(model.hf_id, model.revision), local_dir, make_manifest, what="checkpoint"
    )


def stage_checkpoints(
    store: S3Store,
    config: DeploymentConfig,
    keys: list[str],
    *,
    scratch: Path,
    download: Downloader = hf_download,
    log: Callable[[str], None] = print,
    force: bool = False,
) -> dict[str, PublishResult]:
    """Stage each model; one already staged (its manifest is there) is skipped unless `force`."""
    results = {}
    for key in keys:
        model = config.models[key]
        prefix = checkpoint_prefix(model.hf_id, model.revision)
        staged = None if force else read_manifest(store, manifest_key(prefix))
        if staged is not None:
            results[key] = PublishResult(store.url(prefix), staged, TransferStats(), True, False)
            log(f"{key}: already staged at {store.url(prefix)} (pass --force to download and check it again)")
            continue
        log(f"{key}: downloading {model.hf_id}@{model.revision} into {scratch}")
        local = download(model, scratch)
        results[key] = publish_checkpoint(store, model, local)
        log(f"{key}: {results[key].summary()}")
    return results
