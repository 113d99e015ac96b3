"""legacy-v0: the blog's recipe and the seed reproduction, on aws-neuron/upstreaming-to-vllm (vLLM 0.9.x).

Catalogue: images `pytorch-inference-vllm-neuronx:0.9.x-...`, the only ones with NxDI fused draft-model
speculation; the fork is end of life upstream. Artifact: the NxDI compile of model_build (sharded checkpoint
with the fused draft), checked by model_build.check_mounted before vLLM starts.
"""

from __future__ import annotations

import json
from typing import Any

NAME = "legacy-v0"
METHODS = ("none", "fused-draft")
# Any --speculative-config turns on NxDI fused speculation with the draft on this fork; "eagle" is what the
# reference sample and the Neuron tutorial pass and does not switch EAGLE on.
SPECULATIVE_METHOD = "eagle"


def serves_vllm(version: tuple[int, int]) -> bool:
    return version < (0, 10)


def neuron_args(overrides: dict[str, Any], *, max_num_seqs: int) -> list[str]:
    """How NxDI settings reach this fork's vLLM."""
    return ["--override-neuron-config", json.dumps(overrides, separators=(",", ":"), sort_keys=True)]


def env() -> dict[str, str]:
    """The fork serves Neuron through vLLM's V0 engine and NxDI only."""
    return {"VLLM_USE_V1": "0", "VLLM_NEURON_FRAMEWORK": "neuronx-distributed-inference"}
