"""The generated vLLM command lines use only flags the pinned vLLM versions accept."""

from __future__ import annotations

import json
from pathlib import Path

from charts.vllm_args import vllm_args
from config import parse_config
from tests.conftest import default_config_dict

FIXTURES = Path(__file__).parent / "fixtures"


def recorded_flags(name: str) -> set[str]:
    """Flags dumped from the real `vllm serve` parser of the pinned release (source in the fixture)."""
    data = json.loads((FIXTURES / name).read_text())
    assert data["source"] and data["method"] == "parser dump"
    return set(data["flags"])


def eagle_config():
    data = default_config_dict()
    data["serving"]["image"]["tag"] = "0.11.0-neuronx-py312-sdk2.27.1-ubuntu24.04"
    data["models"]["eagle-draft"] = {
        "hf_id": "example-org/Qwen3-32B-EAGLE",
        "revision": "0" * 40,
        "tokenizer_family": "qwen3",
    }
    data["profiles"][1]["decoding"] = {"method": "eagle", "draft": "eagle-draft", "num_speculative_tokens": 5}
    return parse_config(data)


def _flags(args: list[str]) -> list[str]:
    return [a for a in args if a.startswith("--")]


def test_legacy_image_args_are_flags_vllm_0_9_1_accepts(default_config):
    accepted = recorded_flags("vllm_0_9_1_flags.json")
    for p in default_config.profiles:
        args = vllm_args(default_config, p)
        assert args[0] == "serve" and args[1].startswith("/models/checkpoints/")
        unknown = set(_flags(args)) - accepted
        assert not unknown, f"{p.name}: vLLM 0.9.1 rejects {unknown}"


def test_vllm_neuron_image_args_are_flags_vllm_0_11_0_accepts():
    config = eagle_config()
    accepted = recorded_flags("vllm_0_11_0_flags.json")
    for p in config.profiles:
        args = vllm_args(config, p)
        assert not set(_flags(args)) - accepted
        assert "--override-neuron-config" not in args  # removed in 0.11; goes inside --additional-config
        extra = json.loads(args[args.index("--additional-config") + 1])
        assert extra["override_neuron_config"]["save_sharded_checkpoint"] is True
        assert args[args.index("--num-gpu-blocks-override") + 1] == str(p.max_num_seqs)


def test_every_flag_takes_its_value_and_values_are_well_formed(default_config):
    for p in default_config.profiles:
        args = vllm_args(default_config, p)[2:]
        pairs = dict(zip(args[::2], args[1::2], strict=True))
        for key in ("--override-neuron-config", "--speculative-config"):
            if key in pairs:
                assert isinstance(json.loads(pairs[key]), dict)
        assert int(pairs["--tensor-parallel-size"]) == p.placement.tensor_parallel_size
