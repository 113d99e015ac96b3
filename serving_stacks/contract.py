"""The contract every serving stack module implements, and the profile fields a stack may read.

A stack is a module, not a class: its module-level names are its members, and mypy checks a module against a
Protocol (`stack: ServingStack = legacy_v0` type-checks only if the module has every member with its type).
Code outside serving_stacks/ reads a stack only through these members, never by comparing its name, so adding
a stack is adding a module here, not an `if` elsewhere (tests/serving_stacks/test_contract.py holds both rules).

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


class DecodingView(Protocol):
    @property
    def method(self) -> str: ...


class ImageView(Protocol):
    @property
    def plugin_version(self) -> str | None: ...


class PlacementView(Protocol):
    @property
    def tensor_parallel_size(self) -> int: ...


class ProfileView(Protocol):
    """The fields of a serving profile (config.profiles.ServingProfile) that stacks read: typed here, because the
    config imports the stacks and the stacks may not import the config."""

    @property
    def decoding(self) -> DecodingView: ...

    @property
    def image(self) -> ImageView: ...

    @property
    def placement(self) -> PlacementView: ...

    @property
    def max_model_len(self) -> int: ...

    @property
    def max_num_seqs(self) -> int: ...

    @property
    def dtype(self) -> str: ...

    @property
    def speculative(self) -> bool: ...


class ArtifactKind(enum.Enum):
    """How model_build makes a stack's artifact (model_build/artifact.py picks the plan by this)."""

    NXDI_COMPILE = "nxdi-compile"  # model_build compiles with NxDI (model_build/plan.py, compile.py)
    COMPILE_CACHE = "compile-cache"  # the stack's own vLLM fills its compile cache (model_build/compile_cache.py)


@dataclass(frozen=True)
class LocalCache:
    """Node-local disk (an emptyDir) where serving copies the artifact before vLLM starts, because vLLM writes
    next to what it reads and the S3 mount cannot rename atomically."""

    path: str
    size_gib: int


def buckets(histogram: str) -> str:
    """A histogram's bucket series as prometheus_client exposes it (also `_sum` and `_count`, with `le` on buckets)."""
    return histogram + "_bucket"


def total(counter: str) -> str:
    """A counter's series as prometheus_client exposes it: the base name plus `_total` (prometheus_client strips a
    `_total` the source wrote, so vLLM 0.9.1's `vllm:generation_tokens_total` and 0.29.0's `vllm:generation_tokens`
    are both served as `vllm:generation_tokens_total`)."""
    return counter + "_total"


HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
POSITION_LABEL = "position"  # the draft position of a per-position acceptance counter


@dataclass(frozen=True)
class AcceptanceCounters:
    """A stack's speculative-decoding counters (base names). Over a window, accepted / draft tokens is vLLM's draft
    acceptance rate and 1 + accepted tokens / drafts the mean acceptance length."""

    drafts: str
    draft_tokens: str
    accepted_tokens: str
    accepted_per_position: str  # one series per draft position, labelled POSITION_LABEL

    @property
    def counters(self) -> tuple[str, ...]:
        return (self.drafts, self.draft_tokens, self.accepted_tokens, self.accepted_per_position)


@dataclass(frozen=True)
class LiveMetrics:
    """The Prometheus series a stack's vLLM serves on /metrics that the live dashboard, KEDA, the alert rules and
    bench read, as base names (prometheus_client's exposition adds `_bucket`/`_sum`/`_count` to a histogram and
    `_total` to a counter: `buckets`, `total`). tests/serving_stacks/test_live_metrics.py reads every name from the
    pinned vLLM's own source (`sources`, below its site-packages)."""

    vllm_version: str
    sources: tuple[str, ...]  # the files of that vLLM that define these series
    labels: tuple[str, ...]  # the labels vLLM puts on each of them
    ttft: str  # histogram: time to first token per request
    # histogram: one interval per request per engine step, so on a speculative profile one interval spans every
    # token the step emitted (vLLM 0.9.1 vllm/engine/llm_engine.py _get_stats; 0.29.0 vllm/v1/metrics/stats.py)
    itl: str
    generation_tokens: str  # counter
    # True when the engine counts one generated token per request per decode step, however many the step emitted:
    # under speculation the counter's rate is then steps per second, not tokens.
    generation_counts_steps: bool
    request_decode_time: str  # histogram per finished request: first to last token
    request_generation_tokens: str  # histogram per finished request: its output tokens (speculated ones included)
    requests_waiting: str  # gauge
    requests_running: str  # gauge
    acceptance: AcceptanceCounters | None  # None: the stack's vLLM reports no acceptance, and `no_acceptance` says why
    no_acceptance: str = ""

    def __post_init__(self) -> None:
        if (self.acceptance is None) != bool(self.no_acceptance):
            raise ValueError("LiveMetrics: give the acceptance counters, or None and one sentence in no_acceptance")

    @property
    def histograms(self) -> tuple[str, ...]:
        return (self.ttft, self.itl, self.request_decode_time, self.request_generation_tokens)

    @property
    def counters(self) -> tuple[str, ...]:
        return (self.generation_tokens, *(self.acceptance.counters if self.acceptance else ()))

    @property
    def gauges(self) -> tuple[str, ...]:
        return (self.requests_waiting, self.requests_running)

    def exposed(self) -> frozenset[str]:
        """Every series name these become on /metrics."""
        return frozenset(
            [h + s for h in self.histograms for s in HISTOGRAM_SUFFIXES]
            + [total(c) for c in self.counters]
            + list(self.gauges)
        )


