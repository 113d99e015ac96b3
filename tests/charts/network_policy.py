"""A small evaluator of Kubernetes NetworkPolicy semantics (ingress and egress), for every policy we render.

Followed: Kubernetes docs "Network Policies" (https://kubernetes.io/docs/concepts/services-networking/network-policies/)
and the networking.k8s.io/v1 API reference. A connection from a source to a destination pod is allowed when both
ends allow it ("The two sorts of pod isolation": "both the egress policy on the source pod and the ingress policy on
the destination pod need to allow the connection"):
- ingress: a pod that no policy with "Ingress" in its policyTypes selects accepts every connection; otherwise it
  accepts "those from the pod's node and those allowed by the ingress list of some NetworkPolicy that applies to the
  pod for ingress";
- egress: a source pod that no policy of its namespace with "Egress" in its policyTypes selects may open every
  connection; otherwise only those the `egress` list of such a policy allows. An address that is not a pod has no
  egress policy.
A rule admits a connection when its peers admit the other end and its `ports` the destination port ("Behavior of
`to` and `from` selectors": absent or empty peers, every one; peers are OR-ed; a podSelector alone means pods of the
policy's namespace; a namespaceSelector alone, every pod of the matching namespaces; both, the matching pods of those
namespaces; an ipBlock, the address within `cidr` and outside `except`. Ports: absent or empty, every port; a named
port resolves against the destination pod's container ports; `endPort` makes a range; protocol TCP unless said).
policyTypes defaults to ["Ingress"] (plus "Egress" when egress rules are given). An ipBlock is evaluated against
pods too: EKS pods take VPC addresses (VPC CNI), and the docs leave open whether pod traffic matches ipBlocks
(ipBlock: "These should be cluster-external IPs"), so the evaluator takes the open side.

Always allowed, whatever the policies say (the page's introduction: "a pod cannot block access to itself" and
"traffic to and from the node where a Pod is running is always allowed, regardless of the IP address of the Pod or
the node"; "What you can't do with network policies": "Pods cannot currently block localhost access, nor do they have
the ability to block access from their resident node"):
- a Source with `own_node` is the node the destination pod runs on: its kubelet (probes), its processes, and its
  hostNetwork pods ("NetworkPolicy and hostNetwork pods": behaviour undefined, most commonly "treated the same as all
  other traffic to/from the node IP"; a hostNetwork pod on another node is that node's address, a Source with no
  namespace, or under the other implementation a pod);
- a Source with `own_pod` is the destination pod itself, over its pod address; loopback inside the pod is not
  network traffic at all (what `kubectl port-forward` uses).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Source:
    """Who connects, seen from the destination pod: a pod (namespace and labels), any other address in the VPC
    (namespace None), the node the destination pod runs on (own_node) or the destination pod itself (own_pod)."""

    ip: str
    namespace: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    namespace_labels: dict[str, str] = field(default_factory=dict)
    own_node: bool = False
    own_pod: bool = False


@dataclass(frozen=True)
class Pod:
    """The destination; its address is needed only when a source's egress rule has an ipBlock."""

    namespace: str
    labels: dict[str, str]
    ports: dict[str, int]  # container port name -> number
    ip: str | None = None
    namespace_labels: dict[str, str] = field(default_factory=dict)


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


def _peer_admits(peer: dict[str, Any], policy_ns: str, end: Source | Pod) -> bool:
    """Whether one `from`/`to` peer of a policy in `policy_ns` names `end`, the other end of the connection."""
    assert set(peer) <= {"podSelector", "namespaceSelector", "ipBlock"}, peer
    if "ipBlock" in peer:
        assert set(peer) == {"ipBlock"}, "an ipBlock peer stands alone"
        assert end.ip is not None, f"{peer} needs the destination pod's address: give the Pod an ip"
        return _in_block(end.ip, peer["ipBlock"])
    if end.namespace is None:  # not a pod: only ipBlocks can name it
        return False
    if "namespaceSelector" in peer:
        ns_labels = {"kubernetes.io/metadata.name": end.namespace, **end.namespace_labels}
        if not selects(peer["namespaceSelector"], ns_labels):
            return False
    elif end.namespace != policy_ns:
        return False
    return "podSelector" not in peer or selects(peer["podSelector"], end.labels)


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


def _applying(policies: list[dict[str, Any]], direction: str, namespace: str, labels: dict[str, str]) -> list[dict]:
    """The policies that apply to a pod for `direction` ("Ingress" or "Egress"): of its namespace, that direction in
    their policyTypes, their podSelector selecting it."""
    return [
        p
        for p in policies
        if p["metadata"]["namespace"] == namespace
        and direction in policy_types(p)
        and selects(p["spec"]["podSelector"], labels)
    ]


def _rules_allow(
    applying: list[dict[str, Any]], rules: str, peers: str, other: Source | Pod, dst: Pod, port: int
) -> bool:
    """Not isolated (nothing applies), or one rule of one applying policy admits `other` and the destination port."""
    if not applying:
        return True
    for policy in applying:
        for rule in policy["spec"].get(rules) or []:
            named = rule.get(peers) or []
            ports = rule.get("ports") or []
            peer_ok = not named or any(_peer_admits(p, policy["metadata"]["namespace"], other) for p in named)
            port_ok = not ports or any(_port_admits(p, dst, port) for p in ports)
            if peer_ok and port_ok:
                return True
    return False


def admitted(policies: list[dict[str, Any]], src: Source, dst: Pod, port: int) -> bool:
    """Whether `src` may open a TCP connection to `dst` on `port` under these policies (every namespace's): the
    destination's ingress and, for a pod source, its own egress must both allow it."""
    if src.own_node or src.own_pod:
        return True
    ingress = _applying(policies, "Ingress", dst.namespace, dst.labels)
    if not _rules_allow(ingress, "ingress", "from", src, dst, port):
        return False
    if src.namespace is None:  # an address that is no pod: no policy governs its egress
        return True
    egress = _applying(policies, "Egress", src.namespace, src.labels)
    return _rules_allow(egress, "egress", "to", dst, dst, port)
