"""Cluster Autoscaler: pinned per Kubernetes minor, flags the pinned release accepts, scale-down waits derived from the
config, and a role that can change only this cluster's node groups."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from config import DeploymentConfig, node_scaling, parse_config
from config.kubernetes import SUPPORTED_KUBERNETES_VERSIONS
from config.versions import CLUSTER_AUTOSCALER_IMAGES
from stacks.constructs.cluster_autoscaler import DRA_FLAG_NEEDED, extra_args
from tests.conftest import default_config_dict
from tests.iam_check import allowed_on_tagged_resource

FLAGS = json.loads((Path(__file__).parent / "fixtures" / "cluster_autoscaler_flags.json").read_text())
# What chart 9.59.0's templates/deployment.yaml renders on its own for cloudProvider aws with autoDiscovery.clusterName
# set, and its values.yaml's default extraArgs (merged with ours by Helm): read at kubernetes/autoscaler@5a0b98e4.
CHART_OWN_FLAGS = ("cloud-provider", "namespace", "node-group-auto-discovery")
CHART_DEFAULT_EXTRA_ARGS = {"logtostderr": "true", "stderrthreshold": "info", "v": "4"}


def _values(synth) -> dict[str, Any]:
    return json.loads(synth.helm_chart("cluster-autoscaler")["Values"])


def _args(synth) -> dict[str, str]:
    """The flags the chart renders from our values: its own aws flags, then every extraArgs entry as --key=value."""
    values = _values(synth)
    tags = ",".join(values["autoDiscovery"]["tags"])
    own = {
        "cloud-provider": values["cloudProvider"],
        "namespace": "kube-system",
        "node-group-auto-discovery": f"asg:tag={tags}",
    }
    return {**own, **CHART_DEFAULT_EXTRA_ARGS, **values["extraArgs"]}


def _seconds(duration: str) -> int:
    match = re.fullmatch(r"(\d+)s", duration)
    assert match, f"{duration!r} is not a whole-seconds Go duration"
    return int(match[1])


def test_every_supported_minor_has_a_flag_table_and_a_dra_decision():
    assert set(DRA_FLAG_NEEDED) == set(SUPPORTED_KUBERNETES_VERSIONS)
    for version in SUPPORTED_KUBERNETES_VERSIONS:
        assert CLUSTER_AUTOSCALER_IMAGES[version].version.removeprefix("v") in FLAGS, version


def _release(synth) -> dict[str, Any]:
    tag = _values(synth)["image"]["tag"]
    return FLAGS[tag.removeprefix("v")]


def test_chart_is_pinned_and_its_image_is_the_ca_release_of_the_clusters_minor(
    synth, variant_synth, newest_kubernetes_synth
):
    for s in (synth, variant_synth, newest_kubernetes_synth):
        chart = s.helm_chart("cluster-autoscaler")
        assert (chart["Repository"], chart["Version"]) == ("https://kubernetes.github.io/autoscaler", "9.59.0")
        image = _values(s)["image"]
        assert image["repository"] == "registry.k8s.io/autoscaling/cluster-autoscaler"
        assert image["tag"].startswith(f"v{s.config.kubernetes_version}."), (image, s.config.kubernetes_version)


def test_every_rendered_flag_is_one_the_pinned_release_accepts(synth, variant_synth, newest_kubernetes_synth):
    for s in (synth, variant_synth, newest_kubernetes_synth):
        known = set(_release(s)["flags"])
        unknown = sorted(set(_args(s)) - known)
        assert not unknown, f"CA {_values(s)['image']['tag']} has no flag(s) {unknown}"


def test_dra_flag_is_passed_where_the_release_defaults_it_off_and_never_false(
    synth, variant_synth, newest_kubernetes_synth
):
    synths = (synth, variant_synth, newest_kubernetes_synth)
    assert {s.config.kubernetes_version for s in synths} == set(DRA_FLAG_NEEDED)  # every supported minor decided
    for s in synths:
        flag = _args(s).get("enable-dynamic-resource-allocation")
        if _release(s)["enable_dynamic_resource_allocation"] == "default false":
            assert flag == "true", s.config.kubernetes_version
        else:  # locked true: a false value is fatal (1.35.2 and 1.36.1 flags.go)
            assert _release(s)["enable_dynamic_resource_allocation"] == "locked true"
            assert flag in (None, "true"), s.config.kubernetes_version
    assert _args(variant_synth)["enable-dynamic-resource-allocation"] == "true"  # 1.34


def test_auto_discovery_finds_the_groups_eks_tags_for_this_cluster(synth, variant_synth):
    for s in (synth, variant_synth):
        assert _args(s)["node-group-auto-discovery"] == (
            f"asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/{s.config.cluster_name}"
        )


def test_expander_does_not_balance_groups_that_may_differ_in_ami(synth):
    args = _args(synth)
    assert args["expander"] == "least-waste"
    assert args["balance-similar-node-groups"] == "false"


def test_a_node_is_removed_only_after_it_was_unneeded_longer_than_its_capacity_takes_to_come_back(synth, variant_synth):
    for s in (synth, variant_synth):
        args, c = _args(s), s.config
        back = c.trn2_nodes.node_ready_seconds + c.scaling.time_to_ready_seconds
        assert _seconds(args["scale-down-unneeded-time"]) > back
        assert _seconds(args["scale-down-delay-after-add"]) >= c.scaling.time_to_ready_seconds
        assert _seconds(args["max-node-provision-time"]) >= 2 * c.trn2_nodes.node_ready_seconds


def _with_waits(node_ready: int, time_to_ready: int) -> DeploymentConfig:
    data = default_config_dict()
    data["trn2_nodes"]["node_ready_seconds"] = node_ready
    data.setdefault("scaling", {}).update(time_to_ready_seconds=time_to_ready, scale_up_period_seconds=time_to_ready)
    return parse_config(data)


@pytest.mark.parametrize(("node_ready", "time_to_ready"), [(120, 300), (900, 1800)], ids=["quick", "slow"])
def test_the_unneeded_time_follows_the_nodes_and_the_replicas_time_to_ready(node_ready, time_to_ready):
    """Not a fixed wait: node Ready + replica time-to-Ready, plus one scan (CA decides at its scans), for a config
    whose capacity comes back in 7 minutes and one in 45."""
    unneeded = _seconds(extra_args(_with_waits(node_ready, time_to_ready))["scale-down-unneeded-time"])
    assert unneeded == node_ready + time_to_ready + node_scaling.SCAN_INTERVAL_SECONDS


def test_the_chart_renders_the_unneeded_time_of_its_config(synth):
    assert _args(synth)["scale-down-unneeded-time"] == extra_args(synth.config)["scale-down-unneeded-time"]


def test_the_trn2_group_has_the_configured_floor_and_ceiling(synth, variant_synth):
    for s in (synth, variant_synth):
        groups = s.resources("Cluster", "AWS::EKS::Nodegroup").values()
        (ng,) = [g["Properties"] for g in groups if g["Properties"].get("AmiType") == "AL2023_x86_64_NEURON"]
        t = s.config.trn2_nodes
        assert ng["ScalingConfig"]["MinSize"] == t.min_size >= 1
        assert ng["ScalingConfig"]["MaxSize"] == t.max_size


def _autoscaler_statements(synth) -> list[dict[str, Any]]:
    template = synth.template("Cluster")["Resources"]
    (assoc,) = [
        r["Properties"]
        for r in template.values()
        if r["Type"] == "AWS::EKS::PodIdentityAssociation" and r["Properties"]["ServiceAccount"] == "cluster-autoscaler"
    ]
    assert assoc["Namespace"] == "kube-system"
    assert _values(synth)["rbac"]["serviceAccount"]["name"] == assoc["ServiceAccount"]
    return synth.role_statements(assoc["RoleArn"]["Fn::GetAtt"][0])


@pytest.mark.parametrize(
    ("group", "tags", "may_scale"),
    [
        # The tags EKS puts on a managed node group's Auto Scaling group of this cluster.
        ("ours", {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/{cluster}": "owned"}, True),
        ("untagged", {}, False),
        (
            "another cluster's",
            {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/other": "owned"},
            False,
        ),
        ("ours but opted out", {"k8s.io/cluster-autoscaler/{cluster}": "owned"}, False),
        ("enabled only", {"k8s.io/cluster-autoscaler/enabled": "true"}, False),
    ],
)
def test_the_role_changes_only_groups_tagged_for_this_cluster(synth, group, tags, may_scale):
    statements = _autoscaler_statements(synth)
    tags = {k.format(cluster=synth.config.cluster_name): v for k, v in tags.items()}
    here = {"aws:RequestedRegion": synth.config.region}
    for action in ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"):
        assert allowed_on_tagged_resource(statements, action, tags, here) is may_scale, (group, action)
    # Read-only calls on any group; nothing else that changes a group, on ours either.
    assert allowed_on_tagged_resource(statements, "autoscaling:DescribeAutoScalingGroups", tags, here)
    for action in (
        "autoscaling:UpdateAutoScalingGroup",
        "autoscaling:DeleteAutoScalingGroup",
        "ec2:TerminateInstances",
    ):
        assert not allowed_on_tagged_resource(statements, action, tags, here), action


@pytest.mark.parametrize("region", ["us-west-2", "eu-west-1", None])
def test_the_role_changes_no_group_of_a_same_named_deployment_in_another_region(synth, variant_synth, region):
    """The same config name in another region puts the same discovery tags on its groups: only the region tells
    them apart (a request without aws:RequestedRegion, which AWS always sets, is refused as well)."""
    for s in (synth, variant_synth):
        assert region != s.config.region
        statements = _autoscaler_statements(s)
        tags = {
            "k8s.io/cluster-autoscaler/enabled": "true",
            f"k8s.io/cluster-autoscaler/{s.config.cluster_name}": "owned",
        }
        elsewhere = {"aws:RequestedRegion": region} if region else {}
        for action in ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"):
            assert not allowed_on_tagged_resource(statements, action, tags, elsewhere), (region, action)
            assert allowed_on_tagged_resource(statements, action, tags, {"aws:RequestedRegion": s.config.region})


def test_the_autoscaler_runs_on_the_system_nodes(synth):
    assert _values(synth)["nodeSelector"] == {"trn-specdec/node-role": "system"}
