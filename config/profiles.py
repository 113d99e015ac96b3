"""The `models`, `serving` and `profiles` sections: the Hugging Face models, and the vLLM services that serve them
(image, placement, decoding). Profiles differ only where their values differ: each inherits `serving`
(config/schema.py merges it in)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, StringConstraints, field_validator

from config.catalogue import DRA_DEVICE_GROUP_SIZES, IMAGE_TAG_PATTERN, MAX_NUM_SEQS
from config.ports import DEFAULT_API_PORT
from config.section import Name, ProfileName, Section
from config.speculation import K_MAX, K_MIN, K_RANGE
from serving_stacks import DEFAULT_IMAGE_TAG, SPECULATIVE_METHODS, STACKS, catalogue, stack_named, stack_serving
from serving_stacks.contract import LiveMetrics

# vLLM's max_model_len, of a target or a draft: tokens of prompt + output.
ModelLength = Annotated[int, Field(ge=128, le=131072)]


class HfModel(Section):
    """A Hugging Face model pinned to one commit, staged once into the bucket."""

    hf_id: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")]
    revision: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")] = Field(
        description="40-hex commit of the Hugging Face repo; never a branch, so rebuilds are reproducible."
    )
    tokenizer_family: Name = Field(description="Models of one family share a tokenizer (e.g. qwen3).")

    @field_validator("hf_id")
    @classmethod
    def _no_path_segments(cls, hf_id: str) -> str:
        """The id becomes a bucket key and a local path: `.` or `..` would escape its prefix."""
        if any(part in (".", "..") for part in hf_id.split("/")):
            raise ValueError(f"hf_id={hf_id!r} contains a '.' or '..' segment; use <org>/<name>, e.g. Qwen/Qwen3-32B")
        return hf_id


class Image(Section):
    """The Neuron vLLM image; compile and serve always use the same one."""

    repository: Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9.-]*(:\d+)?(/[a-z0-9][a-z0-9._-]*)+$")] = (
        "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx"
    )
    tag: str = DEFAULT_IMAGE_TAG

    @field_validator("tag")
    @classmethod
    def _tag_shape(cls, tag: str) -> str:
        match = IMAGE_TAG_PATTERN.match(tag)
        if not match:
            raise ValueError(
                f"image tag {tag!r} is not of the form <vllm>[.<plugin>]-neuronx-py<NN>-sdk<x.y.z>-ubuntu<NN.NN>; "
                "use a tag of public.ecr.aws/neuron/pytorch-inference-vllm-neuronx"
            )
        if stack_serving(match["vllm"], match["plugin"], match["sdk"]) is None:
            raise ValueError(
                f"image tag {tag!r} is served by no stack here ({catalogue()}); legacy fork images need an SDK "
                "before 2.32 (2.32+ drop NxDI), plugin images the vLLM version the engine check pins"
            )
        return tag

    @property
    def uri(self) -> str:
        return f"{self.repository}:{self.tag}"

    @property
    def vllm_version(self) -> str:
        return IMAGE_TAG_PATTERN.match(self.tag)["vllm"]  # type: ignore[index]

    @property
    def sdk_version(self) -> str:
        return IMAGE_TAG_PATTERN.match(self.tag)["sdk"]  # type: ignore[index]

    @property
    def plugin_version(self) -> str | None:
        return IMAGE_TAG_PATTERN.match(self.tag)["plugin"]  # type: ignore[index]

    @property
    def stack(self) -> str:
        """The serving stack of this image (a module of serving_stacks/), chosen by the versions in its tag."""
        return stack_serving(self.vllm_version, self.plugin_version, self.sdk_version).NAME  # type: ignore[union-attr]


class NoSpeculation(Section):
    method: Literal["none"] = "none"


# The methods as a Literal built from the stacks' METHODS (pydantic's tagged union needs a Literal; mypy reads a str).
if TYPE_CHECKING:
    SpeculativeMethod = str
else:
    SpeculativeMethod = Literal[SPECULATIVE_METHODS]


class DraftSpeculation(Section):
    """A draft model proposes k tokens that the target verifies in one step."""

    method: SpeculativeMethod = Field(
        description="; ".join(f"{', '.join(m for m in s.METHODS if m != 'none')}: {s.NAME} stack" for s in STACKS)
    )
    draft: Name = Field(description="Key of the draft (a draft model, EAGLE3 head or DFlash drafter) in `models`.")
    num_speculative_tokens: int = Field(description=f"k, tokens proposed per target step ({K_MIN}..{K_MAX}).")
    draft_max_model_len: ModelLength | None = Field(
        default=None,
        description="The draft's max_model_len in --speculative-config; at most the profile's max_model_len "
        "(vLLM refuses to start otherwise). Unset: the profile's max_model_len.",
    )
    tokenizers_compatible: bool = Field(
        default=False,
        description="Set true only if you checked that draft and target tokenize identically.",
    )
    tuned_acceptance_rate: float | None = Field(
        default=None,
        gt=0,
        lt=1,  # the live rate never exceeds 1, so at 1 the alert would always fire
        description="vLLM's draft acceptance rate (accepted / proposed draft tokens, a fraction) this profile showed "
        "when it was tuned: the server acceptance `bench run`/`bench sweep` report, in percent there. Set: an alert "
        "fires when the live rate stays below it for 15 minutes (draft or traffic drift). Unset: no alert. Only on a "
        "stack whose vLLM reports acceptance (vllm-neuron; legacy-v0 does not).",
    )

    @field_validator("num_speculative_tokens")
    @classmethod
    def _k_range(cls, k: int) -> int:
        if k not in K_RANGE:
            raise ValueError(f"num_speculative_tokens={k} is outside {K_MIN}..{K_MAX}; the blog swept 5..15, use 7")
        return k


Decoding = Annotated[NoSpeculation | DraftSpeculation, Field(discriminator="method")]


class Placement(Section):
    """How many connected Neuron devices a replica claims and at which logical core size."""

    devices: int = Field(default=8, description="Connected devices per replica: 1, 4, 8 or 16.")
    logical_neuron_cores: int = Field(
        default=2, description="LNC: physical cores fused into one logical core, 1 or 2 (trn2 default 2)."
    )
    tensor_parallel_size: int = Field(default=32, ge=1, le=128)

    @field_validator("logical_neuron_cores")
    @classmethod
    def _lnc(cls, lnc: int) -> int:
        """An int, not Literal[1, 2]: a Literal would take YAML's `true` as 1."""
        if lnc not in (1, 2):
            raise ValueError(f"{lnc} is not 1 or 2; use 2 (the trn2 default) or 1")
        return lnc

    @field_validator("devices")
    @classmethod
    def _device_group(cls, devices: int) -> int:
        if devices not in DRA_DEVICE_GROUP_SIZES:
            raise ValueError(
                f"devices={devices} is not a connected device group size; use one of "
                f"{', '.join(map(str, DRA_DEVICE_GROUP_SIZES))} (Neuron DRA devicegroup attributes)"
            )
        return devices


