"""What `make stage`, `make build` and `make bench` share on the deployer's machine: find the AWS account, apply
a Job with kubectl and follow it to its end. Failures become sentences that say what to fix, not tracebacks."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable

import yaml

from cloud.aws import caller_account
from config import ConfigError, DeploymentConfig
from config.exit_codes import EXIT_OK, EXIT_USAGE
from model_build.errors import BuildError

KUBECONFIG_HINT = "point kubectl at the cluster first: aws eks update-kubeconfig --name {cluster} --region {region}"


# Every kubectl call ends: each API request within REQUEST_TIMEOUT (a silent API endpoint; kubectl's own TLS
# handshake timeout is 10 s, and a `get` retries discovery a few times: about 55 s measured against a loopback
# server that accepts TCP and never answers), the whole command within DEADLINE_S whatever kubectl does.
REQUEST_TIMEOUT = "20s"
DEADLINE_S = 90.0


def kubectl(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    command = ["kubectl", *args, f"--request-timeout={REQUEST_TIMEOUT}"]
    try:
        result = subprocess.run(command, input=stdin, text=True, capture_output=True, timeout=DEADLINE_S)
    except FileNotFoundError:
        raise BuildError(
            "kubectl is not installed or not on PATH; install it (a version within one minor of the cluster's)"
        ) from None
    except subprocess.TimeoutExpired:
        raise BuildError(
            f"`kubectl {' '.join(args)}` did not finish within {DEADLINE_S:g} s: the cluster's API endpoint does not "
            "answer. Check that it is reachable from here (it is private unless network.api_public_cidrs lists your "
            "address), then " + KUBECONFIG_HINT.format(cluster="<name>-eks", region="<region>")
        ) from None
    if check and result.returncode != 0:
        said = (result.stderr or result.stdout).strip().splitlines()
        raise BuildError(
            f"`kubectl {' '.join(args)}` failed: {said[-1] if said else f'exit code {result.returncode}'}. If it "
            "cannot reach the cluster, " + KUBECONFIG_HINT.format(cluster="<name>-eks", region="<region>")
        )
    return result


def account_id(text: str) -> str:
    """argparse type of --account: an AWS account id is exactly 12 digits (it names the models bucket)."""
    if not re.fullmatch(r"\d{12}", text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an AWS account id (12 digits, as `aws sts get-caller-identity --query Account` prints it)"
        )
    return text


def aws_account(config: DeploymentConfig) -> str:
    """The account of the current AWS credentials: it names the models bucket."""
    return caller_account(
        config.region,
        "configure credentials for the account you deployed to (aws configure, or AWS_PROFILE), then run this again",
    )


def apply(namespace: str, objects: list[dict]) -> None:
    kubectl("-n", namespace, "apply", "-f", "-", stdin=yaml.safe_dump_all(objects, sort_keys=False))


def finished(status: dict) -> str | None:
    """ "Complete" or "Failed" once a Job has ended, else None."""
    conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
    return next((c for c in ("Complete", "Failed") if conditions.get(c) == "True"), None)


def start_job(namespace: str, objects: list[dict]) -> None:
    """Apply a Job (the first object), deleting a finished Job of the same name first.

    Jobs are named by what they produce, and a Job's pod template cannot change: applying over a Job that
    failed would report the old failure again instead of running, so a re-run replaces it. A Job still
    running is left alone and followed.
    """
    name = objects[0]["metadata"]["name"]
    found = kubectl("-n", namespace, "get", "job", name, "-o", "json", check=False)
    if found.returncode == 0 and finished(json.loads(found.stdout).get("status", {})):
        kubectl("-n", namespace, "delete", "job", name, "--cascade=foreground", "--wait=true")
    apply(namespace, objects)


def follow_job(
    namespace: str, job: str, *, poll_s: float = 15.0, waiting: Callable[[int], None] = lambda active: None
) -> bool:
    """Stream the Job's log once it runs and return True when it completes, False when it fails."""
    logs: subprocess.Popen[str] | None = None
    try:
        while True:
            status = json.loads(kubectl("-n", namespace, "get", "job", job, "-o", "json").stdout).get("status", {})
            if status.get("active") and logs is None:
                logs = subprocess.Popen(["kubectl", "-n", namespace, "logs", "-f", f"job/{job}"], text=True)
            if ended := finished(status):
                return ended == "Complete"
            if logs is None:
                waiting(status.get("active", 0))
            time.sleep(poll_s)
    finally:
        if logs is not None:
            logs.terminate()


def run_or_print(apply_it: bool, run: Callable[[], int], render: Callable[[], list[dict]]) -> int:
    """The tail of every `python -m ops.<driver>`: run on the cluster (--apply), or print the Job's YAML (--account);
    errors as sentences."""
    try:
        if apply_it:
            return run()
        objects = render()
    except (ConfigError, BuildError) as err:
        print(err, file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(yaml.safe_dump_all(objects, sort_keys=False))
    return EXIT_OK
