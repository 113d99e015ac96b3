"""Take a serving profile out of service and give it back: the one owner of that step (`make build` uses it; any
other flow that needs a profile's devices must too), and of finding a pause some earlier command left behind.

With scaling on, KEDA owns the Deployment's replica count. Its scale executor puts a target below the ScaledObject's
minReplicaCount back to the minimum at its next poll (kedacore/keda v2.20.2 pkg/scaling/executor/
scale_scaledobjects.go:70-73 scales a target at 0 with active triggers up, :101-108 sets one below the minimum with
inactive triggers back to it), so a bare `kubectl scale --replicas=0` lasts one polling interval and the serving pod
retakes the devices the build Job waits for. KEDA's documented way out is its pause: the annotation
`autoscaling.keda.sh/paused-replicas: "0"` scales the target to 0 and stops scaling it until the annotation is removed
(KEDA docs, "Pause autoscaling"; the executor returns early while it is set, scale_scaledobjects.go:53-55). Without a
ScaledObject the Deployment is scaled to 0 and back.

Either way the profile's pods must be gone before the caller proceeds, and the profile is given back on success,
failure, Ctrl-C, SIGTERM and SIGHUP alike (ops/interrupts.py; the give-back itself defers them). The pause carries
who took it (config.labels.PAUSED_BY: the command, the UTC time, pid and host), set and removed in the same kubectl
call as the pause, so a pause a SIGKILL left behind is found and named by the next ops command
(give_back_left_pauses) and given back where the profile's artifact is in place.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType

from charts.autoscaling import scaled_object_name
from config import DeploymentConfig, ServingProfile
from config.exit_codes import CommandError
from config.labels import PAUSED_BY, vllm_selector
from model_build.errors import build_command
from ops.interrupts import deferred
from ops.kubectl import kubectl

PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"  # KEDA v2.20.2 apis/keda/v1alpha1/scaledobject_types.go:58


def paused_by(operation: str) -> str:
    """The PAUSED_BY value: what took the profile out, when, and which process on which host."""
    return f"{operation} at {datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}, pid {os.getpid()} on {socket.gethostname()}"


@dataclass(frozen=True)
class Target:
    """What holds a profile's replica count: its ScaledObject with scaling on, else its Deployment."""

    namespace: str
    name: str
    replicas: int
    scaled_object: str | None

    @classmethod
    def of(cls, config: DeploymentConfig, profile: ServingProfile) -> Target:
        return cls(config.namespace, profile.name, profile.replicas, scaled_object_name(config, profile))

    @property
    def kind(self) -> str:
        return f"scaledobject/{self.scaled_object}" if self.scaled_object is not None else f"deploy/{self.name}"

    def take_command(self, by: str) -> tuple[str, ...]:
        if self.scaled_object is not None:
            return ("-n", self.namespace, "annotate", self.kind, f"{PAUSED_REPLICAS}=0", f"{PAUSED_BY}={by}",
                    "--overwrite")  # fmt: skip
        return self._patch(by, 0)

    def give_back_command(self) -> tuple[str, ...]:
        if self.scaled_object is not None:
            return ("-n", self.namespace, "annotate", self.kind, f"{PAUSED_REPLICAS}-", f"{PAUSED_BY}-")
        return self._patch(None, self.replicas)

    def _patch(self, by: str | None, replicas: int) -> tuple[str, ...]:
        change = {"metadata": {"annotations": {PAUSED_BY: by}}, "spec": {"replicas": replicas}}
        return ("-n", self.namespace, "patch", self.kind, "--type=merge", "-p", json.dumps(change))

    def resume_hint(self) -> str:
        return f"`kubectl {shlex.join(self.give_back_command())}`"


def give_back(target: Target) -> bool:
    """Remove the pause (KEDA scales from the minimum again) or scale back; say so only when kubectl did it.
    Ctrl-C, SIGTERM and SIGHUP wait until kubectl has answered (ops/interrupts.py, deferred)."""
    command = target.give_back_command()
    with deferred():
        try:
            result = kubectl(*command, check=False)
            said = (result.stderr or result.stdout).strip().splitlines()
            failure = None if result.returncode == 0 else (said[-1] if said else f"exit code {result.returncode}")
        except CommandError as err:  # kubectl itself is gone, or the API did not answer
            failure = str(err)
        if failure is None:
            what = (
                f"{target.kind} resumed (KEDA scales deploy/{target.name} from its minimum)"
                if target.scaled_object is not None
                else f"deploy/{target.name} scaled back to {target.replicas}"
            )
            print(f"{target.name}: {what}", flush=True)
            return True
        print(
            f"{target.name}: could not give the service back ({failure}); it serves nothing until you run "
            f"{target.resume_hint()}",
            file=sys.stderr,
            flush=True,
        )
        return False


