"""The models bucket's layout: every layer that reads or writes the bucket (stacks for IAM scopes, charts for
mount paths, model_build for uploads, bench and ops for results) takes its keys and file names from here, and
where pods mount it.

Leaf module: imports nothing at all, so any layer may read it without pulling in another, and serving's init
check (serving_pod/check_mounted.py, standard library only) ships it.
"""

from __future__ import annotations

ARTIFACTS_PREFIX = "artifacts/"  # compiled artifacts, content-addressed: artifacts/<profile digest>/
CHECKPOINTS_PREFIX = "checkpoints/"  # staged Hugging Face checkpoints: checkpoints/<hf_id>/<revision>/
RESULTS_PREFIX = "results/"  # benchmark results: results/<run id>.json

MANIFEST_NAME = "manifest.json"  # the last file of every published prefix (artifact or checkpoint)
BUILD_RECORD_NAME = "build-inputs.json"  # the last file `compile` writes into its output directory
# Every manifest key (S3 wildcards match "/" too): checkpoints/<hf_id>/<revision>/ holds two levels.
MANIFEST_KEY_PATTERNS = (f"{ARTIFACTS_PREFIX}*/{MANIFEST_NAME}", f"{CHECKPOINTS_PREFIX}*/{MANIFEST_NAME}")

MOUNT_PATH = "/models"  # where pods mount the bucket read-only (Mountpoint for S3), so <MOUNT_PATH>/<key>


def models_bucket_name(name: str, account: str, region: str) -> str:
    """The models bucket of deployment `name`: deterministic per account and region, so every tool finds it from the
    config alone, and the account that must own it is in its name (models_bucket_account)."""
    return f"{name}-models-{account}-{region}"


def models_bucket_account(bucket: str) -> str | None:
    """The account a models bucket name says owns it (models_bucket_name's <account>), None for another name."""
    parts = bucket.split("-models-")
    account = parts[-1].split("-", 1)[0] if len(parts) > 1 else ""
    return account if len(account) == 12 and account.isdigit() else None


def artifact_prefix(digest: str) -> str:
    return f"{ARTIFACTS_PREFIX}{digest}/"


def checkpoint_prefix(hf_id: str, revision: str) -> str:
    return f"{CHECKPOINTS_PREFIX}{hf_id}/{revision}/"


def results_key(run_id: str) -> str:
    return f"{RESULTS_PREFIX}{run_id}.json"


def manifest_key(prefix: str) -> str:
    """The manifest of a published prefix (artifact_prefix or checkpoint_prefix)."""
    return f"{prefix}{MANIFEST_NAME}"


def mounted(prefix: str, root: str = MOUNT_PATH) -> str:
    """Where a prefix is inside a pod that mounts the bucket at root (no trailing slash)."""
    return f"{root.rstrip('/')}/{prefix}".rstrip("/")


# `bench sweep`'s crossover: the latest one at a fixed key, where the endpoint's spill threshold reads it
# (schema: config/crossover.py CrossoverFile, docs/sweep.md), and each sweep's own copy beside its results.
CROSSOVER_KEY = f"{RESULTS_PREFIX}crossover.json"


def sweep_prefix(run_id: str) -> str:
    return f"{RESULTS_PREFIX}{run_id}/"


def sweep_file_name(run_id: str) -> str:
    """The sweep file the Job writes and uploads under sweep_prefix(run_id)."""
    return f"{run_id}.json"


def sweep_key(run_id: str) -> str:
    return sweep_prefix(run_id) + sweep_file_name(run_id)
