"""The models bucket's layout: every layer that reads or writes the bucket (stacks for IAM scopes, charts for
mount paths, model_build for uploads, bench and ops for results) takes its keys from here.

Leaf module: imports nothing of ours, so any layer may read it without pulling in another.
"""

from __future__ import annotations

ARTIFACTS_PREFIX = "artifacts/"  # compiled artifacts, content-addressed: artifacts/<profile digest>/
CHECKPOINTS_PREFIX = "checkpoints/"  # staged Hugging Face checkpoints: checkpoints/<hf_id>/<revision>/
RESULTS_PREFIX = "results/"  # benchmark results: results/<run id>.json


def artifact_prefix(digest: str) -> str:
    return f"{ARTIFACTS_PREFIX}{digest}/"


def checkpoint_prefix(hf_id: str, revision: str) -> str:
    return f"{CHECKPOINTS_PREFIX}{hf_id}/{revision}/"


def results_key(run_id: str) -> str:
    return f"{RESULTS_PREFIX}{run_id}.json"


# `bench sweep`'s crossover: the latest one at a fixed key, where the endpoint's spill threshold reads it
# (schema: bench/sweep_report.py CrossoverFile, docs/sweep.md), and each sweep's own copy beside its results.
CROSSOVER_KEY = f"{RESULTS_PREFIX}crossover.json"


def sweep_prefix(run_id: str) -> str:
    return f"{RESULTS_PREFIX}{run_id}/"
