"""What `make stage`, `make build` and `make bench` share on the deployer's machine: find the AWS account, apply
a Job with kubectl and follow it to its end. Failures become sentences that say what to fix, not tracebacks; so do
Ctrl-C, SIGTERM and SIGHUP (ops/interrupts.py).

No kubectl outlives the command. Each runs in a session of its own (`start_new_session`, setsid(2)): the terminal's
Ctrl-C and hang-up reach only this process, which decides; when a call is cut short (a signal, the deadline) its
whole process group is killed with SIGKILL and reaped, with any credential plugin it started (EKS kubeconfigs run
`aws eks get-token`). SIGKILL of this process runs none of that: on Linux each kubectl also asks the kernel to
SIGKILL it when its parent dies (prctl(2) PR_SET_PDEATHSIG, set between fork and exec; the man page: sent when
the parent thread terminates, kept across execve). Elsewhere (macOS has no such call) a kubectl then finishes its
one request (within DEADLINE_S) and `logs -f` streams until the Job's pod ends.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import yaml

from cloud.aws import caller_account
from config import ConfigError, DeploymentConfig
from config.exit_codes import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CommandError
from ops.interrupts import unwinding

KUBECONFIG_HINT = "point kubectl at the cluster first: aws eks update-kubeconfig --name {cluster} --region {region}"


# Every kubectl call ends: each API request within REQUEST_TIMEOUT (a silent API endpoint; kubectl's own TLS
# handshake timeout is 10 s, and a `get` retries discovery a few times: about 55 s measured against a loopback
# server that accepts TCP and never answers), the whole command within DEADLINE_S whatever kubectl does.
REQUEST_TIMEOUT = "20s"
DEADLINE_S = 90.0


PR_SET_PDEATHSIG = 1  # linux/prctl.h
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def own_group() -> dict[str, Any]:
    """Popen options that start kubectl in a session of its own and, on Linux, tie its life to this process."""
    if _LIBC is None:
        return {"start_new_session": True}
    parent = os.getpid()
    libc = _LIBC

    def die_with_parent() -> None:  # in the child, between fork and exec
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the line above: nobody would kill this one
            os._exit(1)

    return {"start_new_session": True, "preexec_fn": die_with_parent}


def end(process: subprocess.Popen[str]) -> None:
    """Kill the process's whole group (it leads one: own_group) and reap it. The group's id stays taken while any
    member lives, so the kill cannot reach a stranger's group even after the leader was reaped."""
    with contextlib.suppress(OSError):  # the group is gone already
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        process.kill()  # not a group leader after all: at least kubectl itself
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
    process.wait()


def kubectl(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    command = ["kubectl", *args, f"--request-timeout={REQUEST_TIMEOUT}"]
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **own_group(),
        )
    except FileNotFoundError:
        raise CommandError(
            "kubectl is not installed or not on PATH; install it (a version within one minor of the cluster's)"
        ) from None
    try:
        stdout, stderr = process.communicate(stdin, timeout=DEADLINE_S)
    except BaseException as err:  # the deadline, or Ctrl-C/SIGTERM/SIGHUP unwinding: kubectl must not go on alone
        end(process)
        if not isinstance(err, subprocess.TimeoutExpired):
            raise
        raise CommandError(
            f"`kubectl {' '.join(args)}` did not finish within {DEADLINE_S:g} s: the cluster's API endpoint does not "
            "answer. Check that it is reachable from here (it is private unless network.api_public_cidrs lists your "
            "address), then " + KUBECONFIG_HINT.format(cluster="<name>-eks", region="<region>")
        ) from None
    result = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    if check and result.returncode != 0:
        said = (result.stderr or result.stdout).strip().splitlines()
        raise CommandError(
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
                logs = subprocess.Popen(
                    ["kubectl", "-n", namespace, "logs", "-f", f"job/{job}"],
                    stdin=subprocess.DEVNULL,
                    text=True,
                    **own_group(),
                )
            if ended := finished(status):
                return ended == "Complete"
            if logs is None:
                waiting(status.get("active", 0))
            time.sleep(poll_s)
    finally:
        if logs is not None:
            end(logs)


def _quiet_dead_helper(hook: Callable[[Any], object]) -> Callable[[Any], object]:
    """The unraisable-exception hook for the rest of an interrupted command. Ctrl-C and a closed terminal signal the
    whole process group, so the node process jsii runs for cdk8s (charts/ renders the Jobs) dies with us, and jsii's
    atexit stop then writes to its closed stdin (jsii/_kernel/providers/process.py, _NodeProcess.stop): that
    BrokenPipeError is dropped instead of ending the sentence above with a traceback."""

    def quiet(unraisable: Any) -> None:
        if not (isinstance(unraisable.exc_value, BrokenPipeError) and "atexit" in (unraisable.err_msg or "")):
            hook(unraisable)

    return quiet


def run_or_print(
    apply_it: bool, run: Callable[[], int], render: Callable[[], list[dict]], *, resume: str = "run it again"
) -> int:
    """The tail of every `python -m ops.<driver>`: run on the cluster (--apply), or print the Job's YAML (--account);
    errors as sentences, and Ctrl-C, SIGTERM and SIGHUP too (`resume` says what to do after one; the service was
    given back on the way here)."""
    try:
        if apply_it:
            with unwinding():
                return run()
        objects = render()
    except (ConfigError, CommandError) as err:
        print(err, file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as err:
        print(f"interrupted ({err or 'SIGINT'}): {resume}", file=sys.stderr)
        sys.unraisablehook = _quiet_dead_helper(sys.unraisablehook)
        return EXIT_INTERRUPTED
    sys.stdout.write(yaml.safe_dump_all(objects, sort_keys=False))
    return EXIT_OK
