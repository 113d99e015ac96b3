"""`make build PROFILE=...`: build a profile's artifact in the cluster, only when its manifest is missing.

python -m ops.build_artifact PROFILE --apply [--config config/default.yaml]
python -m ops.build_artifact PROFILE --account ACCOUNT_ID     # print the model-build Job YAML instead

Building frees the profile's devices by taking it out of service (ops/out_of_service.py: KEDA's pause with scaling
on), so the service is touched only when S3 answered that the artifact's manifest is missing. A check S3 did not answer (credentials, throttling, network)
stops with exit 2 and a committed but damaged prefix stops with exit 1 and the repair; neither changes anything.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from datetime import UTC, datetime

from charts.jobs.model_build import profile_of, render_build_job
from cloud import aws
from config import DeploymentConfig, ServingProfile, load_config
from config.bucket_layout import artifact_prefix
from config.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from model_build.artifact import artifact_plan
from model_build.errors import BuildError, build_command
from model_build.verify import verify_artifact
from ops.capacity_block import too_late
from ops.kubectl import account_id, aws_account, follow_job, run_or_print, start_job
from ops.out_of_service import OutOfService
from ops.stage_checkpoints import stage_models


@dataclass(frozen=True)
class ArtifactCheck:
    """What S3 said about a profile's artifact prefix."""

    prefix_url: str
    committed: bool  # a manifest is there (readable or not): serving may be reading the prefix
    problems: tuple[str, ...] = ()  # why a committed prefix does not verify

    @property
    def published(self) -> bool:
        return self.committed and not self.problems


def check_artifact(config: DeploymentConfig, profile: ServingProfile, bucket: str) -> ArtifactCheck:
    """The cheap verify of the profile's published artifact: its manifest, then each object's size, sha256 metadata
    and what S3 computed of its bytes (ETag recorded at publish, S3's SHA-256), reading no object. A question S3 did not answer (credentials, throttling, network) is a BuildError with exit code 2,
    never a "missing": the caller must not take serving down on an answer it did not get."""
    from botocore.exceptions import BotoCoreError, ClientError

    from model_build.store import S3Store, TransferSettings, make_s3_client

    plan = artifact_plan(config, profile, bucket=bucket)
    owner = aws.bucket_owner(bucket, config.region, "configure AWS credentials")
    store = S3Store(make_s3_client(config.region, TransferSettings(), owner), bucket)
    prefix_url = store.url(artifact_prefix(plan.digest))
    try:
        report = verify_artifact(store, plan)
    except BuildError as err:
        if err.code == EXIT_FAILED:  # a manifest that is there but cannot be read: a damaged commit
            return ArtifactCheck(prefix_url, committed=True, problems=(str(err),))
        raise _unanswered(profile, err) from None
    except (BotoCoreError, ClientError) as err:
        raise _unanswered(profile, err) from None
    return ArtifactCheck(prefix_url, committed=report.manifest is not None, problems=tuple(report.problems))


def _unanswered(profile: ServingProfile, err: Exception) -> BuildError:
    return BuildError(
        f"{profile.name}: could not check its published artifact: {err}. Nothing was changed: deploy/{profile.name} "
        f"keeps serving. Fix the AWS credentials or network (or wait out the throttling), then run "
        f"`{build_command(profile.name)}` again",
        EXIT_USAGE,
    )


def damaged(profile: ServingProfile, check: ArtifactCheck) -> str:
    """What to do about a committed prefix (it has a manifest) whose content is wrong: never rebuild over it."""
    problems = "".join(f"\n  - {p}" for p in check.problems)
    prefix_url = check.prefix_url
    return (
        f"{profile.name}: {prefix_url} is committed (it has a manifest) but damaged:{problems}\n"
        f"Nothing was changed. A build does not overwrite a committed prefix (serving may be reading it), so repair "
        f"it by hand: delete the prefix (aws s3 rm --recursive {prefix_url}), then run `{build_command(profile.name)}`"
        " again"
    )


def run_build(config_path: str | None, profile_name: str, poll_s: float = 20.0) -> int:
    """Stage the profile's checkpoints if needed, then build its artifact only if its manifest is missing; 0 only
    when the artifact is published. Serving reads the checkpoints too (config, tokenizer), so they are staged
    even if the artifact already exists. Nothing touches the service unless S3 said the manifest is missing."""
    from botocore.exceptions import BotoCoreError, ClientError

    config = load_config(config_path)
    profile = profile_of(config, profile_name)
    account = aws_account(config)
    bucket = config.models_bucket_name(account)
    try:
        staged = stage_models(config, account, config.profile_models(profile), poll_s=poll_s)
    except (BotoCoreError, ClientError) as err:
        raise _unanswered(profile, err) from None
    if staged != 0:
        return staged
    check = check_artifact(config, profile, bucket)
    if check.published:
        print(f"{profile_name}: artifact {check.prefix_url} already published and verified; nothing to build")
        return EXIT_OK
    if check.committed:
        print(damaged(profile, check), file=sys.stderr)
        return EXIT_FAILED
    return build_missing(config, profile, account, poll_s=poll_s)


def build_missing(config: DeploymentConfig, profile: ServingProfile, account: str, *, poll_s: float) -> int:
    """Take the profile out of service (ops/out_of_service.py: KEDA's pause, or a scale to 0 without scaling), run
    its build Job once its pods are gone, and give the service back whatever the Job did."""
    if refusal := too_late(config, datetime.now(UTC), f"the build of {profile.name}"):
        raise BuildError(refusal)  # before the service is taken out: a refused build leaves it serving
    objects = render_build_job(config, profile.name, account)
    job = objects[0]["metadata"]["name"]
    ns = config.namespace
    name = profile.name
    print(f"{name}: artifact not published yet; freeing its devices for job/{job}")
    service = OutOfService(config, profile, poll_s=min(poll_s, 5.0))
    with service:
        start_job(ns, objects)
        ok = follow_job(ns, job, poll_s=poll_s, waiting=lambda _: print(f"{name}: waiting for job/{job} to start"))
    if not ok:
        print(
            f"{name}: job/{job} failed; see `kubectl -n {ns} logs job/{job}` "
            "(a 'Killed' line means the host ran out of memory)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(f"{name}: job/{job} succeeded")
    return EXIT_OK if service.restored else EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.build_artifact", description=__doc__.split("\n\n")[0])
    parser.add_argument("profile")
    parser.add_argument("--config", default=None)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--account", type=account_id, help="print the Job YAML for the bucket of this AWS account id")
    mode.add_argument("--apply", action="store_true", help="run the build on the cluster and wait for it")
    args = parser.parse_args(argv)
    return run_or_print(
        args.apply,
        lambda: run_build(args.config, args.profile),
        lambda: render_build_job(load_config(args.config), args.profile, args.account),
    )


if __name__ == "__main__":
    sys.exit(main())
