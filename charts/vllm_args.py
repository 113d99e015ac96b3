"""The vLLM command line and environment, built in one place from a serving profile.

What every stack shares is here; what differs between serving stacks (how Neuron settings and the
speculative method reach vLLM, the environment) comes from the profile's module in serving_stacks/.
"""

from __future__ import annotations

import json
from typing import Any

from config.bucket_layout import artifact_prefix, checkpoint_prefix, mounted
from config.profiles import DraftSpeculation, ServingProfile
from config.schema import DeploymentConfig
from model_build.digest import profile_digest
from serving_stacks import stack_named


def model_dir(config: DeploymentConfig, key: str) -> str:
    """Local path of a staged checkpoint on the S3 mount (never a hub id: no downloads at start)."""
    model = config.models[key]
    return mounted(checkpoint_prefix(model.hf_id, model.revision))


def artifact_dir(config: DeploymentConfig, profile: ServingProfile) -> str:
    return mounted(artifact_prefix(profile_digest(config, profile)))


def speculative_config(config: DeploymentConfig, profile: ServingProfile) -> dict[str, Any] | None:
    """vLLM's --speculative-config, or None for plain decoding.

    Its "method" is the stack's (serving_stacks/): what turns speculation on differs between stacks.
    """
    d = profile.decoding
    if not isinstance(d, DraftSpeculation):
        return None
    return {
        "model": model_dir(config, d.draft),
        "num_speculative_tokens": d.num_speculative_tokens,
        "max_model_len": d.draft_max_model_len or profile.max_model_len,
        "method": stack_named(profile.image.stack).speculative_method(d.method),
    }


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
    args += stack_named(profile.image.stack).neuron_args(profile)
    spec = speculative_config(config, profile)
    if spec is not None:
        args += ["--speculative-config", _json(spec)]
    return args


def vllm_env(config: DeploymentConfig, profile: ServingProfile) -> dict[str, str]:
    """The stack's own: the runtime's LNC (each stack names its variable), where its artifact is, how it loads."""
    return stack_named(profile.image.stack).env(
        artifact_dir=artifact_dir(config, profile), logical_neuron_cores=profile.placement.logical_neuron_cores
    )


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
