"""Every valid config synthesizes the whole CDK app with zero cdk-nag findings and cfn-lint errors, not only
the fixed configs: hypothesis draws two different ones per run (1 to 4 profiles, either stack, mixed decoding, k,
devices x LNC, replicas, on demand or Capacity Block, retained bucket, alarm topic, both Kubernetes
versions). Cost on 2 cores (measured 2026-11-26): a synth about 1 s of CPU once jsii runs, cfn-lint about 1 s
per config once loaded; so a run checks two configs, and runs are not derandomized, so CI covers more of the
space over time."""

from __future__ import annotations

import copy
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bench.prompts import DEFAULT_SUITE
from config import parse_config
from config.catalogue import NEURON_INSTANCES
from config.kubernetes import SUPPORTED_KUBERNETES_VERSIONS
from tests.conftest import (
    EXAMPLE_ACCOUNT,
    THREE_PROFILE_CONFIGS,
    Synth,
    cfn_lint_errors,
    default_config_dict,
    synthesize,
)

DEFAULT = default_config_dict()
TRN2 = NEURON_INSTANCES["trn2.48xlarge"]
DRAFTS = ("qwen3-1-7b", "qwen3-0-6b")
PROFILE_NAMES = ("baseline", "speculative", "spec-k5", "alt-a", "b2")


@st.composite
def placements(draw: st.DrawFn) -> dict[str, int]:
    devices = draw(st.sampled_from((1, 4, 8, 16)))
    lnc = draw(st.sampled_from((1, 2)))
    return {
        "devices": devices,
        "logical_neuron_cores": lnc,
        "tensor_parallel_size": devices * TRN2.physical_cores_per_device // lnc,
    }


PLUGIN_TAG = "0.29.0.1.2.0-neuronx-py314-sdk2.33.0-ubuntu26.04"
EAGLE3_HEAD = {
    "hf_id": "RedHatAI/Qwen3-32B-speculator.eagle3",
    "revision": "dc84fe7ff1db31efa824776f49c141fc8195eb47",
    "tokenizer_family": "qwen3",
}


@st.composite
def profiles(draw: st.DrawFn, name: str, plugin: bool) -> dict[str, Any]:
    """A profile of the legacy-v0 stack (none / fused-draft) or of the vllm-neuron stack (none / eagle3)."""
    profile: dict[str, Any] = {"name": name}
    if draw(st.booleans()):
        profile["decoding"] = {
            "method": "eagle3" if plugin else "fused-draft",
            "draft": "qwen3-32b-eagle3" if plugin else draw(st.sampled_from(DRAFTS)),
            "num_speculative_tokens": draw(st.integers(min_value=1, max_value=15)),
        }
    else:
        profile["decoding"] = {"method": "none"}
    if draw(st.booleans()):
        profile["placement"] = draw(placements())
    if draw(st.booleans()):
        profile["replicas"] = draw(st.integers(min_value=0, max_value=2))
    return profile


@st.composite
def valid_configs(draw: st.DrawFn) -> dict[str, Any]:
    data = copy.deepcopy(DEFAULT)
    names = draw(st.lists(st.sampled_from(PROFILE_NAMES), min_size=1, max_size=4, unique=True))
    plugin = draw(st.booleans())  # one stack per config: the node group's driver serves one (config rule)
    if plugin:
        data["serving"]["image"]["tag"] = PLUGIN_TAG
        data["models"]["qwen3-32b-eagle3"] = EAGLE3_HEAD
    data["profiles"] = [draw(profiles(n, plugin)) for n in names]
    if all(p["decoding"]["method"] != "none" for p in data["profiles"]):  # a config needs a reference (config rule)
        data["profiles"][0]["decoding"] = {"method": "none"}
    data["serving"]["placement"] = draw(placements())
    data["kubernetes_version"] = draw(st.sampled_from(SUPPORTED_KUBERNETES_VERSIONS))
    data["bucket"]["retain_on_delete"] = draw(st.booleans())
    if draw(st.booleans()):
        data["observability"]["alarm_topic_arn"] = f"arn:aws:sns:us-east-2:{EXAMPLE_ACCOUNT}:trn-alerts"
    claimed = sum(
        (p.get("placement") or data["serving"]["placement"])["devices"] * p.get("replicas", 1) for p in data["profiles"]
    )
    max_size = max(1, math.ceil(claimed / TRN2.devices)) + draw(st.integers(min_value=0, max_value=1))
    trn2 = data["trn2_nodes"]
    trn2.update(min_size=1, desired_size=1, max_size=max_size)
    if draw(st.booleans()):
        trn2.update(
            capacity_type="CAPACITY_BLOCK",
            capacity_reservation_id="cr-" + draw(st.text("0123456789abcdef", min_size=17, max_size=17)),
            availability_zone=draw(st.sampled_from(data["network"]["availability_zones"])),
            capacity_block_instances=max_size + draw(st.integers(min_value=0, max_value=1)),
        )
    return data


def check_synthesized(s: Synth) -> None:
    """What every synthesized config must hold beyond "synth did not raise"."""
    config = s.config
    (nag,) = [p for p in s.validation_report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    assert nag["conclusion"] == "success" and nag["violations"] == []
    dashboards = s.resources("Observability", "AWS::CloudWatch::Dashboard")
    body = str(next(iter(dashboards.values()))["Properties"]["DashboardBody"])
    speculative = [p for p in config.profiles if p.name != config.baseline_profile.name]
    assert body.count("base / spec") == len(DEFAULT_SUITE) * len(speculative)
    lt = s.trn2_launch_template()
    on_demand_efa = config.efa_required and config.trn2_nodes.capacity_type == "ON_DEMAND"
    assert ("Placement" in lt) == on_demand_efa
    assert bool(s.resources("Cluster", "AWS::EC2::PlacementGroup")) == on_demand_efa
    assert ("NetworkInterfaces" in lt) == config.efa_required
    assert len(s.resources("Observability", "AWS::CloudWatch::Alarm")) == 1 + len(config.profiles)


@settings(
    max_examples=1,  # one example of two configs: two full synths and one cfn-lint run (5 s CPU in the suite)
    deadline=None,
    derandomize=False,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: each step would be another full synth
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(drawn=st.lists(valid_configs(), min_size=2, max_size=2))
def test_any_valid_config_synthesizes_with_no_nag_findings_and_no_cfn_lint_errors(drawn):
    configs = [parse_config(d) for d in drawn]  # the strategy draws only valid configs: an error is its bug
    with tempfile.TemporaryDirectory(prefix="cdk.out.") as tmp:
        outdirs = [Path(tmp, str(i)) for i in range(len(configs))]
        for config, outdir in zip(configs, outdirs, strict=True):
            check_synthesized(synthesize(config, outdir, reuse=False))  # drawn afresh: never seen again
        errors = cfn_lint_errors(*outdirs, reuse=False)
        assert not errors, json.dumps(errors, indent=1)[:4000]


@pytest.mark.parametrize("name", THREE_PROFILE_CONFIGS)
def test_three_profile_configs_synthesize_with_no_nag_findings(name, three_profile_synths):
    """Fixed cases: the README's spec-k5 example and two baselines + one speculative (cfn-lint runs on them
    in test_validators, in the same cfn-lint run as the other fixed configs)."""
    s = three_profile_synths[name]
    assert len(s.config.profiles) == 3
    check_synthesized(s)
