"""What a Capacity Block's end means for work started on it.

EC2 sends "Capacity Block Expiration Warning" 40 minutes before the end and begins terminating the block's
instances 10 minutes later, 30 minutes before the end (Amazon EC2 user guide, "Monitor Capacity Blocks using
EventBridge"); the node is drained before that. Work that needs the node for more than a few minutes must
therefore not start in the last LAST_MINUTES: its results would be cut off mid-run.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from config import DeploymentConfig

LAST_MINUTES = 45


def too_late(config: DeploymentConfig, now: datetime, what: str) -> str | None:
    """A sentence refusing `what` when the node group's Capacity Block ends within LAST_MINUTES, else None."""
    end = config.trn2_nodes.capacity_block_end
    if end is None:
        return None
    left = end - now
    if left > timedelta(minutes=LAST_MINUTES):
        return None
    block = config.trn2_nodes.capacity_reservation_id
    when = "ended" if left <= timedelta(0) else f"ends in {int(left.total_seconds() // 60)} minutes"
    return (
        f"{what} does not start: Capacity Block {block} {when} ({end.isoformat()}), and EC2 drains and terminates its "
        f"node from 40 minutes before the end; nothing starts in the last {LAST_MINUTES} minutes. Buy a new block, set "
        "trn2_nodes.capacity_reservation_id and capacity_block_end to it, run make deploy, then run this again "
        "(docs/coldstart.md, Capacity Block end)"
    )