class ServingDefaults(Section):
    """Everything two serving profiles share; a profile may override any field but `decoding`."""

    target: Name = "qwen3-32b"
    image: Image = Image()
    placement: Placement = Placement()
    max_model_len: ModelLength = Field(default=1024, description="Tokens of prompt + output.")
    max_num_seqs: int = Field(default=4, ge=1, le=MAX_NUM_SEQS, description="Concurrent sequences (batch size).")
    dtype: Literal["bfloat16", "float16"] = "bfloat16"
    replicas: int = Field(default=1, ge=0, le=64)
    port: int = Field(default=DEFAULT_API_PORT, ge=1024, le=65535)
    mount_cache_gib: int = Field(
        default=200, ge=0, le=4000, description="Local disk cache of the S3 mount (weights are read once, then hot)."
    )
    startup_timeout_minutes: int = Field(
        default=40, ge=5, le=600, description="Time to load precompiled artifacts from S3 onto the devices."
    )


class ServingProfile(ServingDefaults):
    """One vLLM service. Profiles differ from each other only where their values differ."""

    name: ProfileName
    decoding: Decoding = NoSpeculation()

    @property
    def speculative(self) -> bool:
        return self.decoding.method != "none"

    @property
    def live_metrics(self) -> LiveMetrics:
        """The series this profile's vLLM serves that the dashboard, KEDA, the alert rules and bench read: its
        stack's (serving_stacks/contract.py LiveMetrics)."""
        return stack_named(self.image.stack).LIVE_METRICS
