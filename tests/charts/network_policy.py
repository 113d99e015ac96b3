"""A small evaluator of Kubernetes NetworkPolicy ingress semantics, for every policy we render.

Followed: Kubernetes docs "Network Policies" and the networking.k8s.io/v1 API reference: a pod that no policy with
"Ingress" in its policyTypes selects accepts every connection; otherwise a connection needs one ingress rule of one
selecting policy whose `from` admits the source (absent or empty: every source; peers are OR-ed; a podSelector alone
means pods of the policy's namespace; a namespaceSelector alone, every pod of the matching namespaces; both, the
matching pods of those namespaces; an ipBlock, the source address within `cidr` and outside `except`) and whose
`ports` admit the destination port (absent or empty: every port; a named port resolves against the destination
pod's container ports; `endPort` makes a range; protocol TCP unless said). policyTypes defaults to ["Ingress"] (plus
"Egress" when egress rules are given). An ipBlock is evaluated against pod sources too: EKS pods take VPC addresses
(VPC CNI), and the docs leave open whether pod traffic matches ipBlocks, so the evaluator takes the open side.
Loopback traffic inside a pod is not subject to policies, and traffic from the node where the destination pod runs is
always allowed, whatever its address (the same docs, on ipBlocks): a Source with `own_node` is that node (its own
processes, the kubelet's probes, host-network pods on it).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Source:
    """Who connects: a pod (namespace and labels), any other address in the VPC (namespace None), or the node the
    destination pod runs on (own_node)."""

    ip: str
    namespace: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    namespace_labels: dict[str, str] = field(default_factory=dict)
    own_node: bool = False


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: dict[str, str]
    ports: dict[str, int]  # container port name -> number


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector: matchLabels AND matchExpressions (In, NotIn, Exists, DoesNotExist); {} selects all."""
    assert set(selector) <= {"matchLabels", "matchExpressions"}, selector
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def _in_block(ip: str, block: dict[str, Any]) -> bool:
    address = ipaddress.ip_address(ip)
    if address not in ipaddress.ip_network(block["cidr"]):
        return False
    return not any(address in ipaddress.ip_network(e) for e in block.get("except", []))


def _peer_admits(peer: dict[str, Any], policy_ns: str, src: Source) -> bool:
    assert set(peer) <= {"podSelector", "namespaceSelector", "ipBlock"}, peer
    if "ipBlock" in peer:
        assert set(peer) == {"ipBlock"}, "an ipBlock peer stands alone"
        return _in_block(src.ip, peer["ipBlock"])
    if src.namespace is None:  # not a pod: only ipBlocks can admit it
        return False
    if "namespaceSelector" in peer:
        ns_labels = {"kubernetes.io/metadata.name": src.namespace, **src.namespace_labels}
        if not selects(peer["namespaceSelector"], ns_labels):
            return False
    elif src.namespace != policy_ns:
        return False
    return "podSelector" not in peer or selects(peer["podSelector"], src.labels)


def _port_admits(rule_port: dict[str, Any], dst: Pod, port: int) -> bool:
    if rule_port.get("protocol", "TCP") != "TCP":
        return False
    if "port" not in rule_port:
        return True
    wanted = rule_port["port"]
    number = dst.ports.get(wanted) if isinstance(wanted, str) else wanted
    if number is None:
        return False
    return number <= port <= rule_port.get("endPort", number)


def policy_types(policy: dict[str, Any]) -> list[str]:
    spec = policy["spec"]
    return spec.get("policyTypes") or (["Ingress", "Egress"] if "egress" in spec else ["Ingress"])


def admitted(policies: list[dict[str, Any]], src: Source, dst: Pod, port: int) -> bool:
    """Whether `src` may open a TCP connection to `dst` on `port` under these policies (every namespace's)."""
    if src.own_node:
        return True
    selecting = [
        p
        for p in policies
        if p["metadata"]["namespace"] == dst.namespace
        and "Ingress" in policy_types(p)
        and selects(p["spec"]["podSelector"], dst.labels)
    ]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress") or []:
            peers = rule.get("from") or []
            ports = rule.get("ports") or []
            peer_ok = not peers or any(_peer_admits(p, policy["metadata"]["namespace"], src) for p in peers)
            port_ok = not ports or any(_port_admits(p, dst, port) for p in ports)
            if peer_ok and port_ok:
                return True
    return False
