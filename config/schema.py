"""The typed deployment config: the one source of truth that stacks, charts, model_build and bench read.

Everything a user may change lives here once, with its unit and valid range. Cross-field rules
(config/rules.py: TP vs devices, tokenizer families, image capabilities, capacity) are checked when the config is
loaded, before any construct is created, so a bad value fails with a sentence, not a CDK traceback. The Neuron
catalogue and the fixed vocabulary the fields are checked against live in config/catalogue.py.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from config import bucket_layout
from config.catalogue import (
    DRA_DEVICE_GROUP_SIZES,
    IMAGE_TAG_PATTERN,
    MAX_NUM_SEQS,
    NEURON_INSTANCES,
    PLACEHOLDER_ACCOUNT,
    PLACEHOLDER_ADMIN_ARN,
    PRIVATE_SUBNET_PREFIX,
    PUBLIC_SUBNET_PREFIX,
    SYSTEM_NAMESPACES,
    NeuronInstance,
    smallest_vpc_prefix,
)
from config.endpoint import ENVOY_THRESHOLD_MAX, STICKY_HEADER
from config.kubernetes import DEFAULT_KUBERNETES_VERSION, DRA_MINIMUM_VERSION, SUPPORTED_KUBERNETES_VERSIONS
from config.ports import DEFAULT_API_PORT
from config.scaling import ScalingConfig
from config.speculation import K_MAX, K_MIN, K_RANGE
from config.tags import DEPLOYMENT_TAG_KEY, PROJECT_TAG_KEY, PROJECT_TAG_VALUE
from serving_stacks import DEFAULT_IMAGE_TAG, SPECULATIVE_METHODS, STACKS, catalogue, stack_named, stack_serving
from serving_stacks.contract import LiveMetrics

Name = Annotated[str, StringConstraints(pattern=r"^[a-z]([a-z0-9-]{0,28}[a-z0-9])?$")]
ProfileName = Annotated[str, StringConstraints(pattern=r"^[a-z]([a-z0-9-]{0,22}[a-z0-9])?$")]


class ConfigError(ValueError):
    """A config problem, phrased for the person at the keyboard: field, value, fix."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("Invalid trn-specdec config:\n" + "\n".join(f"  - {p}" for p in problems))


