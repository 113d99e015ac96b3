"""The typed config: the default reproduces the reference, and bad input fails with field, value and fix."""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config import ConfigError, parse_config
from config.catalogue import MAX_PROFILES
from config.profiles import DraftSpeculation
from tests.conftest import EXAMPLE_ACCOUNT, default_config_dict


def problems_for(mutate) -> list[str]:
    data = default_config_dict()
    mutate(data)
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    return err.value.problems


def test_default_config_reproduces_the_reference_setup(default_config):
    c = default_config
    assert (c.region, c.kubernetes_version) == ("us-east-2", "1.35")
    assert c.trn2_nodes.instance_type == "trn2.48xlarge" and c.trn2_nodes.capacity_type == "ON_DEMAND"
    assert [p.name for p in c.profiles] == ["baseline", "speculative"]
    base, spec = c.profiles
    assert c.models[base.target].hf_id == "Qwen/Qwen3-32B"
    assert isinstance(spec.decoding, DraftSpeculation)
    assert spec.decoding.method == "fused-draft" and spec.decoding.num_speculative_tokens == 7
    assert c.models[spec.decoding.draft].hf_id == "Qwen/Qwen3-1.7B"
    for p in c.profiles:
        assert (p.placement.devices, p.placement.logical_neuron_cores, p.placement.tensor_parallel_size) == (8, 2, 32)
        assert p.image.tag == "0.9.1-neuronx-py311-sdk2.26.1-ubuntu22.04" and p.image.stack == "legacy-v0"
    assert all(len(m.revision) == 40 for m in c.models.values())
    assert c.admin_is_placeholder and c.efa_required


def test_the_models_in_use_are_each_profiles_target_and_draft_once_in_config_order(default_config):
    base, spec = default_config.profiles
    assert default_config.profile_models(base) == ["qwen3-32b"]
    assert default_config.profile_models(spec) == ["qwen3-32b", "qwen3-1-7b"]
    assert default_config.models_in_use() == ["qwen3-32b", "qwen3-1-7b"]  # qwen3-0-6b is configured, unused


def test_profiles_inherit_the_shared_serving_block_and_differ_only_in_decoding(default_config):
    base, spec = default_config.profiles
    assert base.model_dump(exclude={"name", "decoding"}) == spec.model_dump(exclude={"name", "decoding"})


def test_a_profile_may_override_a_shared_field():
    data = default_config_dict()
    data["profiles"][0]["max_num_seqs"] = 2
    config = parse_config(data)
    assert [p.max_num_seqs for p in config.profiles] == [2, 4]


def _set(path: str, value: Any):
    def mutate(data: dict) -> None:
        node = data
        keys = path.split(".")
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        last = keys[-1]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


def _all(*mutations):
    def mutate(data: dict) -> None:
        for m in mutations:
            m(data)

    return mutate


PLUGIN_TAG = "0.29.0.1.2.0-neuronx-py314-sdk2.33.0-ubuntu26.04"


def _plugin_dflash(data: dict) -> None:
    """The default config on the vllm-neuron image, its second profile a DFlash one on one device at TP 4."""
    data["serving"]["image"]["tag"] = PLUGIN_TAG
    data["profiles"][1]["placement"] = {"devices": 1, "tensor_parallel_size": 4}
    data["profiles"][1]["decoding"] = {"method": "dflash", "draft": "qwen3-1-7b", "num_speculative_tokens": 15}


