"""The NxDI NeuronConfig keyword arguments a profile compiles with: part of the artifact digest.

Kept apart from plan.py so digest.py can include them: a change to these keywords (in the config or in
this code) moves the profile to a new artifacts/<digest>/ prefix instead of silently reusing an artifact
compiled another way. Line numbers: models/config.py at NxDI v0.6.10598.
"""

from __future__ import annotations

from typing import Any

from config.profiles import DraftSpeculation, ServingProfile
from config.schema import DeploymentConfig
from serving_stacks import STACKS
from serving_stacks.contract import ArtifactKind

# What model_build compiles with NxDI: the methods of the stacks whose artifact is an NxDI compile.
COMPILED_METHODS = tuple(dict.fromkeys(m for s in STACKS if s.ARTIFACT is ArtifactKind.NXDI_COMPILE for m in s.METHODS))

# Greedy sampling on the device, as vLLM's fused-speculation path configures it (top_k=1, no sampling).
# OnDeviceSamplingConfig: models/config.py:808-818 at v0.6.10598; NeuronConfig turns a dict into one (:182-186).
GREEDY_SAMPLING = {"top_k": 1, "do_sample": False}


def target_neuron_config(profile: ServingProfile) -> dict[str, Any]:
    """NeuronConfig(**kwargs) for the target (line numbers: models/config.py at v0.6.10598)."""
    kwargs: dict[str, Any] = {
        "tp_degree": profile.placement.tensor_parallel_size,  # :293
        "batch_size": profile.max_num_seqs,  # :103
        # :170; vLLM's own NxDI config (vllm/model_executor/model_loader/neuronx_distributed.py,
        # _get_default_neuron_config in v0.9.1) encodes one prompt at a time: compile what it would compile.
        "ctx_batch_size": 1,
        "max_context_length": profile.max_model_len,  # :143, as vLLM sets it (prompt may fill the window)
        "seq_len": profile.max_model_len,  # :107
        "torch_dtype": profile.dtype,  # :116-124, a string is converted by to_torch_dtype
        "enable_bucketing": True,  # :192
        "is_continuous_batching": True,  # :173, vLLM schedules sequences into fixed batch slots
        "logical_nc_config": profile.placement.logical_neuron_cores,  # :441, must match NEURON_RT_VIRTUAL_CORE_SIZE
        "on_device_sampling_config": dict(GREEDY_SAMPLING),  # :182
    }
    if isinstance(profile.decoding, DraftSpeculation):
        kwargs["speculation_length"] = profile.decoding.num_speculative_tokens  # :227, k
        kwargs["enable_fused_speculation"] = True  # :229
    kwargs["save_sharded_checkpoint"] = True  # :298, weights/tp{rank}_sharded_checkpoint.safetensors
    return kwargs


def draft_neuron_config(target: dict[str, Any]) -> dict[str, Any]:
    """The draft's NeuronConfig: a deep copy of the target's with speculation switched off.

    Mirrors inference_demo.py run_inference (v0.6.10598): copy.deepcopy(config.neuron_config), then
    speculation_length = 0 and enable_fused_speculation = False. The draft therefore shares tp_degree,
    batch_size and seq_len with the target; decoding.draft_max_model_len only reaches vLLM.
    """
    return {**target, "speculation_length": 0, "enable_fused_speculation": False}


def compiled_neuron_config(config: DeploymentConfig, profile: ServingProfile) -> dict[str, Any] | None:
    """What `compile` passes to NxDI for this profile, or None for a method model_build does not compile."""
    if profile.decoding.method not in COMPILED_METHODS:
        return None
    target = target_neuron_config(profile)
    draft = draft_neuron_config(target) if isinstance(profile.decoding, DraftSpeculation) else None
    return {"target": target, "draft": draft}
