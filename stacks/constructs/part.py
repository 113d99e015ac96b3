"""A part of a stack: a construct that groups resources without renaming them.

CloudFormation knows a resource by its logical id, which CDK derives from the construct path below the stack, and it
replaces a resource whose logical id changed. The Cluster stack's network, EKS cluster, system node group and managed
add-ons were created at the stack's top level before they became parts; a Part gives each resource below it the
logical id CDK would give it with the parts' ids left out of its path, so a deployed stack keeps every resource. The
snapshot tests (tests/stacks/test_snapshots.py) hold every logical id.
"""

from __future__ import annotations

import hashlib
import re

import jsii
from aws_cdk import Aspects, CfnElement, IAspect, Stack
from constructs import Construct, IConstruct

# aws-cdk-lib 2.275.0 core/lib/private/uniqueid.js (makeUniqueId), which Stack.allocateLogicalId applies to the ids of
# the path below the stack: "Default" is left out altogether, "Resource" from the readable part only, and a readable
# part of at most 240 characters takes the first 8 hex digits of the path's MD5 as a suffix.
HIDDEN_ID = "Default"
HIDDEN_FROM_HUMAN_ID = "Resource"
MAX_HUMAN_LEN = 240
MAX_ID_LEN = 255
HASH_LEN = 8


def _alphanumeric(component: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "", component)


def unique_id(components: list[str]) -> str:
    """makeUniqueId: the logical id of a resource whose path below its stack is `components`."""
    components = [c for c in components if c != HIDDEN_ID]
    if len(components) == 1 and len(_alphanumeric(components[0])) <= MAX_ID_LEN:
        return _alphanumeric(components[0])
    digest = hashlib.md5("/".join(components).encode()).hexdigest()[:HASH_LEN].upper()
    readable: list[str] = []
    for component in components:  # a component the previous one ends with is read once
        if not readable or not readable[-1].endswith(component):
            readable.append(component)
    return "".join(_alphanumeric(c) for c in readable if c != HIDDEN_FROM_HUMAN_ID)[:MAX_HUMAN_LEN] + digest


def logical_id(element: CfnElement) -> str:
    """The logical id CDK gives `element`, as if no Part stood in its path."""
    below = element.node.scopes[len(Stack.of(element).node.scopes) :]
    return unique_id([scope.node.id for scope in below if not isinstance(scope, Part)])


@jsii.implements(IAspect)
class _LogicalIdsWithoutParts:
    """Run at synthesis, so it also reaches resources added below the part after it was built."""

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, CfnElement):
            node.override_logical_id(logical_id(node))


class Part(Construct):
    """A construct whose own id is not part of its resources' logical ids (see the module's docstring)."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        Aspects.of(self).add(_LogicalIdsWithoutParts())