# One row per cross-field rule of DeploymentConfig (every `problems.append` in config/schema.py and config/rules.py),
# each with a fragment only that rule's sentence contains: deleting any single rule fails its row.
CROSS_FIELD_RULES = {
    "bucket name too long": (
        _all(
            _set("name", "a" * 30),
            _set("region", "ap-southeast-2"),
            _set("network.availability_zones", ["ap-southeast-2a", "ap-southeast-2b"]),
        ),
        "is too long for the bucket name",
    ),
    "profile names unique": (_set("profiles.1.name", "baseline"), "name 'baseline' is used twice"),
    "baseline is a profile": (_set("baseline", "nope"), "baseline='nope' is not a profile"),
    "baseline does not speculate": (_set("baseline", "speculative"), "speedups need a reference without speculation"),
    "target is a model": (_set("profiles.0.target", "nope"), "target='nope' is not a key of models"),
    "stack serves the method": (
        _set("serving.image.tag", PLUGIN_TAG),
        "'fused-draft' cannot be served by image",
    ),
    "DFlash TP 4 or 8 (vllm-neuron)": (
        _all(_plugin_dflash, _set("profiles.1.placement", {"devices": 4, "tensor_parallel_size": 16})),
        "DFlash on Neuron is validated for tensor_parallel_size 4 or 8 only",
    ),
    "DFlash BF16 (vllm-neuron)": (
        _all(_plugin_dflash, _set("profiles.1.dtype", "float16")),
        "DFlash on Trn2 requires BF16",
    ),
    "stacks mixed on one node group": (
        _set(
            "profiles.1",
            {"name": "eagle3", "image": {"tag": PLUGIN_TAG}, "placement": {"devices": 4, "tensor_parallel_size": 16}},
        ),
        "no pinned driver is known to serve both",
    ),
    "AMI driver older than the image's": (
        _all(
            _set("serving.image.tag", PLUGIN_TAG),
            _set("profiles.1.decoding", {"method": "none"}),
            _set("trn2_nodes.ami_release_version", "1.35.2-20260714"),
        ),
        "ships Neuron driver 2.29.0.0, older than the 2.31.7.0",
    ),
    "acceptance watched only where the stack reports it": (
        _set("profiles.1.decoding.tuned_acceptance_rate", 0.62),
        "profiles[1] (speculative).decoding.tuned_acceptance_rate=0.62 cannot be watched on the legacy-v0 stack: vLLM "
        "0.9.1 sets its vllm:spec_decode_* series only",
    ),
    "draft is a model": (_set("profiles.1.decoding.draft", "qwen3-8b"), "draft='qwen3-8b' is not a key of models"),
    "draft is not the target": (_set("profiles.1.decoding.draft", "qwen3-32b"), "is the target itself"),
    "draft no longer than the target": (
        _set("profiles.1.decoding.draft_max_model_len", 2048),
        "draft_max_model_len=2048 is larger than",
    ),
    "draft shares the tokenizer": (_set("models.qwen3-1-7b.tokenizer_family", "llama3"), "tokenizer family 'llama3'"),
    "TP = devices x cores": (_set("serving.placement.tensor_parallel_size", 64), "set tensor_parallel_size: 32"),
    "devices fit the instance": (_set("trn2_nodes.instance_type", "trn2.3xlarge"), "devices=8 exceeds the 1 devices"),
    "devices fit the node group": (_set("serving.replicas", 3), "claim 48 Neuron devices"),
    "node group sizes ordered": (_set("system_nodes.desired_size", 9), "system_nodes: min_size=2 <= desired_size=9"),
    "capacity block has a reservation": (
        _all(_set("trn2_nodes.capacity_type", "CAPACITY_BLOCK"), _set("trn2_nodes.availability_zone", "us-east-2b")),
        "needs trn2_nodes.capacity_reservation_id",
    ),
    "capacity block has an AZ": (
        _all(
            _set("trn2_nodes.capacity_type", "CAPACITY_BLOCK"),
            _set("trn2_nodes.capacity_reservation_id", "cr-0123456789abcdef0"),
        ),
        "needs trn2_nodes.availability_zone",
    ),
    "reservation only with a capacity block": (
        _set("trn2_nodes.capacity_reservation_id", "cr-0123456789abcdef0"),
        "is set but capacity_type is ON_DEMAND",
    ),
    "block end only with a capacity block": (
        _set("trn2_nodes.capacity_block_end", "2026-12-01T11:30:00Z"),
        "capacity_block_end=2026-12-01T11:30:00+00:00 is set but capacity_type is ON_DEMAND",
    ),
    "trn2 floor at least one node under DRA": (
        _all(_set("trn2_nodes.min_size", 0), _set("trn2_nodes.desired_size", 0)),
        "trn2_nodes.min_size=0: the Cluster Autoscaler cannot grow a node group from zero nodes",
    ),
    "capacity block ceiling within its reservation": (
        _all(
            _set("trn2_nodes.capacity_type", "CAPACITY_BLOCK"),
            _set("trn2_nodes.capacity_reservation_id", "cr-0123456789abcdef0"),
            _set("trn2_nodes.availability_zone", "us-east-2b"),
            _set("trn2_nodes.capacity_block_instances", 1),
        ),
        "trn2_nodes.max_size=2 is above the Capacity Block size capacity_block_instances=1: the node group cannot grow past its reservation; set max_size: 1",
    ),
    "capacity block ceiling checked against its reservation": (
        _all(
            _set("trn2_nodes.capacity_type", "CAPACITY_BLOCK"),
            _set("trn2_nodes.capacity_reservation_id", "cr-0123456789abcdef0"),
            _set("trn2_nodes.availability_zone", "us-east-2b"),
        ),
        "set capacity_block_instances to the instance count of the block",
    ),
    "block size only with a capacity block": (
        _set("trn2_nodes.capacity_block_instances", 2),
        "capacity_block_instances=2 is set but capacity_type is ON_DEMAND",
    ),
    "disk throughput within its IOPS": (_set("trn2_nodes.disk_iops", 3000), "needs at least 4000 IOPS"),
    "AMI not ahead of the control plane": (
        _set("trn2_nodes.ami_release_version", "1.36.0-20260601"),
        "newer than kubernetes_version=1.35",
    ),
    "trn2 AZ is a network AZ": (
        _set("trn2_nodes.availability_zone", "us-west-2a"),
        "is not one of network.availability_zones",
    ),
    "network AZs in the region": (
        _set("network.availability_zones", ["us-west-2a", "us-east-2b"]),
        "contains 'us-west-2a', which is not in region us-east-2",
    ),
    "a profile without speculation": (
        _set("profiles.0.decoding", {"method": "fused-draft", "draft": "qwen3-0-6b", "num_speculative_tokens": 5}),
        "every profile speculates",
    ),
    "profiles within the template limit": (
        _all(
            _set("trn2_nodes.max_size", 64),
            _set("serving.placement", {"devices": 1, "tensor_parallel_size": 4}),
            lambda data: data["profiles"].extend({"name": f"p{i}"} for i in range(MAX_PROFILES - 1)),
        ),
        f"{MAX_PROFILES + 1} profiles are more than {MAX_PROFILES}",
    ),
    "alarm topic in the region": (
        _set("observability.alarm_topic_arn", f"arn:aws:sns:us-west-2:{EXAMPLE_ACCOUNT}:alerts"),
        "create the topic in us-east-2",
    ),
    "endpoint names profiles": (_set("endpoint.weights", {"baseline": 90, "nobody": 10}), "'nobody' is not a profile"),
    "endpoint weights add to 100": (_set("endpoint.weights", {"baseline": 90, "speculative": 20}), "add up to 110"),
    "endpoint arms serve one model": (
        _all(
            _set("trn2_nodes.max_size", 2),
            lambda data: data["profiles"].append({"name": "small", "target": "qwen3-1-7b"}),
            _set("endpoint.weights", {"baseline": 90, "small": 10}),
        ),
        "one endpoint serves one model name",
    ),
    "endpoint spill only speculates": (
        _set("endpoint.spill_threshold", {"baseline": 4}),
        "baseline does not speculate",
    ),
    "endpoint port is not the router's own": (_set("endpoint.port", 9902), "the router's own metrics port"),
    "profile port is not its pod's metrics sidecar": (
        _set("profiles.0.port", 9400),
        "profiles[0] (baseline).port=9400 is the port of the metrics sidecar (charts/metrics_proxy.py",
    ),
}


