"""legacy-v0: the blog's recipe and the seed reproduction, on aws-neuron/upstreaming-to-vllm (vLLM 0.9.x).

Catalogue: images `pytorch-inference-vllm-neuronx:0.9.x-...` with an SDK that still ships NxDI (before 2.32),
the only ones with NxDI fused draft-model speculation; the fork is end of life upstream. Artifact: the NxDI
compile of model_build (sharded checkpoint with the fused draft), checked by serving_pod.check_mounted before
vLLM starts, read from the S3 mount (NEURON_COMPILED_ARTIFACTS).

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from serving_stacks.contract import ArtifactKind, LiveMetrics, LocalCache, ProfileView

NAME = "legacy-v0"
IMAGE_TAG = "0.9.1-neuronx-py311-sdk2.26.1-ubuntu22.04"
METHODS: tuple[str, ...] = ("none", "fused-draft")
ARTIFACT = ArtifactKind.NXDI_COMPILE
LOCAL_CACHE: LocalCache | None = None  # NxDI loads the compiled artifact from the read-only mount
# SDK 2.26 ships Neuron Driver 2.24.7.0 (aws-neuron-sdk release-notes/prev/2.26.0/runtime.rst); "the driver
# remains backwards compatible with older versions of Neuron Runtime" (neuron-runtime/nrt-troubleshoot.rst).
MIN_DRIVER: tuple[int, ...] = (2, 24, 7, 0)
# Where the scraper reads metrics: vLLM's OpenAI server mounts /metrics on its own port (api_server.py).
METRICS_PATH: str = "/metrics"
METRICS_PORT_NAME: str = "http"
COMPILE_CACHE_SUBDIR: str | None = None  # the artifact is an NxDI compile (model_build.plan), not a compile cache
# The fork serves through vLLM 0.9.1's V0 engine (env() sets VLLM_USE_V1=0), whose PrometheusStatLogger labels every
# series with model_name alone (vllm/engine/llm_engine.py:368-371). Its per-token histogram is
# vllm:time_per_output_token_seconds (vllm/engine/metrics.py:120-121; no inter_token_latency name exists in 0.9.1).
# Its generation counter counts one token per decoding request per step (llm_engine.py _get_stats: a decode sequence
# is one batched token, core/scheduler.py:1956-1959), so under fused speculation it counts steps.
LIVE_METRICS = LiveMetrics(
    vllm_version="0.9.1",
    sources=("vllm/engine/metrics.py",),
    labels=("model_name",),
    ttft="vllm:time_to_first_token_seconds",
    itl="vllm:time_per_output_token_seconds",
    generation_tokens="vllm:generation_tokens",
    generation_counts_steps=True,
    request_decode_time="vllm:request_decode_time_seconds",
    request_generation_tokens="vllm:request_generation_tokens",
    requests_waiting="vllm:num_requests_waiting",
    requests_running="vllm:num_requests_running",
    acceptance=None,
    no_acceptance="vLLM 0.9.1 sets its vllm:spec_decode_* series only from the spec-decode worker's metrics "
    "(vllm/engine/llm_engine.py:1780-1783, filled in vllm/spec_decode/spec_decode_worker.py), and on Neuron the "
    "platform always runs NeuronWorker (vllm/platforms/neuron.py:46-48), which never fills them, so the fused "
    "speculation of this stack reports no acceptance.",
)


def serves_image(vllm: str, plugin: str | None, sdk: str) -> bool:
    """vLLM 0.9.x fork images; SDK 2.32+ dropped NxDI, which compile and serve need."""
    sdk_version = tuple(int(x) for x in sdk.split("."))
    return vllm.startswith("0.9.") and plugin is None and sdk_version < (2, 32)


def speculative_method(method: str) -> str:
    """Any --speculative-config turns on NxDI fused speculation with the draft on this fork; "eagle" is what the
    reference sample and the Neuron tutorial pass and does not switch EAGLE on."""
    return "eagle"


def neuron_args(profile: ProfileView) -> list[str]:
    """How NxDI settings reach this fork's vLLM: the ones vLLM must agree on with the compiled artifact."""
    overrides: dict[str, Any] = {"save_sharded_checkpoint": True}
    if profile.decoding.method == "fused-draft":
        overrides["enable_fused_speculation"] = True
    return ["--override-neuron-config", json.dumps(overrides, separators=(",", ":"), sort_keys=True)]


def env(*, artifact_dir: str, logical_neuron_cores: int) -> dict[str, str]:
    """The fork serves Neuron through vLLM's V0 engine and NxDI only, from the compiled artifact on the mount, at the
    LNC the artifact was compiled for (NxDI tutorials export NEURON_RT_VIRTUAL_CORE_SIZE=$LNC)."""
    return {
        "NEURON_RT_VIRTUAL_CORE_SIZE": str(logical_neuron_cores),
        "NEURON_COMPILED_ARTIFACTS": artifact_dir,
        "VLLM_USE_V1": "0",
        "VLLM_NEURON_FRAMEWORK": "neuronx-distributed-inference",
    }


def build_job_env(*, logical_neuron_cores: int, scratch: str, out_dir: str) -> dict[str, str]:
    """The NxDI compile's environment: runtime and compiler LNC, and NxDI's work directory on the Job's scratch."""
    lnc = str(logical_neuron_cores)
    return {
        "NEURON_RT_VIRTUAL_CORE_SIZE": lnc,
        "NEURON_LOGICAL_NC_CONFIG": lnc,
        "BASE_COMPILE_WORK_DIR": f"{scratch}/nxd_model",
    }


def serve_command(*, code_path: str, port: int, profile_name: str) -> list[str]:
    """vLLM itself: a load that cannot find the artifact tries to compile into the read-only mount and fails loudly
    (FIELD_NOTES, the fork's neuronx_distributed loader)."""
    return ["vllm"]


def graph_args(profile: ProfileView) -> list[str] | None:
    """None: the NxDI keywords that shape the graphs are digest inputs of their own (model_build.neuron_config)."""
    return None


def digest_inputs(profile: ProfileView) -> dict[str, Any]:
    """Nothing beyond the common inputs: the NxDI keywords that shape the artifact are digest inputs of their own."""
    return {}


def compile_args(*, vllm_argv: list[str], port: int, timeout_minutes: int) -> list[str]:
    """`model_build compile` builds the NxDI plan from the profile alone."""
    return []


def draft_config_roles(method: str) -> tuple[str, ...]:
    """(): model_build.compile checks the staged checkpoints itself (model types, manifests) as it compiles."""
    return ()


def draft_problems(configs: Mapping[str, dict[str, Any]], method: str, k: int) -> list[str]:
    return []


def profile_problems(profile: ProfileView, where: str) -> list[str]:
    return []
