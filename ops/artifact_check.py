"""The cheap verify of a profile's published artifact from the deployer's machine: `make build` asks it before it
touches the service, and every ops entry point before it gives back a profile some earlier command left out of
service (ops/out_of_service.py, give_back_left_pauses)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cloud import aws
from config import DeploymentConfig, ServingProfile
from config.bucket_layout import artifact_prefix
from config.exit_codes import EXIT_FAILED, EXIT_USAGE, CommandError
from model_build.artifact import artifact_plan
from model_build.errors import build_command
from model_build.verify import verify_artifact


@dataclass(frozen=True)
class ArtifactCheck:
    """What S3 said about a profile's artifact prefix."""

    prefix_url: str
    committed: bool  # a manifest is there (readable or not): serving may be reading the prefix
    problems: tuple[str, ...] = ()  # why a committed prefix does not verify

    @property
    def published(self) -> bool:
        return self.committed and not self.problems


def check_artifact(
    config: DeploymentConfig, profile: ServingProfile, bucket: str, *, then: str | None = None
) -> ArtifactCheck:
    """The cheap verify of the profile's published artifact: its manifest, then each object's size, sha256 metadata
    and what S3 computed of its bytes (ETag recorded at publish, S3's SHA-256), reading no object. A question S3 did not answer (credentials, throttling, network) is a CommandError with exit code 2,
    never a "missing": the caller must not take serving down on an answer it did not get. `then` ends that
    sentence (default: what `make build` does next, nothing)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from model_build.store import S3Store, TransferSettings, make_s3_client

    plan = artifact_plan(config, profile, bucket=bucket)
    owner = aws.bucket_owner(bucket, config.region, "configure AWS credentials")
    store = S3Store(make_s3_client(config.region, TransferSettings(), owner), bucket)
    prefix_url = store.url(artifact_prefix(plan.digest))
    try:
        report = verify_artifact(store, plan)
    except CommandError as err:
        if err.code == EXIT_FAILED:  # a manifest that is there but cannot be read: a damaged commit
            return ArtifactCheck(prefix_url, committed=True, problems=(str(err),))
        raise unanswered(profile, err, then) from None
    except (BotoCoreError, ClientError) as err:
        raise unanswered(profile, err, then) from None
    return ArtifactCheck(prefix_url, committed=report.manifest is not None, problems=tuple(report.problems))


def unanswered(profile: ServingProfile, err: Exception, then: str | None = None) -> CommandError:
    if then is None:
        then = (
            f"Nothing was changed: deploy/{profile.name} keeps serving. Fix the AWS credentials or network (or wait "
            f"out the throttling), then run `{build_command(profile.name)}` again"
        )
    return CommandError(
        f"{profile.name}: could not check its published artifact: {err}" + (f". {then}" if then else ""), EXIT_USAGE
    )


def published(config: DeploymentConfig, bucket: str) -> Callable[[ServingProfile], bool]:
    """give_back_left_pauses's question: is this profile's artifact published and verified? (What S3 did not
    answer is said there.)"""
    return lambda profile: check_artifact(config, profile, bucket, then="").published
