"""Render the model-build Job of one profile as YAML on stdout (used by `make build PROFILE=...`).

python -m ops.build_artifact PROFILE --account ACCOUNT_ID [--config config/default.yaml]
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from charts.model_build_job import profile_of, render_build_job
from config import load_config
from config.exit_codes import EXIT_FAILED, EXIT_OK
from model_build.checkpoints import profile_models
from ops.kubectl import aws_account, follow_job, kubectl, run_or_print, start_job
from ops.stage_checkpoints import stage_models


def run_build(config_path: str | None, profile_name: str, poll_s: float = 20.0) -> int:
    """Stage the profile's checkpoints if needed, apply the Job and wait for it; 0 only when the artifact is
    published. Serving reads the checkpoints too (config, tokenizer), so they are staged even if the artifact
    already exists."""
    config = load_config(config_path)
    profile = profile_of(config, profile_name)
    account = aws_account(config)
    staged = stage_models(config, account, profile_models(profile), poll_s=poll_s)
    if staged != 0:
        return staged
    bucket = config.models_bucket_name(account)
    cli = [sys.executable, "-m", "model_build", *(["--config", config_path] if config_path else [])]
    if subprocess.run([*cli, "--bucket", bucket, "verify", profile_name]).returncode == 0:
        print(f"{profile_name}: artifact already published and verified; nothing to build")
        return EXIT_OK
    objects = render_build_job(config, profile_name, account)
    job = objects[0]["metadata"]["name"]
    ns = config.namespace
    print(f"{profile_name}: freeing its devices (scale deploy/{profile_name} to 0) and starting job/{job}")
    kubectl("-n", ns, "scale", f"deploy/{profile_name}", "--replicas=0")
    try:
        start_job(ns, objects)
        ok = follow_job(
            ns, job, poll_s=poll_s, waiting=lambda _: print(f"{profile_name}: waiting for job/{job} to start")
        )
    finally:
        kubectl("-n", ns, "scale", f"deploy/{profile_name}", f"--replicas={profile.replicas}", check=False)
        print(f"{profile_name}: deploy/{profile_name} scaled back to {profile.replicas}")
    if not ok:
        print(
            f"{profile_name}: job/{job} failed; see `kubectl -n {ns} logs job/{job}` "
            "(a 'Killed' line means the host ran out of memory)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(f"{profile_name}: job/{job} succeeded")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.build_artifact", description=__doc__.split("\n\n")[0])
    parser.add_argument("profile")
    parser.add_argument("--config", default=None)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--account", help="print the Job YAML for the bucket of this AWS account id")
    mode.add_argument("--apply", action="store_true", help="run the build on the cluster and wait for it")
    args = parser.parse_args(argv)
    return run_or_print(
        args.apply,
        lambda: run_build(args.config, args.profile),
        lambda: render_build_job(load_config(args.config), args.profile, args.account),
    )


if __name__ == "__main__":
    sys.exit(main())
