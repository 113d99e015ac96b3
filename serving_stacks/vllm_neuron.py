"""vllm-neuron: the NxDI-free vLLM Neuron plugin that users deploy today (vLLM 0.29.0 + plugin 1.2.0, SDK 2.33).

Catalogue: image `pytorch-inference-vllm-neuronx:0.29.0.1.2.0-neuronx-py314-sdk2.33.0-ubuntu26.04` (tag =
vLLM version + plugin version; SDK 2.33.0 release notes list vLLM Neuron 0.29.0.1.2.0). Only that vLLM
version is accepted because only it is checked in CI (tests/engine/, vLLM 0.29.0's create_engine_config);
add another after pinning its engine check.

Methods: `none`, `eagle3`, `dflash` ("EAGLE3 and DFlash are supported speculative methods", plugin docs
guides/features-guide.md; "Vanilla draft-model speculative decoding is not supported; migrate to an EAGLE3
draft", getting-started/migration-nxdi-to-vllm-neuron.md).

Route: the plugin's native compilation route, named explicitly (`VLLM_NEURON_BACKEND=neuron_native`) in build and
serve. It is the SDK 2.33 default and the XLA route is deprecated ("How to choose a compilation route"); only
with the variable set does the native route's Precompile Cache (saved traces) run ("How to use the Precompile
Cache"). docs/serving-stacks.md says what this rests on and what is not verified.

Artifact: the plugin's content-addressed compile cache, `$VLLM_CACHE_ROOT/neuron/compile_cache/<hash>/`
(design/compilation/compilation_cache.md). model_build fills it by running this stack's vLLM with the
serving arguments and environment on the Trainium2 node, publishes it under the profile digest; serving
verifies the manifest, copies the cache to node-local disk (Mountpoint has no atomic rename), checks the copy
and that the build ran the serving command line, and starts vLLM under a guard (serving_pod/startup_guard.py)
that stops the pod when anything compiles during start-up: no plugin switch that makes a miss fatal on the
native route could be read at the pinned version.

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from serving_stacks.contract import AcceptanceCounters, ArtifactKind, LiveMetrics, LocalCache, ProfileView

NAME = "vllm-neuron"
IMAGE_TAG = "0.29.0.1.2.0-neuronx-py314-sdk2.33.0-ubuntu26.04"
VLLM_VERSION = "0.29.0"
PLUGIN_VERSION = "1.2.0"
METHODS: tuple[str, ...] = ("none", "eagle3", "dflash")
ARTIFACT = ArtifactKind.COMPILE_CACHE
# Neuron driver this image was released and tested with: SDK 2.33.0 = Driver 2.31.7.0, Runtime 2.35.30.0
# (awsdocs-neuron v2.33.0 release-notes/components). No lower minimum is stated for Runtime 2.35.
# SDK 2.33.1 (2026-11-11, release-notes/2.33.1.rst: Runtime 2.35.33.0 fixes a DMA race; aws-neuronx-dkms 2.31.8.0)
# would need driver 2.31.8.0, but no vllm-neuron image of it was found (checked 2026-11-28: the Neuron DLC README
# read, aws-neuron/deep-learning-containers@2be9ed1, stops at SDK 2.32.0, and no source read names an sdk2.33.1 tag).
MIN_DRIVER: tuple[int, ...] = (2, 31, 7, 0)
# Where the scraper reads metrics: vLLM's OpenAI server mounts /metrics on its own port (api_server.py).
METRICS_PATH: str = "/metrics"
METRICS_PORT_NAME: str = "http"
# vLLM 0.29.0's V1 engine (the plugin runs on it): PrometheusStatLogger labels every series with model_name and
# engine (vllm/v1/metrics/loggers.py:468); the speculative-decoding counters come from SpecDecodingProm
# (vllm/v1/spec_decode/metrics.py:229-231, 255), set from the scheduler's counts whatever the platform.
LIVE_METRICS = LiveMetrics(
    vllm_version=VLLM_VERSION,
    sources=("vllm/v1/metrics/loggers.py", "vllm/v1/spec_decode/metrics.py"),
    labels=("model_name", "engine"),
    ttft="vllm:time_to_first_token_seconds",
    itl="vllm:inter_token_latency_seconds",
    generation_tokens="vllm:generation_tokens",
    generation_counts_steps=False,  # len(output.new_token_ids) per step (vllm/v1/metrics/stats.py:462-464)
    request_decode_time="vllm:request_decode_time_seconds",
    request_generation_tokens="vllm:request_generation_tokens",
    requests_waiting="vllm:num_requests_waiting",
    requests_running="vllm:num_requests_running",
    acceptance=AcceptanceCounters(
        drafts="vllm:spec_decode_num_drafts",
        draft_tokens="vllm:spec_decode_num_draft_tokens",
        accepted_tokens="vllm:spec_decode_num_accepted_tokens",
        accepted_per_position="vllm:spec_decode_num_accepted_tokens_per_pos",
    ),
)

# Where serving keeps the cache: an emptyDir on the node's disk, as AWS's DRA sample does
# (aws-neuron-eks-samples disagg_serve_vllm: VLLM_CACHE_ROOT=/cache/vllm-cache on an emptyDir).
CACHE_ROOT = "/cache/vllm-cache"
CACHE_GIB = 200  # node-local emptyDir for the copied cache (AWS's sample sizes its /cache at 200Gi)
COMPILE_CACHE_SUBDIR: str | None = "neuron/compile_cache"
LOCAL_CACHE: LocalCache | None = LocalCache(path=CACHE_ROOT, size_gib=CACHE_GIB)

# The compilation route, set in build and serve alike so that an image default cannot change it, and part of the
# artifact digest. "When VLLM_NEURON_BACKEND is not set, the server uses the native route" but the Precompile
# Cache is then off; `neuron_native` (or `neuron`) turns it on (plugin docs, SDK 2.33: guides/how-to-choose-
# compilation-route.md, guides/how-to-precompile-cache.md, guides/features-guide.md "Compilation").
ROUTE_ENV = "VLLM_NEURON_BACKEND"
ROUTE = "neuron_native"
# Runtime LNC: "The NEURON_LOGICAL_NC_CONFIG runtime environment variable controls how many physical NeuronCores are
# grouped to make up a logical NeuronCore", and models must be compiled for the runtime's LNC (Neuron docs
# about-neuron/arch/neuron-features/logical-neuroncore-config.rst:37-41, aws-neuron-sdk 81ce03ae).
LNC_ENV = "NEURON_LOGICAL_NC_CONFIG"

# Every environment variable a pod of this stack (vLLM service, its init step, the build Job) may carry, and who
# reads it. tests/serving_stacks/test_vllm_neuron_env.py checks the rendered Deployments and build Jobs against
# this table: a variable without a reader fails. Plugin switches that no source of the pinned version shows being
# read are left out on purpose (VLLM_NEURON_DISABLE_WARMUP_COMPILE and NEURON_LIBTORCH_* are documented for the
# XLA route only; a native-only plugin fork rejects NEURON_LIBTORCH_* at import).
ENV_READERS: dict[str, str] = {
    ROUTE_ENV: "vLLM Neuron plugin docs, SDK 2.33: guides/how-to-choose-compilation-route.md "
    "(`export VLLM_NEURON_BACKEND=neuron_native`), guides/how-to-precompile-cache.md (Lite turns the Precompile "
    "Cache on only when it is neuron_native or neuron)",
    "VLLM_CACHE_ROOT": "vllm 0.29.0 vllm/envs.py:693-697 (vLLM's cache root); plugin docs "
    "design/compilation/compilation_cache.md (local cache at $VLLM_CACHE_ROOT/neuron/compile_cache), "
    "guides/how-to-precompile-cache.md (a warm start reads the Precompile Cache from VLLM_CACHE_ROOT)",
    LNC_ENV: "Neuron docs about-neuron/arch/neuron-features/logical-neuroncore-config.rst:37 (aws-neuron-sdk "
    "81ce03ae): the Neuron Runtime's logical NeuronCore size",
    "VLLM_API_KEY": "vllm 0.29.0 vllm/envs.py:800 (the OpenAI server's bearer key; charts/vllm_service.api_key_env)",
    "PYTHONPATH": "CPython (docs.python.org/3.11/using/cmdline.html#envvar-PYTHONPATH): the verify step's and the "
    "build Job's shipped code (charts/code_bundle.py)",
    "PYTHONUNBUFFERED": "CPython (docs.python.org/3.11/using/cmdline.html#envvar-PYTHONUNBUFFERED): the build "
    "Job's log as it happens (charts/code_bundle.job_code_env)",
    "AWS_REGION": "botocore's region setting (boto3 docs, guide/configuration.html#using-environment-variables): "
    "the build Job's S3 client (charts/code_bundle.job_code_env)",
}

# DFlash on Neuron (vllm-project/vllm-neuron vllm_neuron/vllm/spec_decode/dflash.py, DFlashProposer.__init__,
# read at 09006a44): TP 4 or 8 only, BF16, synchronous scheduling, no chunked prefill, no prefix caching.
DFLASH_TENSOR_PARALLEL = (4, 8)
DFLASH_DTYPE = "bfloat16"


def serves_image(vllm: str, plugin: str | None, sdk: str) -> bool:
    return vllm == VLLM_VERSION and plugin == PLUGIN_VERSION


def speculative_method(method: str) -> str:
    """The plugin takes the method by its own name."""
    return method


def neuron_args(profile: ProfileView) -> list[str]:
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


def graph_args(profile: ProfileView) -> list[str] | None:
    """The flags of this stack that shape the compiled graphs (part of the artifact digest); TP, lengths, batch,
    dtype, draft and k are digest inputs of their own."""
    return neuron_args(profile)


def digest_inputs(profile: ProfileView) -> dict[str, Any]:
    """What this stack adds to the artifact digest: the plugin version, the graph-shaping flags and the compilation
    route (the cache is keyed by graphs, shapes, compiler and its args: compilation_cache.md; the route decides
    the lowering and whether the Precompile Cache exists)."""
    return {
        "plugin_version": profile.image.plugin_version,
        "graph_args": graph_args(profile),
        "compile_route": {ROUTE_ENV: ROUTE},
    }


def max_num_batched_tokens(profile: ProfileView) -> int:
    """One prompt of max_model_len per scheduler step: no chunking needed for any prompt the profile admits."""
    return int(profile.max_model_len)


def runtime_env(*, logical_neuron_cores: int, cache_root: str) -> dict[str, str]:
    """What build and serve both give the plugin: the route, the runtime's LNC and the cache root. One function, so
    the cache the build fills is compiled under the environment serving reads it with."""
    return {ROUTE_ENV: ROUTE, LNC_ENV: str(logical_neuron_cores), "VLLM_CACHE_ROOT": cache_root}


def env(*, artifact_dir: str, logical_neuron_cores: int) -> dict[str, str]:
    """Serving environment: the native route, and the cache on node-local disk.

    artifact_dir (the published cache on the S3 mount) is not read by vLLM: serving's init step copies it to
    CACHE_ROOT first (charts/vllm_service.py), because the plugin's cache wants atomic renames. Nothing here makes a
    miss fatal: the startup guard (serve_command) does.
    """
    return runtime_env(logical_neuron_cores=logical_neuron_cores, cache_root=CACHE_ROOT)


def build_job_env(*, logical_neuron_cores: int, scratch: str, out_dir: str) -> dict[str, str]:
    """The build's environment: serving's, compiling into out_dir (the layout below it is the one serving copies
    back to CACHE_ROOT file by file). Rendered into the build Job too, so `kubectl get job -o yaml` shows the route
    the compile runs on."""
    return runtime_env(logical_neuron_cores=logical_neuron_cores, cache_root=out_dir)


# The start-up guard: the serving container runs vLLM under serving_pod/startup_guard.py (standard library only,
# shipped with the init step's code), which stops the pod with a sentence when, before vLLM answers /health, a file
# appears in the compile cache that the init step did not copy, or a neuronx-cc process runs.
GUARD_SCRIPT = "serving_pod/startup_guard.py"
COMPILER_PROCESSES = ("neuronx-cc",)


def serve_command(*, code_path: str, port: int, profile_name: str) -> list[str]:
    """The serving container's command (its args are vLLM's, after `vllm`)."""
    return [
        "python3",
        f"{code_path.rstrip('/')}/{GUARD_SCRIPT}",
        "--watch",
        f"{CACHE_ROOT}/{COMPILE_CACHE_SUBDIR}",
        "--port",
        str(port),
        "--profile",
        profile_name,
        *(arg for name in COMPILER_PROCESSES for arg in ("--compiler-process", name)),
        "--",
        "vllm",
    ]


# vLLM 0.29.0's speculators-format loader (vllm/transformers_utils/configs/speculators/): the algorithms registered
# with @register_speculator (algos.py:15,55,93,133,157); base.py:53-58 raises for any other `speculators_model_type`,
# base.py:79-96 requires proposal_methods[0].speculative_tokens, verifier.name_or_path and a transformer_layer_config
# dict; eagle3 takes a transformer_layer_config model_type (default "llama") of qwen3 or llama only (algos.py:41-47).
# tests/engine/test_speculators_rules.py checks both lists against the installed vLLM 0.29.0.
SPECULATORS_TYPES = ("dflash", "dflash2", "dspark", "eagle3", "peagle")
EAGLE3_LAYER_TYPES = ("llama", "qwen3")


def speculators_problems(draft: dict[str, Any], method: str) -> list[str]:
    """Why vLLM 0.29 (or the plugin) would refuse this draft's speculators-format config.json for `method`; [] for a
    draft that is not in speculators format (no `speculators_config`), which vLLM reads as a plain checkpoint."""
    spec = draft.get("speculators_config")
    if spec is None:
        return []
    problems: list[str] = []
    kind = draft.get("speculators_model_type")
    if kind not in SPECULATORS_TYPES:
        problems.append(
            f"speculators_model_type={kind!r} is not an algorithm vLLM 0.29.0 registers ({', '.join(SPECULATORS_TYPES)}; "
            'vllm/transformers_utils/configs/speculators/base.py:53-58 raises "Expected one of"); stage a revision '
            f"of the draft whose config.json says {method!r}"
        )
    elif kind != method:
        problems.append(
            f"speculators_model_type={kind!r} but the profile runs decoding.method {method!r}; the plugin's "
            f"{method} proposer needs a {method} draft (vllm-neuron eagle.py, compile_and_load_draft_model)"
        )
    methods = spec.get("proposal_methods") if isinstance(spec, dict) else None
    if not (
        isinstance(methods, list) and methods and isinstance(methods[0], dict) and "speculative_tokens" in methods[0]
    ):
        problems.append("speculators_config.proposal_methods[0].speculative_tokens is missing (base.py:79-88)")
    verifier = spec.get("verifier") if isinstance(spec, dict) else None
    if not (isinstance(verifier, dict) and "name_or_path" in verifier):
        problems.append("speculators_config.verifier.name_or_path is missing (base.py:79-88)")
    layer = draft.get("transformer_layer_config")
    if not isinstance(layer, dict):
        problems.append("transformer_layer_config is missing or not an object (base.py:90-96)")
    elif kind == "eagle3" and layer.get("model_type", "llama") not in EAGLE3_LAYER_TYPES:
        problems.append(
            f"transformer_layer_config.model_type={layer.get('model_type')!r}: vLLM 0.29.0 builds EAGLE3 heads of "
            f"{' or '.join(EAGLE3_LAYER_TYPES)} layers only (algos.py:41-47)"
        )
    return problems


def draft_config_roles(method: str) -> tuple[str, ...]:
    """The draft's config.json always (speculators format); DFlash also its target's (the drafter must fit it)."""
    return ("target", "draft") if method == "dflash" else ("draft",)


def draft_problems(configs: Mapping[str, dict[str, Any]], method: str, k: int) -> list[str]:
    """What vLLM 0.29 and the plugin refuse at start, checked by the build before it takes the node."""
    problems = speculators_problems(configs["draft"], method)
    if method == "dflash":
        problems += dflash_drafter_problems(configs["target"], configs["draft"], k)
    return problems


def compile_args(*, vllm_argv: list[str], port: int, timeout_minutes: int) -> list[str]:
    """The build runs the Deployment's own vLLM command line until it serves (model_build.compile_cache)."""
    return ["--vllm-argv-json", json.dumps(vllm_argv), "--port", str(port), "--timeout-minutes", str(timeout_minutes)]


def profile_problems(profile: ProfileView, where: str) -> list[str]:
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
