"""The NetworkPolicy evaluator's own semantics, case by case, each where one rule of the Kubernetes docs decides the
verdict (tests/charts/network_policy.py cites them): peers and ports, the node's and the pod's own traffic, and the
source's egress beside the destination's ingress."""

from __future__ import annotations

from typing import Any

import pytest

from tests.charts.network_policy import Pod, Source, admitted

DST = Pod("a", {"app": "vllm"}, {"http": 8000}, ip="10.0.5.5")
NODE_IP = "10.0.5.1"  # the address of the node DST runs on


def policy(namespace: str, selector: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace}, "spec": {"podSelector": selector, **spec}}


DENY_INGRESS = policy("a", {}, policyTypes=["Ingress"])
DENY_ALL = policy("a", {}, policyTypes=["Ingress", "Egress"])
OPEN_INGRESS = policy("a", {}, ingress=[{}])


def test_the_evaluator_admits_by_ip_block_namespace_selector_and_named_port():
    ns_policy = policy(
        "a",
        {"matchLabels": {"x": "1"}},
        ingress=[
            {"from": [{"namespaceSelector": {"matchLabels": {"team": "t"}}}], "ports": [{"port": "http"}]},
            {"from": [{"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.9.0/24"]}}], "ports": [{"port": 9000}]},
        ],
    )
    dst = Pod("a", {"x": "1"}, {"http": 8000})
    assert admitted([ns_policy], Source("10.1.0.1", "b", {}, {"team": "t"}), dst, 8000)
    assert not admitted([ns_policy], Source("10.1.0.1", "b", {}, {"team": "u"}), dst, 8000)
    assert admitted([ns_policy], Source("10.0.1.1"), dst, 9000)
    assert not admitted([ns_policy], Source("10.0.9.1"), dst, 9000)
    assert not admitted([ns_policy], Source("10.0.1.1"), dst, 8000)
    assert admitted([ns_policy], Source("10.0.1.1"), Pod("a", {"x": "2"}, {}), 1)  # selected by no policy
    assert admitted([ns_policy], Source("10.0.1.1"), Pod("b", {"x": "1"}, {}), 1)  # another namespace's pod


def test_the_pods_own_node_is_admitted_where_its_address_is_refused():
    """ "the only allowed connections into the pod are those from the pod's node and those allowed by the ingress
    list": the node's address from anywhere else is refused, from the node (kubelet, hostNetwork pods) admitted."""
    for policies in ([DENY_INGRESS], [DENY_ALL], [policy("a", {}, ingress=[{"from": [{"podSelector": {}}]}])]):
        assert not admitted(policies, Source(NODE_IP), DST, 8000)
        assert admitted(policies, Source(NODE_IP, own_node=True), DST, 8000)
        # a hostNetwork pod on that node: the node's address, whatever labels the pod wears
        assert admitted(policies, Source(NODE_IP, "kube-system", {"k8s-app": "aws-node"}, own_node=True), DST, 8000)


def test_a_pod_reaches_itself_where_its_twin_is_refused():
    """ "a pod cannot block access to itself": under deny-all in both directions the pod reaches its own address; a
    pod with the same labels and namespace does not."""
    assert admitted([DENY_ALL], Source(DST.ip, DST.namespace, DST.labels, own_pod=True), DST, 8000)
    assert not admitted([DENY_ALL], Source("10.0.5.6", DST.namespace, DST.labels), DST, 8000)


def test_the_sources_egress_must_allow_the_connection_too():
    """Ingress open (no policy, or one allowing everything); the source pod's own namespace isolates it for egress."""
    src = Source("10.0.7.7", "b", {"app": "bench"})
    other = Source("10.0.7.8", "b", {"app": "other"})  # in the namespace, not selected by the egress policy
    only_443 = policy(
        "b", {"matchLabels": {"app": "bench"}}, policyTypes=["Egress"], egress=[{"ports": [{"port": 443}]}]
    )
    for ingress in ([], [OPEN_INGRESS]):
        assert admitted(ingress, src, DST, 8000)
        assert not admitted([*ingress, only_443], src, DST, 8000)
        assert admitted([*ingress, only_443], src, DST, 443)
        assert admitted([*ingress, only_443], other, DST, 8000)
        assert not admitted([*ingress, policy("b", {}, policyTypes=["Egress"])], src, DST, 8000)


def test_an_egress_rule_names_the_destination_by_its_namespace_labels_address_and_named_port():
    src = Source("10.0.7.7", "b", {"app": "bench"})
    vllm = {"matchLabels": DST.labels}
    to_vllm = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "a"}}, "podSelector": vllm}
    cases = {
        "namespace and pod": ([{"to": [to_vllm], "ports": [{"port": "http"}]}], True),
        "wrong pod": ([{"to": [{**to_vllm, "podSelector": {"matchLabels": {"app": "x"}}}]}], False),
        "pod selector alone: the policy's own namespace": ([{"to": [{"podSelector": vllm}]}], False),
        "address": ([{"to": [{"ipBlock": {"cidr": "10.0.5.0/24"}}]}], True),
        "address excepted": ([{"to": [{"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.5.0/24"]}}]}], False),
        "a named port the destination lacks": ([{"to": [to_vllm], "ports": [{"port": "metrics"}]}], False),
    }
    for name, (egress, expected) in cases.items():
        # policyTypes left out: Egress is implied by the egress rules, Ingress always (nothing sends to the bench)
        assert admitted([policy("b", {"matchLabels": {"app": "bench"}}, egress=egress)], src, DST, 8000) is expected, (
            name
        )
    # An egress policy in the destination's namespace does not apply to the source; one saying only Ingress neither.
    elsewhere = policy("a", {"matchLabels": {"app": "bench"}}, policyTypes=["Egress"])
    ingress_only = policy(
        "b", {"matchLabels": {"app": "bench"}}, policyTypes=["Ingress"], egress=[{"ports": [{"port": 1}]}]
    )
    assert admitted([elsewhere, ingress_only], src, DST, 8000)
    with pytest.raises(AssertionError, match="address"):
        admitted([policy("b", {}, egress=[{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}])], src, Pod("a", {}, {}), 80)


def test_both_ends_must_allow_it_egress_alone_does_not():
    src = Source("10.0.7.7", "a", {"app": "bench"})
    open_egress = policy("a", {"matchLabels": {"app": "bench"}}, policyTypes=["Egress"], egress=[{}])
    assert not admitted([open_egress, DENY_INGRESS], src, DST, 8000)
    assert admitted([open_egress, OPEN_INGRESS], src, DST, 8000)
    # Addresses that are no pods have no egress policy: ingress alone decides.
    assert admitted([OPEN_INGRESS, policy("a", {}, policyTypes=["Egress"])], Source("10.0.9.9"), DST, 8000)
