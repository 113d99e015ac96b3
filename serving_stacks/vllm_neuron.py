"""vllm-neuron: the NxDI-free vLLM Neuron plugin that users deploy today (vLLM 0.29.0 + plugin 1.2.0, SDK 2.33).

Catalogue: image `pytorch-inference-vllm-neuronx:0.29.0.1.2.0-neuronx-py314-sdk2.33.0-ubuntu26.04` (tag =
vLLM version + plugin version; SDK 2.33.0 release notes list vLLM Neuron 0.29.0.1.2.0). Only that vLLM
version is accepted because only it is checked in CI (tests/engine/, vLLM 0.29.0's create_engine_config);
add another after pinning its engine check.

Methods: `none`, `eagle3`, `dflash` ("EAGLE3 and DFlash are supported speculative methods", plugin docs
guides/features-guide.md; "Vanilla draft-model speculative decoding is not supported; migrate to an EAGLE3
draft", getting-started/migration-nxdi-to-vllm-neuron.md).

Artifact: the plugin's content-addressed compile cache, `$VLLM_CACHE_ROOT/neuron/compile_cache/<hash>/`
(design/compilation/compilation_cache.md). model_build fills it by running this stack's vLLM with the
serving arguments on the Trainium2 node, publishes it under the profile digest; serving verifies the
manifest, copies the cache to node-local disk (Mountpoint has no atomic rename) and starts with a cache
miss made fatal.

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

import json
from typing import Any

NAME = "vllm-neuron"
IMAGE_TAG = "0.29.0.1.2.0-neuronx-py314-sdk2.33.0-ubuntu26.04"
VLLM_VERSION = "0.29.0"
PLUGIN_VERSION = "1.2.0"
METHODS = ("none", "eagle3", "dflash")
# Neuron driver this image was released and tested with: SDK 2.33.0 = Driver 2.31.7.0, Runtime 2.35.30.0
# (awsdocs-neuron v2.33.0 release-notes/components). No lower minimum is stated for Runtime 2.35.
MIN_DRIVER = (2, 31, 7, 0)
# Where the scraper reads metrics: vLLM's OpenAI server mounts /metrics on its own port (api_server.py).
METRICS_PATH = "/metrics"
METRICS_PORT_NAME = "http"

# Where serving keeps the cache: an emptyDir on the node's disk, as AWS's DRA sample does
# (aws-neuron-eks-samples disagg_serve_vllm: VLLM_CACHE_ROOT=/cache/vllm-cache on an emptyDir).
CACHE_ROOT = "/cache/vllm-cache"
CACHE_GIB = 200  # node-local emptyDir for the copied cache (AWS's sample sizes its /cache at 200Gi)
COMPILE_CACHE_SUBDIR = "neuron/compile_cache"

# DFlash on Neuron (vllm-project/vllm-neuron vllm_neuron/vllm/spec_decode/dflash.py, DFlashProposer.__init__,
# read at 09006a44): TP 4 or 8 only, BF16, synchronous scheduling, no chunked prefill, no prefix caching.
DFLASH_TENSOR_PARALLEL = (4, 8)
DFLASH_DTYPE = "bfloat16"


def serves_image(vllm: str, plugin: str | None, sdk: str) -> bool:
    return vllm == VLLM_VERSION and plugin == PLUGIN_VERSION


def speculative_method(method: str) -> str:
    """The plugin takes the method by its own name."""
    return method


def neuron_args(profile: Any) -> list[str]:
    """Neuron settings inside --additional-config '{"neuron_config": ...}' (design/vllm/additional-config.md).

    Buckets are pinned to one each, equal to the scheduler limits ("The largest bucket must equal
    max_num_seqs" / "max_num_batched_tokens", additional-config.md): one NEFF per bucket, a small, known cache.
    On-device sampling is set as AWS's examples set it: speculation verifies on the device (features-guide.md
    "on_device_sampling_config — Required for on-device rejection sampling"; DFlash raises without it).
    Prefix caching is on by default in the plugin (reference-configuration.md); both baseline and speculative
    run without it, as the plugin's EAGLE3 tutorial does, so they differ only in decoding. Speculation is
    mutually exclusive with async scheduling (features-guide.md): say it, rather than rely on the warning.
    """
    neuron_config: dict[str, Any] = {
        "num_seqs_buckets": [profile.max_num_seqs],
        "num_batched_tokens_buckets": [max_num_batched_tokens(profile)],
        "on_device_sampling_config": {},
    }
    if profile.decoding.method == "dflash":
        neuron_config["quantization"] = "bf16"  # dflash.py: "Trn2 DFlash requires quantization='bf16'"
    args = [
        "--additional-config",
        json.dumps({"neuron_config": neuron_config}, separators=(",", ":"), sort_keys=True),
        "--max-num-batched-tokens",
        str(max_num_batched_tokens(profile)),
        "--no-enable-prefix-caching",
    ]
    if profile.speculative:
        args.append("--no-async-scheduling")
    if profile.decoding.method == "dflash":
        # dflash.py refuses chunked prefill; the plugin's DFlash launch scripts also pass the hybrid-KV switch.
        args += ["--no-enable-chunked-prefill", "--disable-hybrid-kv-cache-manager"]
    return args


def graph_args(profile: Any) -> list[str]:
    """The flags of this stack that shape the compiled graphs (part of the artifact digest); TP, lengths, batch,
    dtype, draft and k are digest inputs of their own."""
    return neuron_args(profile)


def max_num_batched_tokens(profile: Any) -> int:
    """One prompt of max_model_len per scheduler step: no chunking needed for any prompt the profile admits."""
    return int(profile.max_model_len)


def env(*, artifact_dir: str) -> dict[str, str]:
    """Serving environment: the cache on local disk, and a cache miss is a start-up error, not a compile.

    artifact_dir (the published cache on the S3 mount) is not read by vLLM: serving's init step copies it to
    CACHE_ROOT first (charts/vllm_service.py), because the plugin's cache wants atomic renames.

    `VLLM_NEURON_DISABLE_WARMUP_COMPILE=1` "treat[s] a local cache miss as a fatal error" and
    `NEURON_LIBTORCH_DISABLE_GRAPH_CAPTURE_BACKEND=1` disables the graph capture backend
    (design/compilation/cpu_compilation.md, model-dev/cpu-development.md). An older plugin envs.py names the
    second `VLLM_NEURON_DISABLE_GRAPH_CAPTURE_BACKEND` and has `VLLM_NEURON_ASSERT_CACHE_HIT`; the 1.2.0
    source could not be read here, so both spellings are set (an unknown variable is ignored).
    """
    return {
        "VLLM_CACHE_ROOT": CACHE_ROOT,
        "VLLM_NEURON_DISABLE_WARMUP_COMPILE": "1",
        "NEURON_LIBTORCH_DISABLE_GRAPH_CAPTURE_BACKEND": "1",
        "VLLM_NEURON_DISABLE_GRAPH_CAPTURE_BACKEND": "1",
        "VLLM_NEURON_ASSERT_CACHE_HIT": "1",
    }


def build_env(*, cache_root: str) -> dict[str, str]:
    """model_build's environment: compile into cache_root (no fatal-miss switches: this run is the compile)."""
    return {"VLLM_CACHE_ROOT": cache_root}


