"""A notice when the Trainium2 node group's Capacity Block is about to end, from EC2's own EventBridge event.

EC2 sends "Capacity Block Expiration Warning" 40 minutes before a block ends; 10 minutes later it begins
terminating the block's instances (Amazon EC2 user guide, "Monitor Capacity Blocks using EventBridge"). The
rule forwards that one event, for this deployment's reservation only, to the alarm topic: no function, no daemon.
The EC2 user guide's examples spell the detail type two ways ("Capacity Block Expiration Warning" and
"Capacity Block Reservation Expiration Warning"); the rule matches both.
"""

from __future__ import annotations

from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_sns as sns
from constructs import Construct

from config.schema import DeploymentConfig

DETAIL_TYPES = ("Capacity Block Expiration Warning", "Capacity Block Reservation Expiration Warning")


class CapacityBlockNotice(Construct):
    @classmethod
    def if_configured(
        cls, scope: Construct, construct_id: str, *, config: DeploymentConfig
    ) -> CapacityBlockNotice | None:
        """The notice for the Trainium2 group's Capacity Block, when the config names a block and an alarm topic."""
        block, topic = config.trn2_nodes.capacity_reservation_id, config.observability.alarm_topic_arn
        if config.trn2_nodes.capacity_type == "CAPACITY_BLOCK" and block and topic:
            return cls(scope, construct_id, reservation_id=block, topic_arn=topic)
        return None

    def __init__(self, scope: Construct, construct_id: str, *, reservation_id: str, topic_arn: str) -> None:
        super().__init__(scope, construct_id)
        message = events.RuleTargetInput.from_text(
            f"Capacity Block {events.EventField.from_path('$.detail.capacity-reservation-id')} ends at "
            f"{events.EventField.from_path('$.detail.end-date')}: EC2 begins terminating its trn2 instances in 10 "
            "minutes and serving on them stops. To move to a new block, set trn2_nodes.capacity_reservation_id and "
            "capacity_block_end in the config and run make deploy (docs/coldstart.md, Capacity Block end)."
        )
        self.rule = events.Rule(
            self,
            "ExpirationWarning",
            description=f"EC2's warning 40 minutes before Capacity Block {reservation_id} ends",
            event_pattern=events.EventPattern(
                source=["aws.ec2"],
                detail_type=list(DETAIL_TYPES),
                detail={"capacity-reservation-id": [reservation_id]},
            ),
            targets=[targets.SnsTopic(sns.Topic.from_topic_arn(self, "Topic", topic_arn), message=message)],
        )