class _Strict(BaseModel):
    """Strict types: YAML's `true` is not the count 1, `"8"` is not 8, and a `!!binary` value is not a name."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


# --- leaves ----------------------------------------------------------------------------------


class HfModel(_Strict):
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


class Image(_Strict):
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


class NoSpeculation(_Strict):
    method: Literal["none"] = "none"


# The methods as a Literal built from the stacks' METHODS (pydantic's tagged union needs a Literal; mypy reads a str).
if TYPE_CHECKING:
    SpeculativeMethod = str
else:
    SpeculativeMethod = Literal[SPECULATIVE_METHODS]


class DraftSpeculation(_Strict):
    """A draft model proposes k tokens that the target verifies in one step."""

    method: SpeculativeMethod = Field(
        description="; ".join(f"{', '.join(m for m in s.METHODS if m != 'none')}: {s.NAME} stack" for s in STACKS)
    )
    draft: Name = Field(description="Key of the draft (a draft model, EAGLE3 head or DFlash drafter) in `models`.")
    num_speculative_tokens: int = Field(description=f"k, tokens proposed per target step ({K_MIN}..{K_MAX}).")
    draft_max_model_len: int | None = Field(
        default=None,
        ge=128,
        le=131072,
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


class Placement(_Strict):
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


class ServingDefaults(_Strict):
    """Everything two serving profiles share; a profile may override any field but `decoding`."""

    target: Name = "qwen3-32b"
    image: Image = Image()
    placement: Placement = Placement()
    max_model_len: int = Field(default=1024, ge=128, le=131072, description="Tokens of prompt + output.")
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


def ipv4_network(text: str, *, prefixes: range = range(0, 33)) -> str:
    """An IPv4 network in canonical form: no host bits (10.64.1.7/16 would silently become another VPC)."""
    try:
        net = ipaddress.IPv4Network(text, strict=False)
    except ValueError:
        raise ValueError(f"{text!r} is not an IPv4 network; write it like 10.64.0.0/16") from None
    if "/" not in text:
        raise ValueError(f"{text!r} has no prefix length; write it like {net.network_address}/32")
    if str(net) != text:
        raise ValueError(f"{text!r} has host bits set; the network is {net}, write that")
    if net.prefixlen not in prefixes:
        raise ValueError(f"{text!r} has prefix /{net.prefixlen}; use /{prefixes.start} to /{prefixes.stop - 1}")
    return text


class NetworkConfig(_Strict):
    vpc_cidr: str = Field(
        default="10.64.0.0/16",
        description="IPv4 network of the VPC, /16 to /18: each zone takes a public /24 and a private /20 "
        "(3 zones fit a /18, 4 to 6 zones a /17).",
    )
    availability_zones: list[Annotated[str, StringConstraints(pattern=r"^[a-z]{2}(-[a-z]+)+-\d[a-z]$")]] = Field(
        default_factory=lambda: ["us-east-2a", "us-east-2b", "us-east-2c"], min_length=2, max_length=6
    )
    nat_gateways: int = Field(default=1, ge=1, le=6)
    api_public_cidrs: list[str] = Field(
        default_factory=list,
        max_length=40,
        description="IPv4 networks allowed to reach the Kubernetes API over the internet; empty (the default) "
        "means the endpoint is private, reachable only from inside the VPC.",
    )

    @field_validator("vpc_cidr")
    @classmethod
    def _vpc_network(cls, cidr: str) -> str:
        ipv4_network(cidr)
        prefix, longest = int(cidr.split("/")[1]), smallest_vpc_prefix(2)
        if prefix < 16:
            raise ValueError(f"{cidr!r} has prefix /{prefix}, larger than a VPC may be (/16); use /16 to /{longest}")
        if prefix > longest:
            raise ValueError(
                f"{cidr!r} has prefix /{prefix}, too small for the subnets (each availability zone takes a public "
                f"/{PUBLIC_SUBNET_PREFIX} and a private /{PRIVATE_SUBNET_PREFIX}); use /16 to /{longest}"
            )
        return cidr

    @field_validator("availability_zones")
    @classmethod
    def _distinct_zones(cls, zones: list[str]) -> list[str]:
        for zone in sorted({z for z in zones if zones.count(z) > 1}):
            raise ValueError(f"{zone!r} is listed twice; list each availability zone once")
        return zones

    @model_validator(mode="after")
    def _vpc_holds_the_subnets(self) -> NetworkConfig:
        prefix = int(self.vpc_cidr.split("/")[1])
        needed = smallest_vpc_prefix(len(self.availability_zones))
        if prefix > needed:
            raise ValueError(
                f"vpc_cidr={self.vpc_cidr!r} is too small for {len(self.availability_zones)} availability "
                f"zones, each with a public /{PUBLIC_SUBNET_PREFIX} and a private /{PRIVATE_SUBNET_PREFIX} subnet; "
                f"use a /{needed} or larger (e.g. {ipaddress.IPv4Network(self.vpc_cidr).supernet(new_prefix=needed)})"
            )
        return self

    @field_validator("api_public_cidrs")
    @classmethod
    def _public_networks(cls, cidrs: list[str]) -> list[str]:
        for i, cidr in enumerate(cidrs):
            try:
                ipv4_network(cidr)
            except ValueError as err:
                raise ValueError(f"[{i}] {err}") from None
        return cidrs


class SystemNodeGroup(_Strict):
    instance_type: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")] = Field(
        default="m7i.xlarge", description="An x86_64 type: system nodes run the AL2023 x86_64 AMI."
    )
    min_size: int = Field(default=2, ge=1, le=20)
    desired_size: int = Field(default=2, ge=1, le=20)
    max_size: int = Field(default=4, ge=1, le=20)
    disk_gib: int = Field(default=100, ge=20, le=2000)

    @field_validator("instance_type")
    @classmethod
    def _x86_64(cls, instance_type: str) -> str:
        """Graviton families carry a `g` after the generation (m7g, c6gn, t4g, x2gd, is4gen) or are a1."""
        family = instance_type.split(".")[0]
        match = re.fullmatch(r"[a-z]+\d+(?P<attributes>[a-z-]*)", family)
        if family == "a1" or (match and "g" in match["attributes"]):
            raise ValueError(
                f"{instance_type!r} is a Graviton (arm64) type, but the system nodes run "
                "the AL2023 x86_64 AMI; use an x86_64 type such as m7i.xlarge"
            )
        return instance_type


class Trn2NodeGroupConfig(_Strict):
    instance_type: str = "trn2.48xlarge"
    min_size: int = Field(default=1, ge=0, le=64)
    desired_size: int = Field(default=1, ge=0, le=64)
    max_size: int = Field(
        default=2,
        ge=1,
        le=64,
        description="The ceiling the Cluster Autoscaler may grow the group to (min_size is its floor); KEDA's "
        "maximum replicas are each profile's share of max_size nodes (docs/elastic-capacity.md).",
    )
    node_ready_seconds: int = Field(
        default=600,
        ge=60,
        le=3600,
        description="Seconds from a scale-up to a trn2 node that is Ready with its devices published (EC2 launch, "
        "boot, join, Neuron DRA ResourceSlices): an estimate until the cold-start report measures it. The Cluster "
        "Autoscaler's scale-down waits derive from it.",
    )
    capacity_block_instances: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="With CAPACITY_BLOCK: the instance count of the reservation (EC2 console). The node group "
        "cannot grow past it, so max_size may not exceed it.",
    )
    capacity_type: Literal["ON_DEMAND", "CAPACITY_BLOCK"] = "ON_DEMAND"
    capacity_reservation_id: Annotated[str, StringConstraints(pattern=r"^cr-[0-9a-f]{8,17}$")] | None = None
    availability_zone: str | None = Field(
        default=None, description="Pin the node group to one AZ (required for CAPACITY_BLOCK)."
    )
    capacity_block_end: AwareDatetime | None = Field(
        default=None,
        description="When the Capacity Block ends, with its time zone (the EC2 console shows it in UTC, e.g. "
        "2026-12-01T11:30:00Z). Set it with CAPACITY_BLOCK: the benchmark refuses to start in its last 45 minutes.",
    )
    disk_gib: int = Field(default=1024, ge=200, le=16000, description="Root volume, sized for compile scratch.")
    # gp3 ranges from the EC2 API (botocore 1.44's LaunchTemplateEbsBlockDeviceRequest): IOPS 3,000-80,000,
    # throughput 125-2,000 MiB/s. Above 3,000 IOPS and 125 MiB/s each unit is billed monthly (README, Costs).
    disk_iops: int = Field(
        default=16000, ge=3000, le=80000, description="Root volume gp3 IOPS: compile and staging write tens of GB."
    )
    disk_throughput_mibps: int = Field(default=1000, ge=125, le=2000, description="Root volume gp3 throughput, MiB/s.")
    hourly_price_usd: float | None = Field(
        default=None,
        gt=0,
        le=1000,
        description="What one node costs per hour in USD (your region's on-demand or Capacity Block rate): bench "
        "and the dashboard turn it into cost per 1M output tokens. None: no cost shown (README, Costs).",
    )
    ami_release_version: str | None = Field(
        default=None,
        description="EKS AMI release (<k8s x.y.z>-<yyyymmdd>); must be >= 1.34.2 for DRA (1.34.0/1.34.1 have a DRA bug).",
    )

    @field_validator("capacity_block_end", mode="before")
    @classmethod
    def _timestamp_text(cls, value: object) -> object:
        """YAML reads an unquoted timestamp as a datetime and a quoted one as text: take both, but not a number
        (lax parsing would read 1 as 1970-01-01T00:00:01Z)."""
        if not isinstance(value, str):
            return value
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a timestamp; write it like 2026-12-01T11:30:00Z") from None

    @field_validator("ami_release_version")
    @classmethod
    def _ami_release(cls, release: str | None) -> str | None:
        if release is None:
            return None
        match = re.fullmatch(r"(\d{1,2})\.(\d{1,3})\.(\d{1,3})-(\d{8})", release)
        if not match:
            raise ValueError(
                f"{release!r} is not an EKS AMI release like 1.35.0-20251120 (<kubernetes x.y.z>-<yyyymmdd>); "
                "copy one from the EKS AMI release notes or leave it null for the latest"
            )
        if tuple(int(g) for g in match.groups()[:3]) < (1, 34, 2):
            raise ValueError(f"{release!r} is older than 1.34.2; Neuron DRA needs AMI 1.34.2 or newer")
        return release

    @field_validator("instance_type")
    @classmethod
    def _neuron_instance(cls, instance_type: str) -> str:
        if instance_type.startswith("trn3"):
            raise ValueError(
                f"instance_type={instance_type!r} is a Trainium3 type; this project serves on Trainium2 only (use one "
                f"of {', '.join(NEURON_INSTANCES)}): Trainium3 comes as trn3 instances and UltraServers placed through "
                "the Neuron UltraServer Operator beside the DRA driver, and no serving stack here is checked on it yet "
                "(the plan: docs/trainium3.md)"
            )
        if instance_type not in NEURON_INSTANCES:
            raise ValueError(
                f"instance_type={instance_type!r} is not a Trainium2 instance; use one of {', '.join(NEURON_INSTANCES)}"
            )
        return instance_type

    @property
    def instance(self) -> NeuronInstance:
        return NEURON_INSTANCES[self.instance_type]


class BucketConfig(_Strict):
    retain_on_delete: bool = Field(
        default=False,
        description="Keep the models bucket on teardown: compiled artifacts take hours to rebuild.",
    )


class ObservabilityConfig(_Strict):
    metrics_namespace: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_./#:-]{1,255}$")] = "TrnSpecdec/Bench"

    @field_validator("metrics_namespace")
    @classmethod
    def _not_aws(cls, namespace: str) -> str:
        """CloudWatch refuses PutMetricData into namespaces starting with `AWS/` (reserved for AWS services)."""
        if namespace.upper().startswith("AWS/"):
            raise ValueError(
                f"{namespace!r} starts with AWS/, which CloudWatch reserves for AWS "
                "services (PutMetricData is refused); use your own, e.g. TrnSpecdec/Bench"
            )
        return namespace

    alarm_topic_arn: (
        Annotated[
            str, StringConstraints(pattern=r"^arn:aws[a-z-]*:sns:[a-z]{2}(-[a-z]+)+-\d:\d{12}:[A-Za-z0-9_-]{1,256}$")
        ]
        | None
    ) = Field(
        default=None, description="SNS topic the alarms notify (an existing topic); none: alarms only show state."
    )


class SloConfig(_Strict):
    """Service-level objectives for goodput (`bench sweep`): a request is good when it meets both. Defaults:
    GuideLLM's chat SLOs (TTFT <= 200 ms and ITL <= 50 ms at p99)."""

    ttft_p99_ms: float = Field(default=200.0, gt=0, le=600_000, description="Time to first token limit, ms.")
    tpot_p99_ms: float = Field(default=50.0, gt=0, le=60_000, description="Time per output token limit, ms.")