def profile_problems(profile: Any, where: str) -> list[str]:
    """Rules of the plugin that upstream vLLM cannot check, each citing the plugin (dflash.py at 09006a44)."""
    problems: list[str] = []
    if profile.decoding.method != "dflash":
        return problems
    tp = profile.placement.tensor_parallel_size
    if tp not in DFLASH_TENSOR_PARALLEL:
        problems.append(
            f"{where}.placement.tensor_parallel_size={tp} but DFlash on Neuron is validated for tensor_parallel_size "
            "4 or 8 only (vllm-neuron dflash.py); set devices: 1 with logical_neuron_cores: 2 (TP 4) or "
            "logical_neuron_cores: 1 (TP 8), or use decoding.method: eagle3 for TP 16"
        )
    if profile.dtype != DFLASH_DTYPE:
        problems.append(
            f"{where}.dtype={profile.dtype!r} but DFlash on Trn2 requires BF16 weights and KV cache (vllm-neuron "
            "dflash.py); set dtype: bfloat16"
        )
    return problems


def dflash_drafter_problems(target: dict[str, Any], drafter: dict[str, Any], k: int) -> list[str]:
    """What the plugin checks of a DFlash drafter against its target when vLLM starts (dflash.py,
    DFlashProposer.__init__), from the two config.json files: checked by the build before it takes the node."""
    problems: list[str] = []
    block = drafter.get("block_size")
    if block is not None and k != block - 1:
        problems.append(
            f"the drafter has block_size={block}, so the plugin requires num_speculative_tokens={block - 1}, not {k}; "
            f"set decoding.num_speculative_tokens: {block - 1}"
        )
    for key in ("hidden_size", "vocab_size"):
        if drafter.get(key) != target.get(key):
            problems.append(
                f"the drafter has {key}={drafter.get(key)} but the target {target.get(key)}; use its own drafter"
            )
    layers = target.get("num_hidden_layers")
    if drafter.get("num_target_layers") not in (None, layers):
        problems.append(
            f"the drafter was trained for a target of {drafter.get('num_target_layers')} layers, this target has {layers}"
        )
    return problems