@pytest.mark.parametrize("rule", CROSS_FIELD_RULES)
def test_each_cross_field_rule_refuses_with_its_sentence(rule):
    mutate, fragment = CROSS_FIELD_RULES[rule]
    text = "\n".join(problems_for(mutate))
    assert fragment in text, f"{fragment!r} not in:\n{text}"


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("profiles.1.decoding.num_speculative_tokens", 0, ["num_speculative_tokens=0", "1..15"]),
        ("profiles.1.decoding.num_speculative_tokens", 16, ["num_speculative_tokens=16", "1..15"]),
        (
            "profiles.1.decoding.draft_max_model_len",
            2048,
            [
                "profiles[1] (speculative).decoding.draft_max_model_len=2048",
                "profiles[1] (speculative).max_model_len=1024",
                "set draft_max_model_len: 1024",
            ],
        ),
        ("models.qwen3-1-7b.tokenizer_family", "llama3", ["tokenizer family 'llama3'", "tokenizers_compatible"]),
        ("serving.placement.tensor_parallel_size", 64, ["tensor_parallel_size=64", "set tensor_parallel_size: 32"]),
        ("serving.placement.devices", 2, ["devices=2", "1, 4, 8, 16"]),
        ("trn2_nodes.instance_type", "p5.48xlarge", ["instance_type='p5.48xlarge'", "trn2.48xlarge"]),
        (
            "trn2_nodes.instance_type",
            "trn3.48xlarge",
            ["instance_type='trn3.48xlarge' is a Trainium3 type", "UltraServer Operator", "docs/trainium3.md"],
        ),
        ("trn2_nodes.capacity_type", "CAPACITY_BLOCK", ["capacity_reservation_id", "availability_zone"]),
        ("kubernetes_version", "1.33", ["kubernetes_version=1.33", "1.34", "use 1.35"]),
        ("kubernetes_version", "1.37", ["kubernetes_version=1.37", "kubectl layer"]),
        ("serving.image.tag", PLUGIN_TAG, ["fused-draft", "cannot be served", "0.9.1-neuronx-py311-sdk2.26.1"]),
        # tags no stack serves: the NxDI-based V1 images, an SDK without NxDI, another plugin release
        ("serving.image.tag", "0.11.0-neuronx-py312-sdk2.27.1-ubuntu24.04", ["served by no stack", PLUGIN_TAG]),
        ("serving.image.tag", "0.9.1-neuronx-py311-sdk2.32.0-ubuntu22.04", ["served by no stack", "2.32+ drop NxDI"]),
        ("serving.image.tag", "0.24.0.1.1.0-neuronx-py313-sdk2.32.0-ubuntu24.04", ["served by no stack"]),
        ("serving.image.tag", "latest", ["image tag 'latest'"]),
        ("name", "Trn_Specdec", ["name='Trn_Specdec'", "malformed"]),
        ("profiles.0.name", "Baseline!", ["profiles[0].name='Baseline!'", "malformed"]),
        ("admin_principal_arn", "admin", ["admin_principal_arn: 'admin' is malformed", "role/<name>"]),
        ("trn2_nodes.capacity_reservation_id", "cr-0123456789abcdef0", ["capacity_reservation_id", "CAPACITY_BLOCK"]),
        ("trn2_nodes.availability_zone", "us-west-2a", ["availability_zone='us-west-2a'"]),
        ("profiles.1.decoding.draft", "qwen3-8b", ["draft='qwen3-8b'", "add it under models"]),
        ("profiles.1.decoding.method", "medusa", ["method='medusa'", "fused-draft", "eagle3", "dflash"]),
        ("profiles.1.decoding.method", "eagle3", ["method='eagle3'", "legacy-v0 stack serves", PLUGIN_TAG]),
        ("serving.replicas", 3, ["claim 48 Neuron devices", "max_size"]),
        ("trn2_nodes.desired_size", 5, ["desired_size=5", "order them"]),
        ("trn2_nodes.disk_iops", 2000, ["trn2_nodes.disk_iops=2000", "greater than or equal to 3000"]),
        ("trn2_nodes.disk_throughput_mibps", 4000, ["disk_throughput_mibps=4000", "less than or equal to 2000"]),
        ("trn2_nodes.disk_iops", 3000, ["disk_throughput_mibps=1000 needs at least 4000 IOPS", "lower", "to 750"]),
        ("unknown_field", 1, ["unknown_field is not a known field"]),
        ("observability.alarm_topic_arn", "alerts", ["alarm_topic_arn='alerts'", "malformed"]),
        ("network.vpc_cidr", "10.64.1.7/16", ["network.vpc_cidr", "host bits", "10.64.0.0/16"]),
        ("network.vpc_cidr", "999.999.999.999/16", ["network.vpc_cidr", "not an IPv4 network"]),
        ("network.vpc_cidr", "10.0.0.0/8", ["network.vpc_cidr", "/16 to /18"]),
        ("network.vpc_cidr", "10.64.0.0/19", ["network.vpc_cidr: '10.64.0.0/19'", "too small", "/16 to /18"]),
        ("network.vpc_cidr", "10.64.0.0/24", ["network.vpc_cidr: '10.64.0.0/24'", "too small", "/16 to /18"]),
        (
            "network",
            {"vpc_cidr": "10.64.0.0/18", "availability_zones": [f"us-east-2{z}" for z in "abcd"]},
            ["vpc_cidr='10.64.0.0/18' is too small for 4 availability zones", "use a /17 or larger", "10.64.0.0/17"],
        ),
        (
            "system_nodes.instance_type",
            "m7g.xlarge",
            ["system_nodes.instance_type: 'm7g.xlarge'", "Graviton", "m7i.xlarge"],
        ),
        ("system_nodes.instance_type", "c6gn.large", ["instance_type: 'c6gn.large'", "Graviton"]),
        ("system_nodes.instance_type", "t4g.medium", ["instance_type: 't4g.medium'", "Graviton"]),
        ("system_nodes.instance_type", "a1.large", ["instance_type: 'a1.large'", "Graviton"]),
        ("name", "trn--specdec", ["name: 'trn--specdec'", "TrnSpecdec-*", "start every part after a hyphen"]),
        ("name", "a-1", ["name: 'a-1'", "A1-*", "start every part after a hyphen"]),
        ("namespace", "kube-system", ["namespace: 'kube-system'", "system namespace", "e.g. trn-specdec"]),
        ("namespace", "default", ["namespace: 'default'", "system namespace"]),
        ("namespace", "kube-public", ["namespace: 'kube-public'", "system namespace"]),
        ("namespace", "kube-anything", ["namespace: 'kube-anything'", "system namespace"]),
        ("namespace", "amazon-cloudwatch", ["namespace: 'amazon-cloudwatch'", "system namespace"]),
        ("observability.metrics_namespace", "AWS/EC2", ["metrics_namespace: 'AWS/EC2'", "reserves", "TrnSpecdec"]),
        ("observability.metrics_namespace", "aws/bench", ["metrics_namespace: 'aws/bench'", "reserves"]),
        (
            "admin_principal_arn",
            f"arn:aws:sts::{EXAMPLE_ACCOUNT}:assumed-role/Admin/alice",
            [
                f"admin_principal_arn: 'arn:aws:sts::{EXAMPLE_ACCOUNT}:assumed-role/Admin/alice'",
                "STS session",
                f"arn:aws:iam::{EXAMPLE_ACCOUNT}:role/Admin",
            ],
        ),
        # strict types: YAML's true is not 1, a float is not a count, bytes (!!binary) are not a name
        ("trn2_nodes.max_size", True, ["trn2_nodes.max_size=True", "valid integer"]),
        ("profiles.1.decoding.num_speculative_tokens", True, ["num_speculative_tokens=True", "valid integer"]),
        ("serving.placement.logical_neuron_cores", True, ["logical_neuron_cores=True", "valid integer"]),
        ("serving.placement.logical_neuron_cores", 4, ["logical_neuron_cores: 4 is not 1 or 2"]),
        ("serving.port", 8000.0, ["port=8000.0", "valid integer"]),
        ("trn2_nodes.hourly_price_usd", True, ["hourly_price_usd=True", "valid number"]),
        ("bucket.retain_on_delete", 1, ["retain_on_delete=1", "valid boolean"]),
        ("name", b"trn-specdec", ["name=b'trn-specdec'", "valid string"]),
        ("trn2_nodes.capacity_block_end", 1, ["capacity_block_end=1", "valid datetime"]),  # lax: 1970-01-01
        ("trn2_nodes.capacity_block_end", "tomorrow", ["capacity_block_end: 'tomorrow' is not a timestamp"]),
        ("network.api_public_cidrs", ["203.0.113.0/24", "not-a-cidr"], ["network.api_public_cidrs", "[1]"]),
        ("network.api_public_cidrs", ["203.0.113.7/24"], ["api_public_cidrs", "[0]", "203.0.113.0/24"]),
        ("network.api_public_cidrs", ["203.0.113.7"], ["api_public_cidrs", "no prefix length", "/32"]),
        ("network.availability_zones", ["us-east-2a", "us-east-2a"], ["availability_zones", "listed twice"]),
        ("models.qwen3-32b.hf_id", "Qwen/..", ["models.qwen3-32b.hf_id", "'..' segment"]),
        ("models.qwen3-32b.hf_id", "../Qwen3-32B", ["models.qwen3-32b.hf_id"]),
        ("serving.image.repository", "", ["image.repository=''", "malformed"]),
        ("bench.sweep.speedup_floor", 1.0, ["bench.sweep.speedup_floor", "1.0"]),
        ("bench.slo.ttft_p99_ms", 0, ["bench.slo.ttft_p99_ms"]),
        ("trn2_nodes.ami_release_version", "latest", ["ami_release_version", "1.35.0-20251120"]),
        ("trn2_nodes.ami_release_version", "1.34.1-20251001", ["ami_release_version", "older than 1.34.2"]),
        ("trn2_nodes.ami_release_version", "1.36.0-20260701", ["ami_release_version", "newer than"]),
        (
            "observability.alarm_topic_arn",
            f"arn:aws:sns:us-west-2:{EXAMPLE_ACCOUNT}:alerts",
            [f"alarm_topic_arn='arn:aws:sns:us-west-2:{EXAMPLE_ACCOUNT}:alerts'", "create the topic in us-east-2"],
        ),
    ],
)
def test_invalid_value_names_field_value_and_fix(path, value, expected):
    problems = problems_for(_set(path, value))
    text = "\n".join(problems)
    for fragment in expected:
        assert fragment in text, f"{fragment!r} not in:\n{text}"


