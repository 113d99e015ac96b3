"""The `observability` section: where bench publishes its metrics and whom the alarms notify."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints, field_validator

from config.section import Section


class ObservabilityConfig(Section):
    metrics_namespace: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_./#:-]{1,255}$")] = "TrnSpecdec/Bench"

    @field_validator("metrics_namespace")
    @classmethod
    def _not_aws(cls, namespace: str) -> str:
        """CloudWatch refuses PutMetricData into namespaces starting with `AWS/` (reserved for AWS services)."""
        if namespace.upper().startswith("AWS/"):
            raise ValueError(
                f"{namespace!r} starts with AWS/, which CloudWatch reserves for AWS "
                "services (PutMetricData is refused); use your own, e.g. TrnSpecdec/Bench"
            )
        return namespace

    alarm_topic_arn: (
        Annotated[
            str, StringConstraints(pattern=r"^arn:aws[a-z-]*:sns:[a-z]{2}(-[a-z]+)+-\d:\d{12}:[A-Za-z0-9_-]{1,256}$")
        ]
        | None
    ) = Field(
        default=None, description="SNS topic the alarms notify (an existing topic); none: alarms only show state."
    )
