"""Stage the configured models' checkpoints into the bucket with an in-cluster Job (`make stage`).

python -m ops.stage_checkpoints --apply [--model KEY ...] [--config config/default.yaml]
python -m ops.stage_checkpoints --account ACCOUNT_ID [--model KEY ...]     # print the Job YAML instead

Models whose checkpoint manifest is already in the bucket are left alone; if none is missing, no Job runs. A profile
some earlier command left out of service is named first and, where its artifact is in place, given back
(ops/out_of_service.py).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from charts.jobs.stage import HF_TOKEN_SECRET, render_stage_job
from cloud import aws
from config import DeploymentConfig, load_config
from config.bucket_layout import checkpoint_prefix, manifest_key
from config.exit_codes import EXIT_FAILED, EXIT_OK, CommandError
from model_build.checkpoints import select_models
from ops.artifact_check import published
from ops.capacity_block import too_late
from ops.kubectl import account_id, aws_account, follow_job, run_or_print, start_job
from ops.out_of_service import give_back_left_pauses


def unstaged(config: DeploymentConfig, keys: list[str], bucket: str) -> list[str]:
    """The models among `keys` whose checkpoint has no manifest in the bucket yet."""
    from model_build.store import S3Store, TransferSettings, make_s3_client

    owner = aws.bucket_owner(bucket, config.region, "configure AWS credentials")
    store = S3Store(make_s3_client(config.region, TransferSettings(), owner), bucket)
    store.ensure_bucket()
    return [
        k
        for k in keys
        if store.head(manifest_key(checkpoint_prefix(config.models[k].hf_id, config.models[k].revision))) is None
    ]


def run_stage(config_path: str | None, requested: list[str] | None = None, poll_s: float = 20.0) -> int:
    """Run the staging Job for the models not staged yet and wait for it; 0 once all are staged."""
    config = load_config(config_path)
    account = aws_account(config)
    give_back_left_pauses(config, published(config, config.models_bucket_name(account)))
    return stage_models(config, account, select_models(config, requested), poll_s=poll_s)


def stage_models(config: DeploymentConfig, account: str, keys: list[str], *, poll_s: float = 20.0) -> int:
    """Stage those of `keys` that have no checkpoint manifest yet with one Job, and wait for it."""
    missing = unstaged(config, keys, config.models_bucket_name(account))
    if not missing:
        print(f"checkpoints of {', '.join(keys)} are staged; nothing to download")
        return EXIT_OK
    if refusal := too_late(config, datetime.now(UTC), f"staging {', '.join(missing)}"):
        raise CommandError(refusal)
    objects = render_stage_job(config, missing, account)
    job = objects[0]["metadata"]["name"]
    ns = config.namespace
    print(f"staging {', '.join(missing)} with job/{job} (gated models need: kubectl -n {ns} create secret generic ")
    print(f"  {HF_TOKEN_SECRET} --from-literal=token=hf_...)")
    start_job(ns, objects)
    if not follow_job(ns, job, poll_s=poll_s, waiting=lambda _: print(f"waiting for job/{job} to start")):
        print(f"job/{job} failed; see `kubectl -n {ns} logs job/{job}`; re-running resumes it", file=sys.stderr)
        return EXIT_FAILED
    print(f"job/{job} succeeded: {', '.join(missing)} staged")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.stage_checkpoints", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=None)
    parser.add_argument(
        "--model", action="append", metavar="KEY", help="a key of models (default: every model a profile uses)"
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--account", type=account_id, help="print the Job YAML for the bucket of this AWS account id")
    mode.add_argument("--apply", action="store_true", help="run the Job for unstaged models and wait for it")
    args = parser.parse_args(argv)

    def render() -> list[dict]:
        config = load_config(args.config)
        return render_stage_job(config, select_models(config, args.model), args.account)

    return run_or_print(
        args.apply,
        lambda: run_stage(args.config, args.model),
        render,
        resume="a staging Job already started goes on in the cluster; `make stage` follows it",
    )


if __name__ == "__main__":
    sys.exit(main())