def test_stack_names_are_one_to_one_over_names_that_differ_in_hyphens_or_digits():
    """Every accepted name of up to four characters from {a, b, 1, -} gets its own stack names (a-1/a1 and
    trn--specdec/trn-specdec collided before); deploying one deployment can never update another's stacks."""
    import itertools

    owners: dict[str, str] = {}
    data = default_config_dict()
    for length in range(1, 5):
        for chars in itertools.product("ab1-", repeat=length):
            name = "".join(chars)
            try:
                config = parse_config({**data, "name": name})
            except ConfigError:
                continue
            prefix = config.stack_names["cluster"]
            assert prefix not in owners, f"{name!r} and {owners[prefix]!r} both synthesize {prefix}"
            owners[prefix] = name
    assert {"a", "a1", "a-b", "ab", "a-b1"} <= set(owners.values())


def test_the_vpc_size_rule_matches_cdks_subnet_allocation():
    """smallest_vpc_prefix mirrors how aws-cdk-lib allocates the subnets; test_cluster_stack checks it against
    the real allocator, this row only pins the numbers the README and the field description quote."""
    from config.catalogue import smallest_vpc_prefix

    assert [smallest_vpc_prefix(z) for z in range(2, 7)] == [18, 18, 17, 17, 17]


def test_endpoint_is_private_by_default_and_listed_networks_are_kept():
    assert parse_config(default_config_dict()).network.api_public_cidrs == []
    data = default_config_dict()
    data["network"]["api_public_cidrs"] = ["203.0.113.0/24", "198.51.100.7/32"]
    data["trn2_nodes"]["ami_release_version"] = "1.35.0-20251120"
    config = parse_config(data)
    assert config.network.api_public_cidrs == ["203.0.113.0/24", "198.51.100.7/32"]