class SweepConfig(_Strict):
    """`bench sweep`: how often each load point runs and when speculation counts as no longer paying."""

    repeats: int = Field(default=3, ge=1, le=10, description="Runs of every load point (median and spread).")
    speedup_floor: float = Field(
        default=1.05,
        gt=1.0,
        le=2.0,
        description="The crossover is the lowest load at which the p50 TPOT speedup falls below this.",
    )


class BenchConfig(_Strict):
    slo: SloConfig = SloConfig()
    sweep: SweepConfig = SweepConfig()


class EndpointConfig(_Strict):
    """One OpenAI endpoint in front of the profiles (docs/endpoint.md): an Envoy Deployment rendered from this."""

    enabled: bool = True
    weights: dict[ProfileName, Annotated[int, Field(ge=0, le=100)]] = Field(
        default_factory=dict,
        description="Percent of sessions per profile, summing to 100; a profile not named gets 0 and is reached only "
        "with the override header. Empty: everything to the baseline.",
    )
    sticky_header: Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")] = Field(
        default=STICKY_HEADER,
        description="Requests with the same value of this header land on the same arm (unless spilled); without it "
        "each request draws an arm by the weights.",
    )
    spill: bool = Field(default=True, description="Send new requests of a busy speculative arm to the baseline.")
    # Up to Envoy's limit, not less: the loader folds crossover_file's thresholds in here, and the config.yaml the
    # Jobs load (charts/code_bundle.py) must validate with them.
    spill_threshold: dict[ProfileName, Annotated[int, Field(ge=1, le=ENVOY_THRESHOLD_MAX)]] = Field(
        default_factory=dict,
        description="In-flight requests per replica above which a speculative profile spills; wins over "
        "crossover_file. Unset: the crossover, else the profile's max_num_seqs.",
    )
    crossover_file: Annotated[str, StringConstraints(pattern=r"^[\w./-]+\.json$")] | None = Field(
        default=None,
        description="The load sweep's crossover.json (docs/sweep.md), relative to the config file's folder. The "
        "loader reads it once and turns it into spill_threshold entries, then clears it: the loaded config names no "
        "file.",
    )
    internal_load_balancer: bool = Field(
        default=False,
        description="Also expose the endpoint on an internal NLB (VPC only, tagged for the teardown sweep); default "
        "ClusterIP only (kubectl port-forward).",
    )
    port: int = Field(default=DEFAULT_API_PORT, ge=1024, le=65535)
    replicas: int = Field(default=1, ge=1, le=8, description="Router pods; each caps spill on its own count.")


