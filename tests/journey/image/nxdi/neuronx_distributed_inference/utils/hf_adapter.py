"""load_pretrained_config of NxDI v0.6.10598 (utils/hf_adapter.py): reads the checkpoint's config.json into the
inference config."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def load_pretrained_config(model_path: str) -> Callable[[Any], None]:
    def load(config: Any) -> None:
        hf = json.loads((Path(model_path) / "config.json").read_text())
        config.__dict__.update({k: v for k, v in hf.items() if k not in ("neuron_config", "fused_spec_config")})

    return load