def test_tokenizer_mismatch_is_allowed_when_declared_compatible():
    data = default_config_dict()
    data["models"]["qwen3-1-7b"]["tokenizer_family"] = "llama3"
    data["profiles"][1]["decoding"]["tokenizers_compatible"] = True
    assert parse_config(data).profiles[1].decoding.tokenizers_compatible


def test_capacity_block_with_reservation_and_zone_is_valid():
    data = default_config_dict()
    data["trn2_nodes"].update(
        capacity_type="CAPACITY_BLOCK",
        capacity_reservation_id="cr-0123456789abcdef0",
        availability_zone="us-east-2b",
        capacity_block_instances=2,
    )
    config = parse_config(data)
    assert config.trn2_availability_zone == "us-east-2b"


@pytest.mark.parametrize(
    ("field", "value", "sentence"),
    [
        (
            "capacity_block_end",
            "2026-12-01T11:30:00Z",
            "trn2_nodes.capacity_block_end=2026-12-01T11:30:00+00:00 is set but capacity_type is ON_DEMAND; set "
            "capacity_type: CAPACITY_BLOCK or remove capacity_block_end",
        ),
        (
            "capacity_reservation_id",
            "cr-0123456789abcdef0",
            "trn2_nodes.capacity_reservation_id='cr-0123456789abcdef0' is set but capacity_type is ON_DEMAND; set "
            "capacity_type: CAPACITY_BLOCK or remove the id",
        ),
        (
            "capacity_block_instances",
            2,
            "trn2_nodes.capacity_block_instances=2 is set but capacity_type is ON_DEMAND; set capacity_type: "
            "CAPACITY_BLOCK or remove capacity_block_instances",
        ),
    ],
)
def test_a_capacity_block_field_on_demand_is_refused_with_the_field_its_value_and_the_fix(field, value, sentence):
    """The three fields only a Capacity Block uses share one sentence (config/rules.py _capacity_block_only)."""
    assert problems_for(_set(f"trn2_nodes.{field}", value)) == [sentence]