# --- root ------------------------------------------------------------------------------------


class DeploymentConfig(_Strict):
    """The whole deployment. Load it with `config.load_config`, never construct stacks without it."""

    name: Name = Field(default="trn-specdec", description="Prefix of stack, cluster and resource names.")
    region: Annotated[str, StringConstraints(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")] = "us-east-2"
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    admin_principal_arn: str = Field(
        default=PLACEHOLDER_ADMIN_ARN,
        description="IAM role or user ARN (arn:aws:iam::<account>:role/<name>) that administers the cluster.",
    )
    network: NetworkConfig = NetworkConfig()
    system_nodes: SystemNodeGroup = SystemNodeGroup()
    trn2_nodes: Trn2NodeGroupConfig = Trn2NodeGroupConfig()
    bucket: BucketConfig = BucketConfig()
    observability: ObservabilityConfig = ObservabilityConfig()
    scaling: ScalingConfig = ScalingConfig()
    bench: BenchConfig = BenchConfig()
    namespace: Name = "trn-specdec"
    models: dict[Name, HfModel]
    serving: ServingDefaults = ServingDefaults()
    profiles: list[ServingProfile] = Field(min_length=1)
    baseline: Name | None = Field(
        default=None,
        description="The profile every speedup is measured against (bench, dashboard); it must not speculate. "
        "Default: the first profile without speculation.",
    )
    endpoint: EndpointConfig = EndpointConfig()
    api_key_secret: Name | None = Field(
        default=None,
        description="Name of a Secret in the namespace holding the key `api-key`: every vLLM service then requires "
        "`Authorization: Bearer <key>` on /v1 requests and the benchmark Job sends it. Default: no key (the "
        "namespace's NetworkPolicy still admits only its own pods).",
    )

    @model_validator(mode="before")
    @classmethod
    def _profiles_inherit_serving_defaults(cls, data: object) -> object:
        """Merge the shared `serving` block under each profile, so profiles state only what differs."""
        if not isinstance(data, dict):
            return data
        shared = data.get("serving") or {}
        profiles = data.get("profiles")
        if isinstance(shared, dict) and isinstance(profiles, list):
            data = {**data, "profiles": [_merge(shared, p) if isinstance(p, dict) else p for p in profiles]}
        return data

    @field_validator("name")
    @classmethod
    def _name_gives_its_own_stacks(cls, name: str) -> str:
        """Stack names drop the hyphens (trn-specdec -> TrnSpecdec-Cluster). That is one-to-one only if every
        hyphen-separated part starts with a letter: `a-1` and `a1` would both be A1-*, `trn--specdec` would be
        TrnSpecdec-*, and deploying one would update (replace) the other deployment's stacks."""
        if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z][a-z0-9]*)*", name):
            raise ValueError(
                f"{name!r} has a hyphen not followed by a letter, so its stack names ({_stack_prefix(name)}-*) "
                "could be those of another deployment; start every part after a hyphen with a letter (team-b, not team-2 "
                "or team--b)"
            )
        return name

    @field_validator("namespace")
    @classmethod
    def _own_namespace(cls, namespace: str) -> str:
        """The charts own the namespace (and put a default-deny ingress policy on it)."""
        if namespace in SYSTEM_NAMESPACES or namespace.startswith("kube-"):
            raise ValueError(
                f"{namespace!r} is a system namespace (Kubernetes or the cluster's add-ons: "
                f"{', '.join(SYSTEM_NAMESPACES)}, kube-*); the charts own their namespace and deny ingress in it, "
                "so use one of your own, e.g. trn-specdec"
            )
        return namespace

    @field_validator("admin_principal_arn")
    @classmethod
    def _iam_principal(cls, arn: str) -> str:
        """EKS access entries take IAM role or user ARNs; an STS assumed-role session ARN is refused at deploy."""
        session = re.fullmatch(r"arn:(aws[a-z-]*):sts::(\d{12}):assumed-role/([\w+=,.@-]+)/[\w+=,.@-]+", arn)
        if session:
            partition, account, role = session.groups()
            raise ValueError(
                f"{arn!r} is an STS session, which EKS access entries refuse; use the role "
                f"itself, arn:{partition}:iam::{account}:role/{role} (with its path, if it has one; see `aws iam "
                f"get-role --role-name {role}`)"
            )
        if not re.fullmatch(r"arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+", arn):
            raise ValueError(
                f"{arn!r} is malformed; use an IAM role or user ARN like arn:aws:iam::<account>:role/<name>"
            )
        return arn

    @field_validator("kubernetes_version")
    @classmethod
    def _k8s_version(cls, version: str) -> str:
        if not re.fullmatch(r"1\.\d{2}", version):
            raise ValueError(
                f"kubernetes_version={version!r} is not of the form 1.NN; use {DEFAULT_KUBERNETES_VERSION}"
            )
        if tuple(map(int, version.split("."))) < DRA_MINIMUM_VERSION:
            floor = ".".join(map(str, DRA_MINIMUM_VERSION))
            raise ValueError(
                f"kubernetes_version={version} is below {floor}; Neuron DRA needs resource.k8s.io/v1 ({floor}+), "
                f"use {DEFAULT_KUBERNETES_VERSION}"
            )
        if version not in SUPPORTED_KUBERNETES_VERSIONS:
            raise ValueError(
                f"kubernetes_version={version} has no pinned kubectl layer here; use one of "
                f"{', '.join(SUPPORTED_KUBERNETES_VERSIONS)}"
            )
        return version

    # --- derived values (read by stacks, charts, model_build, bench) ---------------------------

    @cached_property
    def cluster_name(self) -> str:
        return f"{self.name}-eks"

    @cached_property
    def stack_names(self) -> dict[str, str]:
        """CloudFormation stack names, e.g. TrnSpecdec-Cluster (read by the stacks and the teardown sweep)."""
        prefix = _stack_prefix(self.name)
        return {kind: f"{prefix}-{kind.capitalize()}" for kind in ("models", "cluster", "workloads", "observability")}

    def models_bucket_name(self, account: str) -> str:
        """Deterministic per account and region, so every tool can find the bucket from the config alone."""
        return bucket_layout.models_bucket_name(self.name, account, self.region)

    @property
    def tags(self) -> dict[str, str]:
        """Tags on every AWS resource; the teardown sweep matches on these."""
        return {PROJECT_TAG_KEY: PROJECT_TAG_VALUE, DEPLOYMENT_TAG_KEY: self.name}

    @property
    def trn2_availability_zone(self) -> str:
        """The Trainium2 nodes live in one AZ (placement group, Capacity Block, one node in the default)."""
        return self.trn2_nodes.availability_zone or self.network.availability_zones[0]

    @property
    def efa_required(self) -> bool:
        """Claims of more than one device match on devicegroup attributes, published only with EFA."""
        return any(p.placement.devices > 1 for p in self.profiles)

    @property
    def baseline_profile(self) -> ServingProfile:
        """The reference every speedup is measured against: `baseline`, else the first profile without
        speculation. The one owner: bench, its in-cluster Job and the dashboard all read this."""
        if self.baseline is not None:
            return self.profile(self.baseline)
        return next((p for p in self.profiles if not p.speculative), self.profiles[0])

    def profile_models(self, profile: ServingProfile) -> list[str]:
        """The models one profile loads (keys of `models`): its target, and its draft if it speculates with one."""
        return [profile.target, *([profile.decoding.draft] if isinstance(profile.decoding, DraftSpeculation) else [])]

    def models_in_use(self) -> list[str]:
        """Every model a profile needs (targets and drafts), in config order: what staging uploads."""
        return list(dict.fromkeys(k for p in self.profiles for k in self.profile_models(p)))

    def profile_devices(self, profile: ServingProfile) -> int:
        """Neuron devices the profile's service claims, all replicas."""
        return profile.placement.devices * profile.replicas

    def profile(self, name: str) -> ServingProfile:
        for p in self.profiles:
            if p.name == name:
                return p
        raise KeyError(f"no profile named {name!r}; configured: {', '.join(p.name for p in self.profiles)}")

    @property
    def admin_is_placeholder(self) -> bool:
        return f"::{PLACEHOLDER_ACCOUNT}:" in self.admin_principal_arn


def _stack_prefix(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-"))


def _merge(base: dict, override: dict) -> dict:
    out = dict(base)
    for key, value in override.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out
