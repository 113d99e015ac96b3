"""The profile digest: one stable name for everything that changes a compiled artifact.

Same inputs -> same `artifacts/<digest>/` prefix; any artifact-relevant change -> a new prefix, so a
served artifact can never silently disagree with its flags. Inputs that do not change the compiled
graph (replicas, port, names) are left out on purpose.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from config.profiles import DraftSpeculation, ServingProfile
from config.schema import DeploymentConfig
from model_build.neuron_config import compiled_neuron_config
from serving_stacks import stack_named

DIGEST_LENGTH = 20  # hex chars (80 bits): collision-free for any realistic number of profiles
ARTIFACT_SCHEMA = 2  # bump when the meaning of an input changes (2: the NxDI keywords joined the inputs)


def artifact_inputs(config: DeploymentConfig, profile: ServingProfile) -> dict[str, Any]:
    """Every input that changes the compiled artifact (NxDI compile or plugin compile cache), as JSON-able data."""
    target = config.models[profile.target]
    draft: dict[str, Any] | None = None
    k = 0
    if isinstance(profile.decoding, DraftSpeculation):
        d = config.models[profile.decoding.draft]
        k = profile.decoding.num_speculative_tokens
        draft = {
            "hf_id": d.hf_id,
            "revision": d.revision,
            "max_model_len": profile.decoding.draft_max_model_len,
        }
    inputs = {
        "artifact_schema": ARTIFACT_SCHEMA,
        "image": profile.image.uri,
        "sdk_version": profile.image.sdk_version,
        "vllm_version": profile.image.vllm_version,
        "stack": profile.image.stack,
        "target": {"hf_id": target.hf_id, "revision": target.revision},
        "decoding": profile.decoding.method,
        "draft": draft,
        "num_speculative_tokens": k,
        "tensor_parallel_size": profile.placement.tensor_parallel_size,
        "logical_neuron_cores": profile.placement.logical_neuron_cores,
        "batch_size": profile.max_num_seqs,
        "max_model_len": profile.max_model_len,
        "dtype": profile.dtype,
        "instance_type": config.trn2_nodes.instance_type,
        # The exact NeuronConfig keywords compile uses, so a change in how they are derived moves the digest too.
        "neuron_config": compiled_neuron_config(config, profile),
    }
    # A compile cache is keyed by graphs, shapes, compiler and its args (the plugin's compilation_cache.md): a stack
    # that builds one adds every flag that shapes them, its plugin version and its compile route (NxDI adds nothing:
    # its keywords are above).
    inputs.update(stack_named(profile.image.stack).digest_inputs(profile))
    return inputs


def digest_of(inputs: dict[str, Any]) -> str:
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:DIGEST_LENGTH]


def profile_digest(config: DeploymentConfig, profile: ServingProfile) -> str:
    return digest_of(artifact_inputs(config, profile))