def test_the_default_ceiling_of_two_nodes_lets_both_profiles_grow(default_config):
    from config.scaling import max_replicas, min_replicas

    assert (default_config.trn2_nodes.min_size, default_config.trn2_nodes.max_size) == (1, 2)
    for p in default_config.profiles:
        assert max_replicas(default_config, p) == 2 > min_replicas(p)


def test_the_vllm_neuron_example_serves_eagle3_on_the_plugin_image_at_tp_16():
    from config import load_config
    from tests.conftest import ROOT

    config = load_config(ROOT / "config" / "vllm-neuron.yaml")
    assert [(p.name, p.decoding.method, p.image.stack) for p in config.profiles] == [
        ("baseline", "none", "vllm-neuron"),
        ("eagle3", "eagle3", "vllm-neuron"),
    ]
    spec = config.profiles[1]
    assert spec.image.tag == PLUGIN_TAG and (spec.image.vllm_version, spec.image.plugin_version) == ("0.29.0", "1.2.0")
    assert (spec.placement.devices, spec.placement.tensor_parallel_size) == (4, 16)
    draft = config.models[spec.decoding.draft]
    assert draft.hf_id == "RedHatAI/Qwen3-32B-speculator.eagle3" and spec.decoding.num_speculative_tokens == 3
    assert config.baseline_profile.name == "baseline"  # the speculative profile's baseline is on its own stack


