"""vllm-neuron-v1: the vLLM Neuron plugin on vLLM's V1 engine (vllm-project/vllm-neuron 0.2.x, vLLM 0.10+).

Catalogue: `pytorch-inference-vllm-neuronx` images with vLLM 0.10 or later whose SDK still ships NxDI
(2.26 - 2.31; the config refuses 2.32+). The plugin's README says "Only Eagle V1 is supported": no
draft-model speculation, no EAGLE3. Artifact: the same NxDI compile of model_build, checked by
model_build.check_mounted before vLLM starts.
"""

from __future__ import annotations

import json
from typing import Any

NAME = "vllm-neuron-v1"
METHODS = ("none", "eagle")
SPECULATIVE_METHOD = "eagle"  # selects EAGLE on the plugin


def serves_vllm(version: tuple[int, int]) -> bool:
    return version >= (0, 10)


def neuron_args(overrides: dict[str, Any], *, max_num_seqs: int) -> list[str]:
    """The plugin takes Neuron settings inside --additional-config and needs one KV block per sequence when
    prefix caching is off (vllm-project/vllm-neuron 0.2.0 README)."""
    return [
        "--additional-config",
        json.dumps({"override_neuron_config": overrides}, separators=(",", ":"), sort_keys=True),
        "--num-gpu-blocks-override",
        str(max_num_seqs),
        "--no-enable-prefix-caching",
    ]


def env() -> dict[str, str]:
    return {}
