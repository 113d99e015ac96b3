"""Parts leave their ids out of their resources' logical ids, and the ids are CDK's own otherwise: the same resources
at a stack's top level and inside nested parts synthesize the same template."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.constructs.part import Part

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

    def __init__(self, scope: Construct) -> None:
        super().__init__(scope, "Plain")
        _resources(self)


class PartedStack(Stack):
    """The same resources inside two nested parts."""

    def __init__(self, scope: Construct) -> None:
        super().__init__(scope, "Parted")
        _resources(Part(Part(self, "Outer"), "Inner"))


class GroupedStack(Stack):
    """The same resources inside a plain construct."""

    def __init__(self, scope: Construct) -> None:
        super().__init__(scope, "Grouped")
        _resources(Construct(self, "Outer"))


@pytest.fixture(scope="module")
def templates() -> dict[str, dict[str, Any]]:
    app = App()
    stacks = [stack(app) for stack in (PlainStack, PartedStack, GroupedStack)]
    assembly = app.synth()
    return {s.stack_name: assembly.get_stack_by_name(s.stack_name).template for s in stacks}


def test_a_part_keeps_the_logical_ids_cdk_gives_its_resources_without_it(templates):
    assert len(templates["Plain"]["Resources"]) == 5
    assert templates["Parted"] == templates["Plain"]


def test_a_plain_construct_renames_its_resources(templates):
    """The check itself: grouped by a construct that is not a Part, no resource keeps its logical id."""
    assert not set(templates["Plain"]["Resources"]) & set(templates["Grouped"]["Resources"])
