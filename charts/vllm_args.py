"""The vLLM command line and environment, built in one place from a serving profile.

This is the only module that knows how the decoding method reaches vLLM; everything else about a
service is the same for every profile.
"""

from __future__ import annotations

import json
from typing import Any

from charts.models_volume import MOUNT_PATH
from config.bucket_layout import artifact_prefix, checkpoint_prefix
from config.schema import DeploymentConfig, DraftSpeculation, ServingProfile
from model_build.digest import profile_digest


def model_dir(config: DeploymentConfig, key: str) -> str:
    """Local path of a staged checkpoint on the S3 mount (never a hub id: no downloads at start)."""
    model = config.models[key]
    return f"{MOUNT_PATH}/{checkpoint_prefix(model.hf_id, model.revision)}".rstrip("/")


def artifact_dir(config: DeploymentConfig, profile: ServingProfile) -> str:
    return f"{MOUNT_PATH}/{artifact_prefix(profile_digest(config, profile))}".rstrip("/")


def speculative_config(config: DeploymentConfig, profile: ServingProfile) -> dict[str, Any] | None:
    """vLLM's --speculative-config, or None for plain decoding.

    On the legacy fork (aws-neuron/upstreaming-to-vllm 2.26.1) any speculative config turns on NxDI
    fused speculation with the draft; "method": "eagle" is what the reference sample and the Neuron
    tutorial pass there and does not switch EAGLE on (FIELD_NOTES). On vllm-neuron it selects EAGLE.
    """
    d = profile.decoding
    if not isinstance(d, DraftSpeculation):
        return None
    return {
        "model": model_dir(config, d.draft),
        "num_speculative_tokens": d.num_speculative_tokens,
        "max_model_len": d.draft_max_model_len or profile.max_model_len,
        "method": "eagle",
    }


def neuron_overrides(profile: ServingProfile) -> dict[str, Any]:
    """NxDI settings vLLM must agree on with the compiled artifact."""
    overrides: dict[str, Any] = {"save_sharded_checkpoint": True}
    if profile.decoding.method == "fused-draft":
        overrides["enable_fused_speculation"] = True
    return overrides


def vllm_args(config: DeploymentConfig, profile: ServingProfile) -> list[str]:
    """Arguments after `vllm`: `serve <local model dir> --flag value ...`."""
    target = config.models[profile.target]
    args = [
        "serve",
        model_dir(config, profile.target),
        "--served-model-name",
        target.hf_id,
        "--tensor-parallel-size",
        str(profile.placement.tensor_parallel_size),
        "--max-model-len",
        str(profile.max_model_len),
        "--max-num-seqs",
        str(profile.max_num_seqs),
        "--dtype",
        profile.dtype,
        "--host",
        "0.0.0.0",
        "--port",
        str(profile.port),
    ]
    overrides = neuron_overrides(profile)
    if profile.image.stack == "legacy-v0":
        args += ["--override-neuron-config", _json(overrides)]
    else:
        # vllm-neuron takes Neuron settings inside --additional-config and needs one KV block per
        # sequence when prefix caching is off (vllm-project/vllm-neuron 0.2.0 README).
        args += [
            "--additional-config",
            _json({"override_neuron_config": overrides}),
            "--num-gpu-blocks-override",
            str(profile.max_num_seqs),
            "--no-enable-prefix-caching",
        ]
    spec = speculative_config(config, profile)
    if spec is not None:
        args += ["--speculative-config", _json(spec)]
    return args


def vllm_env(config: DeploymentConfig, profile: ServingProfile) -> dict[str, str]:
    env = {
        "NEURON_COMPILED_ARTIFACTS": artifact_dir(config, profile),
        "NEURON_RT_VIRTUAL_CORE_SIZE": str(profile.placement.logical_neuron_cores),
    }
    if profile.image.stack == "legacy-v0":
        env |= {"VLLM_USE_V1": "0", "VLLM_NEURON_FRAMEWORK": "neuronx-distributed-inference"}
    return env


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
