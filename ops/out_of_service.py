"""Take a serving profile out of service and give it back: the one owner of that step (`make build` uses it; any
other flow that needs a profile's devices must too).

With scaling on, KEDA owns the Deployment's replica count. Its scale executor puts a target below the ScaledObject's
minReplicaCount back to the minimum at its next poll (kedacore/keda v2.20.2 pkg/scaling/executor/
scale_scaledobjects.go:70-73 scales a target at 0 with active triggers up, :101-108 sets one below the minimum with
inactive triggers back to it), so a bare `kubectl scale --replicas=0` lasts one polling interval and the serving pod
retakes the devices the build Job waits for. KEDA's documented way out is its pause: the annotation
`autoscaling.keda.sh/paused-replicas: "0"` scales the target to 0 and stops scaling it until the annotation is removed
(KEDA docs, "Pause autoscaling"; the executor returns early while it is set, scale_scaledobjects.go:53-55). Without a
ScaledObject the Deployment is scaled to 0 and back.

Either way the profile's pods must be gone before the caller proceeds, and the profile is given back on success,
failure and Ctrl-C alike.
"""

from __future__ import annotations

import json
import sys
import time
from types import TracebackType

from charts.autoscaling import scaled_object_name
from charts.vllm_service import selector
from config import DeploymentConfig, ServingProfile
from model_build.errors import BuildError
from ops.kubectl import kubectl

PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"  # KEDA v2.20.2 apis/keda/v1alpha1/scaledobject_types.go:58


class OutOfService:
    """`with OutOfService(config, profile): ...` runs the body with none of the profile's pods running.

    `restored` says afterwards whether the profile was given back; when it was not, the sentence on stderr says
    the command that gives it back by hand."""

    def __init__(
        self, config: DeploymentConfig, profile: ServingProfile, *, poll_s: float = 5.0, timeout_s: float = 600.0
    ) -> None:
        self.namespace = config.namespace
        self.name = profile.name
        self.replicas = profile.replicas
        self.scaled_object = scaled_object_name(config, profile)
        self.selector = ",".join(f"{k}={v}" for k, v in sorted(selector(profile).items()))
        self.poll_s = poll_s
        self.timeout_s = timeout_s
        self.restored = False

    def _take_command(self) -> tuple[str, ...]:
        if self.scaled_object is not None:
            return ("-n", self.namespace, "annotate", f"scaledobject/{self.scaled_object}", f"{PAUSED_REPLICAS}=0",
                    "--overwrite")  # fmt: skip
        return ("-n", self.namespace, "scale", f"deploy/{self.name}", "--replicas=0")

    def _give_back_command(self) -> tuple[str, ...]:
        if self.scaled_object is not None:
            return ("-n", self.namespace, "annotate", f"scaledobject/{self.scaled_object}", f"{PAUSED_REPLICAS}-")
        return ("-n", self.namespace, "scale", f"deploy/{self.name}", f"--replicas={self.replicas}")

    def __enter__(self) -> OutOfService:
        how = (
            f"pausing scaledobject/{self.scaled_object} at 0 replicas ({PAUSED_REPLICAS})"
            if self.scaled_object is not None
            else f"scaling deploy/{self.name} to 0"
        )
        print(f"{self.name}: taking the service out ({how}) and waiting until its pods are gone")
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
                raise BuildError(
                    f"{self.name}: its pods ({', '.join(pods)}) were still there {self.timeout_s:g} s after it was "
                    f"taken out of service; see `kubectl -n {self.namespace} describe pod {pods[0]}`, then run the "
                    "same command again"
                )
            time.sleep(self.poll_s)

    def give_back(self) -> bool:
        """Remove the pause (KEDA scales from the minimum again) or scale back; say so only when kubectl did it."""
        command = self._give_back_command()
        try:
            result = kubectl(*command, check=False)
            said = (result.stderr or result.stdout).strip().splitlines()
            failure = None if result.returncode == 0 else (said[-1] if said else f"exit code {result.returncode}")
        except BuildError as err:  # kubectl itself is gone, or the API did not answer
            failure = str(err)
        what = (
            f"scaledobject/{self.scaled_object} resumed (KEDA scales deploy/{self.name} from its minimum)"
            if self.scaled_object is not None
            else f"deploy/{self.name} scaled back to {self.replicas}"
        )
        if failure is None:
            print(f"{self.name}: {what}")
            self.restored = True
            return True
        print(
            f"{self.name}: could not give the service back ({failure}); it serves nothing until you run "
            f"`kubectl {' '.join(command)}`",
            file=sys.stderr,
        )
        return False
