"""The typed deployment config: the one source of truth that stacks, charts, model_build and bench read.

Everything a user may change lives here once, with its unit and valid range. This module is the root: the top-level
fields and the derived values every layer reads; each section is a module of its own (config/network.py, nodes.py,
profiles.py, observability.py, bench.py, routing.py, scaling.py). Cross-field rules (config/rules.py: TP vs
devices, tokenizer families, image capabilities, capacity) are checked when the config is loaded, before any
construct is created, so a bad value fails with a sentence, not a CDK traceback. The Neuron catalogue and the fixed
vocabulary the fields are checked against live in config/catalogue.py.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Annotated

from pydantic import Field, StringConstraints, field_validator, model_validator

from config import bucket_layout
from config.bench import BenchConfig
from config.catalogue import PLACEHOLDER_ACCOUNT, PLACEHOLDER_ADMIN_ARN, SYSTEM_NAMESPACES
from config.kubernetes import DEFAULT_KUBERNETES_VERSION, DRA_MINIMUM_VERSION, SUPPORTED_KUBERNETES_VERSIONS
from config.network import NetworkConfig
from config.nodes import SystemNodeGroup, Trn2NodeGroupConfig
from config.observability import ObservabilityConfig
from config.profiles import DraftSpeculation, HfModel, ServingDefaults, ServingProfile
from config.routing import EndpointConfig
from config.scaling import ScalingConfig
from config.section import Name, Section
from config.tags import DEPLOYMENT_TAG_KEY, PROJECT_TAG_KEY, PROJECT_TAG_VALUE


class ConfigError(ValueError):
    """A config problem, phrased for the person at the keyboard: field, value, fix."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("Invalid trn-specdec config:\n" + "\n".join(f"  - {p}" for p in problems))


# A section of one field, too small for a module of its own; the bucket's names are config/bucket_layout.py's.
class BucketConfig(Section):
    retain_on_delete: bool = Field(
        default=False,
        description="Keep the models bucket on teardown: compiled artifacts take hours to rebuild.",
    )


class DeploymentConfig(Section):
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
