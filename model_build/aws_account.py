"""The AWS account of the current credentials, the one STS call every command makes: the account names the
models bucket. Used by `python -m model_build` and by the deploy-time drivers in ops/."""

from __future__ import annotations

from model_build.errors import BuildError


def caller_account(region: str, fix: str) -> str:
    """The account id; on failure a BuildError saying why and `fix`, what the person should do."""
    from botocore.exceptions import BotoCoreError, ClientError  # lazily: importing model_build needs no AWS SDK

    from model_build import aws_clients

    try:
        return aws_clients.client("sts", region).get_caller_identity()["Account"]
    except (BotoCoreError, ClientError) as err:
        raise BuildError(f"cannot tell which AWS account to use ({err}); {fix}") from None
