"""The few kubectl calls `make stage`, `make build` and `make bench` need: apply, and follow a Job to its end."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable

import yaml

from config import ConfigError
from model_build.errors import BuildError


def kubectl(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", *args], input=stdin, text=True, capture_output=True, check=check)


def apply(namespace: str, objects: list[dict]) -> None:
    kubectl("-n", namespace, "apply", "-f", "-", stdin=yaml.safe_dump_all(objects, sort_keys=False))


def follow_job(
    namespace: str, job: str, *, poll_s: float = 15.0, waiting: Callable[[int], None] = lambda active: None
) -> bool:
    """Stream the Job's log once it runs and return True when it completes, False when it fails."""
    logs: subprocess.Popen[str] | None = None
    try:
        while True:
            status = json.loads(kubectl("-n", namespace, "get", "job", job, "-o", "json").stdout).get("status", {})
            conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
            if status.get("active") and logs is None:
                logs = subprocess.Popen(["kubectl", "-n", namespace, "logs", "-f", f"job/{job}"], text=True)
            if conditions.get("Complete") == "True":
                return True
            if conditions.get("Failed") == "True":
                return False
            if logs is None:
                waiting(status.get("active", 0))
            time.sleep(poll_s)
    finally:
        if logs is not None:
            logs.terminate()


def run_or_print(apply_it: bool, run: Callable[[], int], render: Callable[[], list[dict]]) -> int:
    """The tail of every `python -m charts.<job>`: run on the cluster, or print the YAML; errors as sentences."""
    try:
        if apply_it:
            return run()
        objects = render()
    except (ConfigError, BuildError) as err:
        print(err, file=sys.stderr)
        return 2
    sys.stdout.write(yaml.safe_dump_all(objects, sort_keys=False))
    return 0
