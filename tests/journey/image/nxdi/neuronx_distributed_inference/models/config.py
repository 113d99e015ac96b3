"""NeuronConfig and friends of NxDI v0.6.10598 (src/neuronx_distributed_inference/models/config.py), as far as
model_build/compile.py uses them. Unlike the real NeuronConfig, which drops an unknown keyword silently, this one
refuses it: the journey must fail where our build passes a key the pinned release would ignore."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).resolve().parents[5] / "model_build" / "fixtures" / "nxdi_v0_6_10598.json"
KNOWN = set(json.loads(RECORDED.read_text())["neuron_config_kwargs"])


class NeuronConfig:
    def __init__(self, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - KNOWN)
        if unknown:
            raise TypeError(f"NxDI v0.6.10598's NeuronConfig would silently ignore {unknown} (models/config.py)")
        self.__dict__.update(kwargs)

    def to_json(self) -> dict[str, Any]:
        return {k: (v.__dict__ if hasattr(v, "__dict__") else v) for k, v in self.__dict__.items()}


class OnDeviceSamplingConfig:
    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)


class InferenceConfig:
    def __init__(self, neuron_config: NeuronConfig, fused_spec_config: Any = None, load_config: Any = None) -> None:
        self.neuron_config = neuron_config
        self.fused_spec_config = fused_spec_config
        if load_config is not None:
            load_config(self)


class FusedSpecNeuronConfig:
    def __init__(self, worker_cls: Any, draft_config: Any = None, draft_model_path: str | None = None) -> None:
        self.worker_cls, self.draft_config, self.draft_model_path = worker_cls, draft_config, draft_model_path
