"""`make build PROFILE=...`: build a profile's artifact in the cluster, only when its manifest is missing.

python -m ops.build_artifact PROFILE --apply [--config config/default.yaml]
python -m ops.build_artifact PROFILE --account ACCOUNT_ID     # print the model-build Job YAML instead

Building frees the profile's devices by taking it out of service (ops/out_of_service.py: KEDA's pause with scaling
on), so the service is touched only when S3 answered that the artifact's manifest is missing. A check S3 did not answer (credentials, throttling, network)
stops with exit 2 and a committed but damaged prefix stops with exit 1 and the repair; neither changes anything.
Once S3 has answered, a profile some earlier command left out of service is named and, where its artifact is in
place, given back (this profile's too: a build killed after its Job published leaves only that to do).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from charts.jobs.model_build import profile_of, render_build_job
from config import DeploymentConfig, ServingProfile, load_config
from config.exit_codes import EXIT_FAILED, EXIT_OK, CommandError
from model_build.errors import build_command
from ops.artifact_check import ArtifactCheck, check_artifact, unanswered
from ops.capacity_block import too_late
from ops.kubectl import account_id, aws_account, follow_job, run_or_print, start_job
from ops.out_of_service import OutOfService, give_back_left_pauses
from ops.stage_checkpoints import stage_models


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
        raise unanswered(profile, err) from None
    if staged != 0:
        return staged
    check = check_artifact(config, profile, bucket)
    give_back_left_pauses(
        config,
        lambda p: check.published if p.name == profile.name else check_artifact(config, p, bucket).published,
        taking=None if check.published or check.committed else profile.name,
    )
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
        raise CommandError(refusal)  # before the service is taken out: a refused build leaves it serving
    objects = render_build_job(config, profile.name, account)
    job = objects[0]["metadata"]["name"]
    ns = config.namespace
    name = profile.name
    print(f"{name}: artifact not published yet; freeing its devices for job/{job}")
    service = OutOfService(config, profile, operation=build_command(name), poll_s=min(poll_s, 5.0))
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
    parser.add_argument(
        "--poll-seconds", type=poll_seconds, default=20.0, help="how often to ask the cluster (default 20)"
    )
    args = parser.parse_args(argv)
    return run_or_print(
        args.apply,
        lambda: run_build(args.config, args.profile, poll_s=args.poll_seconds),
        lambda: render_build_job(load_config(args.config), args.profile, args.account),
        resume=f"a build Job already started goes on in the cluster; `{build_command(args.profile)}` follows it",
    )


def poll_seconds(text: str) -> float:
    """argparse type of --poll-seconds: a number of seconds, more than 0 and at most 300."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 300:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0 and at most 300")
    return value


if __name__ == "__main__":
    sys.exit(main())
