"""The generated vLLM command lines use only flags the pinned vLLM versions accept."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from charts.vllm_args import vllm_args
from config import parse_config
from tests.conftest import ROOT

FIXTURES = Path(__file__).parent / "fixtures"


def recorded_flags(name: str) -> set[str]:
    """Flags dumped from the real `vllm serve` parser of the pinned release (source in the fixture)."""
    data = json.loads((FIXTURES / name).read_text())
    assert data["source"] and data["method"] == "parser dump"
    return set(data["flags"])


def plugin_config():
    """The vllm-neuron example, plus a DFlash profile at TP 8 on one device (LNC 1)."""
    data = yaml.safe_load((ROOT / "config" / "vllm-neuron.yaml").read_text())
    data["models"]["dflash-draft"] = {
        "hf_id": "example-org/Qwen3-32B-DFlash",
        "revision": "0" * 40,
        "tokenizer_family": "qwen3",
    }
    data["profiles"].append(
        {
            "name": "dflash",
            "placement": {"devices": 1, "logical_neuron_cores": 1, "tensor_parallel_size": 8},
            "decoding": {"method": "dflash", "draft": "dflash-draft", "num_speculative_tokens": 15},
        }
    )
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


def test_vllm_neuron_image_args_are_flags_vllm_0_29_0_accepts():
    config = plugin_config()
    accepted = recorded_flags("vllm_0_29_0_flags.json")
    for p in config.profiles:
        args = vllm_args(config, p)
        assert not set(_flags(args)) - accepted, p.name
        assert "--override-neuron-config" not in args  # gone in the plugin; Neuron settings go in --additional-config
        neuron = json.loads(args[args.index("--additional-config") + 1])["neuron_config"]
        # one bucket each, equal to the scheduler limits ("The largest bucket must equal ...", additional-config.md)
        assert neuron["num_seqs_buckets"] == [p.max_num_seqs]
        assert neuron["num_batched_tokens_buckets"] == [int(args[args.index("--max-num-batched-tokens") + 1])]
        assert "--no-enable-prefix-caching" in args


def test_plugin_speculation_turns_off_what_the_plugin_cannot_combine_with_it():
    config = plugin_config()
    base, eagle3, dflash = (vllm_args(config, p) for p in config.profiles)
    assert "--no-async-scheduling" not in base and "--no-async-scheduling" in eagle3
    spec = json.loads(eagle3[eagle3.index("--speculative-config") + 1])
    assert spec["method"] == "eagle3" and spec["num_speculative_tokens"] == 3
    assert spec["model"].startswith("/models/checkpoints/RedHatAI/Qwen3-32B-speculator.eagle3/")
    for flag in ("--no-async-scheduling", "--no-enable-chunked-prefill", "--no-enable-prefix-caching"):
        assert flag in dflash
    assert json.loads(dflash[dflash.index("--additional-config") + 1])["neuron_config"]["quantization"] == "bf16"
    assert json.loads(dflash[dflash.index("--speculative-config") + 1])["method"] == "dflash"


def test_every_flag_takes_its_value_and_values_are_well_formed(default_config):
    for p in default_config.profiles:
        args = vllm_args(default_config, p)[2:]
        pairs = dict(zip(args[::2], args[1::2], strict=True))
        for key in ("--override-neuron-config", "--speculative-config"):
            if key in pairs:
                assert isinstance(json.loads(pairs[key]), dict)
        assert int(pairs["--tensor-parallel-size"]) == p.placement.tensor_parallel_size
