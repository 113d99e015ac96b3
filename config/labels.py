"""The Kubernetes labels and annotations we put on objects and select them by: charts write them, the alarms'
runbook text and any `kubectl -l` selector read them.

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

NAME = "app.kubernetes.io/name"  # what the workload is: vllm, model-build, stage-checkpoints, bench
INSTANCE = "app.kubernetes.io/instance"  # which one: the serving profile's name
PART_OF = "app.kubernetes.io/part-of"
PROJECT = "trn-specdec"
PROFILE = "trn-specdec/profile"
MODEL = "trn-specdec/model"
DECODING = "trn-specdec/decoding"
ARTIFACT_DIGEST = "trn-specdec/artifact-digest"  # a label on build Jobs, an annotation on serving pods
# On a ScaledObject paused by an ops command (or a Deployment scaled to 0 by one): which command, when, pid, host.
PAUSED_BY = "trn-specdec/paused-by"

VLLM_POD_LABELS = {NAME: "vllm"}  # every vLLM pod carries it; the NetworkPolicy selects on it


def workload_labels(name: str) -> dict[str, str]:
    """What every object of one kind of workload carries."""
    return {NAME: name, PART_OF: PROJECT}


def vllm_selector(profile: str) -> dict[str, str]:
    """The pods of one serving profile: its Deployment's and Services' selector (charts/vllm_service.py), the
    endpoint's headless Service of that profile's replicas (charts/endpoint.py) and the `kubectl -l` that finds them
    (ops/out_of_service.py)."""
    return {**VLLM_POD_LABELS, INSTANCE: profile}
