"""NeuronQwen3ForCausalLM of NxDI v0.6.10598 (models/qwen3/modeling_qwen3.py): its config classes and a compile that
writes the outputs the release writes, small."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from neuronx_distributed_inference.models.config import InferenceConfig, NeuronConfig

SHARD_BYTES = 4096


class NeuronQwen3Model:
    """The model class a fused speculation config names as its worker."""


class NeuronQwen3ForCausalLM:
    _model_cls = NeuronQwen3Model

    def __init__(self, model_path: str, config: InferenceConfig) -> None:
        self.model_path, self.config = model_path, config

    @classmethod
    def get_neuron_config_cls(cls) -> type:
        return NeuronConfig

    @classmethod
    def get_config_cls(cls) -> type:
        return InferenceConfig

    def compile(self, out: str) -> None:
        neuron = self.config.neuron_config
        root = Path(out)
        (root / "weights").mkdir(parents=True, exist_ok=True)
        fused = self.config.fused_spec_config
        record: dict[str, Any] = {
            "neuron_config": neuron.to_json(),
            "draft_model_path": getattr(fused, "draft_model_path", None),
        }
        (root / "neuron_config.json").write_text(json.dumps(record, default=str, sort_keys=True))
        rng = random.Random(json.dumps(record, default=str, sort_keys=True))
        (root / "model.pt").write_bytes(rng.randbytes(SHARD_BYTES))
        for rank in range(int(neuron.tp_degree)):
            (root / "weights" / f"tp{rank}_sharded_checkpoint.safetensors").write_bytes(rng.randbytes(SHARD_BYTES))
        print(f"NxDI stand-in: compiled {self.model_path} at TP {neuron.tp_degree} into {out}", flush=True)
