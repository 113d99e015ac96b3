"""The profile digest: stable, sensitive to every artifact input, blind to everything else."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from config import parse_config
from config.bucket_layout import artifact_prefix, checkpoint_prefix
from model_build.digest import artifact_inputs, profile_digest
from tests.conftest import EXAMPLE_ACCOUNT, ROOT, default_config_dict


def _digests(data: dict[str, Any]) -> dict[str, str]:
    config = parse_config(data)
    return {p.name: profile_digest(config, p) for p in config.profiles}


def _reversed(value: Any) -> Any:
    """Same data, every mapping in reverse key order."""
    if isinstance(value, dict):
        return {k: _reversed(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed(v) for v in value]
    return value


def test_digest_is_stable_across_processes_and_hash_seeds():
    code = (
        "from config import load_config; from model_build.digest import profile_digest; c = load_config(); "
        "print({p.name: profile_digest(c, p) for p in c.profiles})"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    ]
    assert runs[0] == runs[1]
    assert runs[0].strip() == str(_digests(default_config_dict()))


def test_digest_ignores_key_order_in_the_config_file():
    data = default_config_dict()
    assert _digests(_reversed(data)) == _digests(data)


def test_digest_is_a_hex_prefix_and_paths_follow_it(default_config):
    profile = default_config.profile("speculative")
    digest = profile_digest(default_config, profile)
    assert len(digest) == 20 and int(digest, 16) >= 0
    assert artifact_prefix(digest) == f"artifacts/{digest}/"
    assert checkpoint_prefix("Qwen/Qwen3-32B", "a" * 40) == f"checkpoints/Qwen/Qwen3-32B/{'a' * 40}/"


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        node = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[leaf] = value

    return change


def _both(*changes: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        for c in changes:
            c(data)

    return change


NEW_REVISION = "0123456789abcdef0123456789abcdef01234567"

# One case per artifact input (the keys of artifact_inputs): change it alone, the speculative digest must move.
RELEVANT: dict[str, Callable[[dict[str, Any]], None]] = {
    "image tag (image, sdk_version)": _set("serving.image.tag", "0.9.1-neuronx-py311-sdk2.27.0-ubuntu22.04"),
    "image repository (image)": _set(
        "serving.image.repository", f"{EXAMPLE_ACCOUNT}.dkr.ecr.us-east-2.amazonaws.com/vllm"
    ),
    "vllm version (vllm_version)": _set("serving.image.tag", "0.9.2-neuronx-py311-sdk2.26.1-ubuntu22.04"),
    "target revision": _set("models.qwen3-32b.revision", NEW_REVISION),
    "target model": _set("models.qwen3-32b.hf_id", "Qwen/Qwen3-14B"),
    "draft revision": _set("models.qwen3-1-7b.revision", NEW_REVISION),
    "draft model": _set("profiles.1.decoding.draft", "qwen3-0-6b"),
    "draft max_model_len": _set("profiles.1.decoding.draft_max_model_len", 512),
    "num_speculative_tokens": _set("profiles.1.decoding.num_speculative_tokens", 5),
    "tensor_parallel_size": _both(
        _set("serving.placement.devices", 16),
        _set("serving.placement.tensor_parallel_size", 64),
        _set("trn2_nodes.max_size", 2),
        _set("trn2_nodes.desired_size", 2),
    ),
    "logical_neuron_cores (same TP)": _both(
        _set("serving.placement.devices", 4), _set("serving.placement.logical_neuron_cores", 1)
    ),
    "batch size (max_num_seqs)": _set("serving.max_num_seqs", 8),
    "max_model_len": _set("serving.max_model_len", 2048),
    "dtype": _set("serving.dtype", "float16"),
    "instance_type": _set("trn2_nodes.instance_type", "trn2u.48xlarge"),
    "decoding method": _set("profiles.1.decoding", {"method": "none"}),
}

IRRELEVANT: dict[str, Callable[[dict[str, Any]], None]] = {
    "replicas": _set("serving.replicas", 0),
    "port": _set("serving.port", 9000),
    "deployment name": _set("name", "other-name"),
    "namespace": _set("namespace", "elsewhere"),
    "bucket retention": _set("bucket.retain_on_delete", True),
    "system nodes": _set("system_nodes.instance_type", "m7i.2xlarge"),
    "unused model": _set("models.qwen3-0-6b.revision", NEW_REVISION),
    "tokenizers_compatible flag": _set("profiles.1.decoding.tokenizers_compatible", True),
}


@pytest.mark.parametrize("case", sorted(RELEVANT))
def test_every_artifact_input_changes_the_digest(case):
    base = default_config_dict()
    changed = copy.deepcopy(base)
    RELEVANT[case](changed)
    assert _digests(changed)["speculative"] != _digests(base)["speculative"], case


def test_the_relevant_cases_cover_every_input_key(default_config):
    """A new key in artifact_inputs must get its own case above."""
    base = parse_config(default_config_dict())
    base_inputs = artifact_inputs(base, base.profile("speculative"))
    touched: set[str] = set()
    for change in RELEVANT.values():
        data = default_config_dict()
        change(data)
        config = parse_config(data)
        inputs = artifact_inputs(config, config.profile("speculative"))
        touched |= {k for k in base_inputs if json.dumps(inputs[k]) != json.dumps(base_inputs[k])}
    assert touched == set(base_inputs) - {"artifact_schema", "stack"}  # stack follows the image's vLLM major
    assert set(base_inputs) == set(artifact_inputs(default_config, default_config.profile("baseline")))


@pytest.mark.parametrize("case", sorted(IRRELEVANT))
def test_inputs_that_do_not_change_the_artifact_leave_the_digest_alone(case):
    base = default_config_dict()
    changed = copy.deepcopy(base)
    IRRELEVANT[case](changed)
    assert _digests(changed) == _digests(base), case


def test_baseline_and_speculative_get_different_prefixes(default_config):
    digests = {profile_digest(default_config, p) for p in default_config.profiles}
    assert len(digests) == len(default_config.profiles)


def test_a_change_in_the_compile_keywords_alone_moves_the_digest(default_config, monkeypatch):
    """Code that derives the NxDI keywords differently must not reuse artifacts compiled the old way."""
    import model_build.neuron_config as neuron_config

    profile = default_config.profile("speculative")
    before = profile_digest(default_config, profile)
    derive = neuron_config.target_neuron_config
    monkeypatch.setattr(neuron_config, "target_neuron_config", lambda p: {**derive(p), "ctx_batch_size": 2})
    assert profile_digest(default_config, profile) != before
    assert artifact_inputs(default_config, profile)["neuron_config"]["draft"]["ctx_batch_size"] == 2


def test_the_digest_of_the_inputs_does_not_depend_on_their_key_order(default_config):
    """artifact_inputs builds its dict in one order, so reordering the config file cannot show this: without
    sort_keys a refactor that reorders those keys would silently move every artifact prefix."""
    from model_build.digest import artifact_inputs, digest_of

    for profile in default_config.profiles:
        inputs = artifact_inputs(default_config, profile)
        assert digest_of(_reversed(inputs)) == digest_of(inputs)
