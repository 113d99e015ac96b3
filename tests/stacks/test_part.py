"""Parts leave their ids out of their resources' logical ids, and the ids are CDK's own otherwise: a small app whose
resources stand once at a stack's top level and once inside parts synthesizes the same templates."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, CfnElement, Stack
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.constructs.part import Part, logical_id

# Ids that exercise every rule of CDK's makeUniqueId: a one-component path, "Default" (dropped), "Resource" (dropped
# from the readable part only), a component the previous one ends with (read once) and one over 255 characters.
LONG = "Q" * 300


def _resources(scope: Construct) -> None:
    s3.Bucket(scope, "Bucket")
    sqs.CfnQueue(scope, "Queue")
    sqs.Queue(scope, "Default")
    sqs.CfnQueue(Construct(scope, "Jobs"), "Jobs")
    sqs.CfnQueue(scope, LONG)


class PlainStack(Stack):
    """CDK's own logical ids."""

    def __init__(self, scope: Construct, construct_id: str = "Plain") -> None:
        super().__init__(scope, construct_id)
        _resources(self)


class PartedStack(Stack):
    """The same resources inside two nested parts, with the parts' ids left out."""

    def __init__(self, scope: Construct) -> None:
        super().__init__(scope, "Parted")
        _resources(Part(Part(self, "Outer"), "Inner"))

    def _allocate_logical_id(self, cfn_element: CfnElement) -> str:
        return logical_id(self, cfn_element)


class OwnIdsStack(PlainStack):
    """CDK's rule applied by logical_id to a stack without parts."""

    def __init__(self, scope: Construct) -> None:
        super().__init__(scope, "OwnIds")

    def _allocate_logical_id(self, cfn_element: CfnElement) -> str:
        return logical_id(self, cfn_element)


class UnruledStack(Stack):
    """The parts without the stack's rule."""

    def __init__(self, scope: Construct) -> None:
        super().__init__(scope, "Unruled")
        _resources(Part(self, "Outer"))


@pytest.fixture(scope="module")
def templates() -> dict[str, dict[str, Any]]:
    app = App()
    stacks = [stack(app) for stack in (PlainStack, OwnIdsStack, PartedStack, UnruledStack)]
    assembly = app.synth()
    return {s.stack_name: assembly.get_stack_by_name(s.stack_name).template for s in stacks}


def test_logical_id_is_cdks_own_and_leaves_the_parts_out(templates):
    plain = templates["Plain"]
    assert len(plain["Resources"]) == 5
    assert templates["OwnIds"] == plain
    assert templates["Parted"] == plain


def test_without_the_stacks_rule_a_part_renames_its_resources(templates):
    """The check itself: a stack that does not apply logical_id gives the parts' resources other logical ids."""
    assert not set(templates["Plain"]["Resources"]) & set(templates["Unruled"]["Resources"])