class OutOfService:
    """`with OutOfService(config, profile, operation=...): ...` runs the body with none of the profile's pods
    running; `operation` is the command that needs it (it goes into PAUSED_BY).

    `restored` says afterwards whether the profile was given back; when it was not, the sentence on stderr says
    the command that gives it back by hand."""

    def __init__(
        self,
        config: DeploymentConfig,
        profile: ServingProfile,
        *,
        operation: str,
        poll_s: float = 5.0,
        timeout_s: float = 600.0,
    ) -> None:
        self.target = Target.of(config, profile)
        self.name = profile.name
        self.namespace = config.namespace
        self.operation = operation
        self.selector = ",".join(f"{k}={v}" for k, v in sorted(vllm_selector(profile.name).items()))
        self.poll_s = poll_s
        self.timeout_s = timeout_s
        self.restored = False

    def _take_command(self) -> tuple[str, ...]:
        return self.target.take_command(paused_by(self.operation))

    def __enter__(self) -> OutOfService:
        how = (
            f"pausing {self.target.kind} at 0 replicas ({PAUSED_REPLICAS})"
            if self.target.scaled_object is not None
            else f"scaling deploy/{self.name} to 0"
        )
        print(f"{self.name}: taking the service out ({how}) and waiting until its pods are gone", flush=True)
        try:
            kubectl(*self._take_command())
            self._wait_until_no_pods()
        except BaseException:
            self.give_back()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.give_back()

    def _pods(self) -> list[str]:
        found = kubectl("-n", self.namespace, "get", "pods", "-l", self.selector, "-o", "json")
        return [p["metadata"]["name"] for p in json.loads(found.stdout).get("items", [])]

    def _wait_until_no_pods(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while pods := self._pods():
            if time.monotonic() >= deadline:
                raise CommandError(
                    f"{self.name}: its pods ({', '.join(pods)}) were still there {self.timeout_s:g} s after it was "
                    f"taken out of service; see `kubectl -n {self.namespace} describe pod {pods[0]}`, then run the "
                    "same command again"
                )
            time.sleep(self.poll_s)

    def give_back(self) -> bool:
        self.restored = give_back(self.target)
        return self.restored


@dataclass(frozen=True)
class Pause:
    """A profile found out of service: `by` is its PAUSED_BY, None for a pause without one (by hand, or by a
    `make build` older than PAUSED_BY)."""

    profile: ServingProfile
    target: Target
    by: str | None
    replicas: str  # the paused count


def find_pauses(config: DeploymentConfig) -> list[Pause]:
    """The profiles whose ScaledObject carries KEDA's pause, and those without one whose Deployment an ops command
    scaled to 0 (PAUSED_BY): at most two kubectl reads."""
    targets = {p.name: (p, Target.of(config, p)) for p in config.profiles}
    found: list[Pause] = []
    for kind, paused in (("scaledobjects", _keda_pause), ("deployments", _our_scale_to_zero)):
        names = {n for n, (_, t) in targets.items() if (t.scaled_object is not None) == (kind == "scaledobjects")}
        if not names:
            continue
        listed = json.loads(kubectl("-n", config.namespace, "get", kind, "-o", "json").stdout or "{}")
        for item in listed.get("items", []):
            name = item["metadata"]["name"]
            annotations = item["metadata"].get("annotations") or {}
            if name in names and (count := paused(item, annotations)) is not None:
                profile, target = targets[name]
                found.append(Pause(profile, target, annotations.get(PAUSED_BY), count))
    return sorted(found, key=lambda p: p.profile.name)


def _keda_pause(item: dict, annotations: dict[str, str]) -> str | None:
    return annotations.get(PAUSED_REPLICAS)


def _our_scale_to_zero(item: dict, annotations: dict[str, str]) -> str | None:
    return "0" if PAUSED_BY in annotations and item.get("spec", {}).get("replicas") == 0 else None


TAKEN_OVER = "this command takes the pause over and gives the service back when it ends"
_HOLDER = re.compile(r", pid (\d+) on (\S+)$")


def still_running(by: str) -> bool | None:
    """Whether the process named in a PAUSED_BY value still runs: known only on its own host."""
    holder = _HOLDER.search(by)
    if holder is None or holder.group(2) != socket.gethostname():
        return None
    try:
        os.kill(int(holder.group(1)), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process with that pid
        return True
    return True


def give_back_left_pauses(
    config: DeploymentConfig, in_place: Callable[[ServingProfile], bool], *, taking: str | None = None
) -> None:
    """What every ops entry point does first: say which profiles are out of service and since when, and give back
    each pause an ops command took whose profile's artifact is `in_place` (published and verified) and whose
    command no longer runs. A pause without PAUSED_BY is only named (a person may have paused it on purpose).
    `taking`: the profile this command is about to take out of service itself (`make build`), which takes over a
    pause it finds there."""
    try:
        pauses = find_pauses(config)
    except (CommandError, ValueError) as err:
        print(f"could not look for profiles left out of service: {err}", file=sys.stderr, flush=True)
        return
    for pause in pauses:
        name, target, by = pause.profile.name, pause.target, pause.by
        held = f"{target.kind} is paused at {pause.replicas} replicas ({PAUSED_REPLICAS})"
        if by is None:
            _say(f"{name}: {held} by hand or by an older make build, so KEDA does not scale it; "
                 + (TAKEN_OVER if name == taking else f"left as it is: {target.resume_hint()} gives it back"))  # fmt: skip
            continue
        running = still_running(by)
        if running:
            _say(f"{name}: out of service since {by}, which still runs here and gives it back when it ends")
            continue
        since = f"{name}: out of service since {by}" + (", which is no longer running" if running is False else "")
        try:
            ready = in_place(pause.profile)
        except CommandError as err:
            why = str(err).removeprefix(f"{name}: ")
            _say(f"{since}; {why}, so it stays out: {target.resume_hint()} gives it back")
            continue
        if ready:
            _say(f"{since}; its artifact is published and verified, so it is given back now")
            give_back(target)
        elif name == taking:
            _say(f"{since}; its artifact is not published: {TAKEN_OVER}")
        else:
            _say(f"{since}; its artifact is not published, so it stays out until `{build_command(name)}` builds it "
                 f"and gives it back ({target.resume_hint()} gives it back as it is)")  # fmt: skip


def _say(sentence: str) -> None:
    print(sentence, file=sys.stderr, flush=True)