@runtime_checkable
class ServingStack(Protocol):
    """One Neuron vLLM stack: its images, methods, command line, environment, artifact and config rules."""

    @property
    def NAME(self) -> str: ...

    @property
    def IMAGE_TAG(self) -> str:
        """The image tag the stack is checked with: the one error sentences recommend."""
        ...

    @property
    def MIN_DRIVER(self) -> tuple[int, ...]:
        """The Neuron driver the stack's images were released with (config checks the node AMI's)."""
        ...

    @property
    def METHODS(self) -> tuple[str, ...]:
        """The decoding methods the stack serves, "none" first."""
        ...

    @property
    def ARTIFACT(self) -> ArtifactKind: ...

    @property
    def METRICS_PATH(self) -> str:
        """Where the stack's vLLM serves Prometheus metrics (the managed scraper reads it)."""
        ...

    @property
    def METRICS_PORT_NAME(self) -> str:
        """The name of the serving container's one port (API, health and /metrics; charts/vllm_service.py): the
        Service, the probes and the metrics sidecar (charts/metrics_proxy.py), the scraper's only way in, reach it."""
        ...

    @property
    def LIVE_METRICS(self) -> LiveMetrics:
        """The series its vLLM serves that the dashboard, KEDA, the alert rules and bench read (or why acceptance is
        not among them)."""
        ...

    @property
    def COMPILE_CACHE_SUBDIR(self) -> str | None:
        """Where below its cache root the stack's vLLM keeps the compile cache that is its artifact (ARTIFACT is
        COMPILE_CACHE), or None when the artifact is not a compile cache."""
        ...

    @property
    def LOCAL_CACHE(self) -> LocalCache | None:
        """Where serving copies the artifact to, or None when vLLM reads it from the S3 mount."""
        ...

    def serves_image(self, vllm: str, plugin: str | None, sdk: str) -> bool:
        """Whether an image with these versions (from its tag) belongs to this stack."""
        ...

    def speculative_method(self, method: str) -> str:
        """The "method" of vLLM's --speculative-config for a configured decoding method."""
        ...

    def neuron_args(self, profile: ProfileView) -> list[str]:
        """The stack's own vLLM flags (how Neuron settings reach its vLLM)."""
        ...

    def graph_args(self, profile: ProfileView) -> list[str] | None:
        """The flags that shape the compiled graphs (digest inputs), or None when the artifact does not depend
        on vLLM's flags beyond the common digest inputs."""
        ...

    def digest_inputs(self, profile: ProfileView) -> dict[str, object]:
        """What the stack adds to the artifact digest beyond the common inputs (for a compile cache: the flags that
        shape its graphs, the plugin version and the compile route)."""
        ...

    def env(self, *, artifact_dir: str, logical_neuron_cores: int) -> dict[str, str]:
        """The serving container's environment of the stack."""
        ...

    def build_job_env(self, *, logical_neuron_cores: int, scratch: str, out_dir: str) -> dict[str, str]:
        """The build's environment of the stack (the compile route, LNC, where it compiles): rendered into the build
        Job, and set again by the compile-cache builder for the directory it fills."""
        ...

    def draft_config_roles(self, method: str) -> tuple[str, ...]:
        """Which staged checkpoints ("target", "draft") draft_problems reads the config.json of, for a profile of
        this decoding method: () when the stack checks nothing of them before it builds."""
        ...

    def draft_problems(self, configs: Mapping[str, dict[str, Any]], method: str, k: int) -> list[str]:
        """Why the stack's vLLM would refuse this draft when it starts, from the config.json files of the roles
        draft_config_roles names (keyed by role), for `method` with k speculative tokens; [] when it would not."""
        ...

    def serve_command(self, *, code_path: str, port: int, profile_name: str) -> list[str]:
        """The serving container's command; its args are vLLM's (after `vllm`)."""
        ...

    def compile_args(self, *, vllm_argv: list[str], port: int, timeout_minutes: int) -> list[str]:
        """Flags of `python -m model_build compile PROFILE --out DIR` beyond those, for the build Job."""
        ...

    def profile_problems(self, profile: ProfileView, where: str) -> list[str]:
        """The stack's own config rules, as sentences naming `where`, the value and the fix."""
        ...