def test_dflash_at_tp_4_or_8_in_bf16_is_accepted():
    for lnc, tp in ((2, 4), (1, 8)):
        data = default_config_dict()
        _plugin_dflash(data)
        data["profiles"][1]["placement"] = {"devices": 1, "logical_neuron_cores": lnc, "tensor_parallel_size": tp}
        assert parse_config(data).profiles[1].decoding.method == "dflash"


def test_a_dflash_profile_at_tp_16_is_refused_with_a_sentence():
    data = default_config_dict()
    _plugin_dflash(data)
    data["profiles"][1]["placement"] = {"devices": 4, "tensor_parallel_size": 16}
    assert problems_for(lambda d: d.update(data)) == [
        "profiles[1] (speculative).placement.tensor_parallel_size=16 but DFlash on Neuron is validated for "
        "tensor_parallel_size 4 or 8 only (vllm-neuron dflash.py); set devices: 1 with logical_neuron_cores: 2 "
        "(TP 4) or logical_neuron_cores: 1 (TP 8), or use decoding.method: eagle3 for TP 16"
    ]


def test_a_pinned_ami_with_a_new_enough_driver_is_accepted_for_the_legacy_stack():
    data = default_config_dict()
    data["trn2_nodes"]["ami_release_version"] = "1.35.2-20260714"
    assert parse_config(data).trn2_nodes.ami_release_version == "1.35.2-20260714"


# --- property: random invalid configs raise ConfigError naming a field, never anything else -----------


def _paths(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in [f"{prefix}{k}", *_paths(v, f"{prefix}{k}.")]]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in [f"{prefix}{i}", *_paths(v, f"{prefix}{i}.")]]
    return []


DEFAULT = default_config_dict()
FIELD_PATHS = _paths(DEFAULT)
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


@settings(
    max_examples=int(os.environ.get("CONFIG_FUZZ_EXAMPLES", "250")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(mutations=st.lists(st.tuples(st.sampled_from(FIELD_PATHS), JUNK), min_size=1, max_size=3))
def test_random_mutations_raise_only_config_errors_that_name_a_field(mutations):
    data = copy.deepcopy(DEFAULT)
    for path, value in mutations:
        try:
            _set(path, value)(data)
        except (KeyError, IndexError, TypeError, ValueError):
            continue  # an earlier mutation replaced a parent node; that is still a valid random config
    try:
        parse_config(data)
    except ConfigError as err:
        assert err.problems
        for problem in err.problems:
            assert any(name in problem for name in _field_names()), problem


@settings(max_examples=100, deadline=None)
@given(k=st.integers().filter(lambda k: not 1 <= k <= 15))
def test_any_k_outside_range_is_rejected_naming_it(k):
    problems = problems_for(_set("profiles.1.decoding.num_speculative_tokens", k))
    assert any("num_speculative_tokens" in p and str(k) in p for p in problems)


@settings(max_examples=60, deadline=None)
@given(devices=st.sampled_from([1, 4, 8, 16]), tp=st.integers(min_value=1, max_value=128))
def test_tp_must_equal_devices_times_logical_cores(devices, tp):
    data = default_config_dict()
    data["serving"]["placement"] = {"devices": devices, "logical_neuron_cores": 2, "tensor_parallel_size": tp}
    data["trn2_nodes"].update(min_size=2, desired_size=2, max_size=2)  # two 16-device services need two nodes
    if tp == devices * 4:
        assert parse_config(data).profiles[0].placement.tensor_parallel_size == tp
    else:
        with pytest.raises(ConfigError) as err:
            parse_config(data)
        assert any("tensor_parallel_size" in p for p in err.value.problems)


def _field_names() -> set[str]:
    return {segment for path in FIELD_PATHS for segment in path.split(".") if not segment.isdigit()} | {
        "profiles",
        "config",
    }


def test_every_cross_field_rule_has_a_row():
    """A new `problems.append` in DeploymentConfig, config/rules.py or a stack's profile_problems needs its row in
    CROSS_FIELD_RULES."""
    import ast
    import inspect

    from config import rules
    from config.schema import DeploymentConfig
    from serving_stacks import STACKS

    sources = [
        inspect.getsource(DeploymentConfig),
        inspect.getsource(rules),
        *(inspect.getsource(s.profile_problems) for s in STACKS),
    ]
    appends = [
        n
        for source in sources
        for n in ast.walk(ast.parse(source.strip() if source.startswith("def") else source))
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "append"
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "problems"
    ]
    assert len(appends) == len(CROSS_FIELD_RULES), "add a row to CROSS_FIELD_RULES for each new rule"


def test_the_baseline_is_named_in_the_config_or_is_the_first_plain_profile() -> None:
    data = default_config_dict()
    spec = copy.deepcopy(data["profiles"][1])
    # [plain (none), baseline (fused-draft)]: names do not decide, speculation does
    data["profiles"] = [{**copy.deepcopy(data["profiles"][0]), "name": "plain"}, {**spec, "name": "baseline"}]
    assert parse_config(data).baseline_profile.name == "plain"
    data["profiles"].append({**copy.deepcopy(data["profiles"][0]), "name": "plain-2"})
    data["trn2_nodes"]["max_size"] = 2  # room for a third service
    data["baseline"] = "plain-2"
    assert parse_config(data).baseline_profile.name == "plain-2"


def test_a_baseline_that_is_missing_or_speculates_is_refused() -> None:
    assert problems_for(lambda d: d.update(baseline="nope")) == [
        "baseline='nope' is not a profile; use one of baseline, speculative"
    ]
    assert problems_for(lambda d: d.update(baseline="speculative")) == [
        "baseline='speculative' speculates (fused-draft); speedups need a reference without speculation: "
        "name one of baseline"
    ]


@pytest.mark.parametrize("method", ["fused-draft", "eagle3", "dflash"])
def test_a_decoding_error_is_located_without_the_method_tag(method):
    """pydantic puts the union's tag into the location; every stack's methods are taken out of what we show."""

    def mutate(d):
        d["profiles"][1]["decoding"].update(method=method, num_speculative_tokens=99)

    (problem,) = problems_for(mutate)
    assert problem.startswith("profiles[1].decoding.num_speculative_tokens:"), problem


def test_every_method_a_stack_serves_is_a_decoding_method_and_no_other():
    """The config's vocabulary of decoding.method comes from the stacks' METHODS (one owner): each parses, in the
    order the stacks list them, and a method no stack serves is refused by pydantic's tag check."""
    import typing

    from config.profiles import DraftSpeculation
    from serving_stacks import STACKS

    served = [m for s in STACKS for m in s.METHODS if m != "none"]
    for method in served:
        assert DraftSpeculation(method=method, draft="d", num_speculative_tokens=7).method == method
    assert list(typing.get_args(DraftSpeculation.model_fields["method"].annotation)) == served
    with pytest.raises(ValueError, match="Input should be 'fused-draft', 'eagle3' or 'dflash'"):
        DraftSpeculation(method="medusa", draft="d", num_speculative_tokens=7)


def test_an_unknown_method_names_every_stacks_methods():
    (problem,) = problems_for(lambda d: d["profiles"][1]["decoding"].update(method="eagle"))
    assert "method='eagle' is unknown" in problem
    assert "none, fused-draft (legacy-v0 stack)" in problem and "none, eagle3, dflash (vllm-neuron stack)" in problem


def test_the_shipped_configs_publish_disjoint_metric_series():
    """Both shipped configs have a `baseline` profile: in one CloudWatch namespace their Variant=baseline
    series (and dashboards, alarms) would mix two deployments' numbers."""
    from pathlib import Path

    from config import load_config

    shipped = sorted(Path(__file__).resolve().parents[2].glob("config/*.yaml"))
    assert len(shipped) >= 2
    owners: dict[tuple[str, str], str] = {}
    for path in shipped:
        config = load_config(path)
        for profile in config.profiles:
            series = (config.observability.metrics_namespace, profile.name)
            assert series not in owners, f"{path.name} and {owners[series]} both publish {series}"
            owners[series] = path.name


def test_sweep_slos_default_to_guidellms_chat_slos_and_a_config_may_set_them(default_config):
    assert (default_config.bench.slo.ttft_p99_ms, default_config.bench.slo.tpot_p99_ms) == (200.0, 50.0)
    assert (default_config.bench.sweep.repeats, default_config.bench.sweep.speedup_floor) == (3, 1.05)
    data = default_config_dict()
    data["bench"] = {"slo": {"ttft_p99_ms": 500}, "sweep": {"speedup_floor": 1.1}}
    cfg = parse_config(data)
    assert (cfg.bench.slo.ttft_p99_ms, cfg.bench.slo.tpot_p99_ms, cfg.bench.sweep.speedup_floor) == (500, 50, 1.1)


@pytest.mark.parametrize("rate", [1.0, 1])
def test_a_tuned_acceptance_rate_of_one_is_refused_because_its_alert_would_always_fire(rate):
    """The live rate (accepted / proposed) is at most 1, so `live < 1.0` holds whenever a draft token is rejected."""

    def tuned(d):
        d["profiles"][1]["decoding"]["tuned_acceptance_rate"] = rate

    (problem,) = problems_for(tuned)
    assert problem.startswith(f"profiles[1].decoding.tuned_acceptance_rate={rate}: Input should be less than 1"), (
        problem
    )
