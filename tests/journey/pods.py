"""One pod of the fake cluster, run here as its kubelet would run it: the containers of the rendered pod spec, each
with its command, args and env from the manifest, its volumes materialised in a fresh folder that is not the
repository, and the local interpreter as the image (tests/journey/images.py).

What differs from a node, and how (each a rewrite of the pod spec's strings, nothing else):
- Paths. A container sees its volumes at their mountPath; here each volume is a folder under the pod's folder (the
  models bucket: the world's one Mountpoint view of it), so every absolute path in the command, the args and the env
  values that starts with a mountPath is rewritten to that folder, and `/tmp` (the container's own file system when
  no volume is mounted there) to the pod's rootfs/tmp. Only whole path prefixes are rewritten (`/models`, not
  `s3://bucket/models`). The pod's working directory is its rootfs, never the repository.
- Volumes. configMap: the ConfigMap's data and binaryData (base64-decoded) as files, or its `items` at their paths,
  read-only (Kubernetes mounts ConfigMaps read-only: kubernetes.io, "Volumes", configMap); emptyDir: an empty folder;
  persistentVolumeClaim of the Mountpoint CSI driver (s3.csi.aws.com): the bucket's objects as files whose mtime is
  the object's Last-Modified, read-only (Mountpoint docs, SEMANTICS.md: mtime is the object's Last-Modified; the
  volume is mounted read-only), brought up to date with the bucket when the pod mounts it.
- Environment. The container's env plus what the node and its add-ons give every pod here: PATH of the image's
  programs, HOME, HOSTNAME; static fake AWS credentials and AWS_ENDPOINT_URL (moto), where EKS Pod Identity would
  inject its credentials endpoint; HF_ENDPOINT, the loopback Hugging Face (the stage Job's only internet); and
  JOURNEY_POD_IP / JOURNEY_DNS / JOURNEY_POD_DIR for the image's network (image/site/sitecustomize.py).
- Restarts. restartPolicy Never ends the pod at the first failure (Jobs); Always restarts a failed container after a
  back-off: the kubelet's 10 s doubling to 5 min (kubernetes.io, "Pod Lifecycle", container restarts), shortened
  here to BACKOFF_S doubling to BACKOFF_MAX_S. Termination: SIGTERM to the container's process group, SIGKILL after
  the grace period (shortened to at most GRACE_MAX_S).
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from tests.journey import images

BACKOFF_S = 1.0
BACKOFF_MAX_S = 8.0
GRACE_MAX_S = 10.0
MOUNTPOINT_DRIVER = "s3.csi.aws.com"


def api_time(when: float | None = None) -> str:
    """An API timestamp: RFC 3339, whole seconds (what the API server keeps)."""
    return datetime.fromtimestamp(time.time() if when is None else when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def log_time(when: float | None = None) -> str:
    """A `kubectl logs --timestamps` stamp: RFC 3339 with nanoseconds."""
    t = time.time() if when is None else when
    whole = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{whole}.{int((t % 1) * 1e9):09d}Z"


def path_rewriter(table: Mapping[str, str]) -> Callable[[str], str]:
    """Replace each whole-path prefix of `table` (container path -> host path) in a string, longest first."""
    if not table:
        return lambda text: text
    keys = sorted(table, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w./-])(" + "|".join(re.escape(k) for k in keys) + r")(?=$|[/\s\"',:;=)\]}])")
    return lambda text: pattern.sub(lambda m: table[m.group(1)], text)


class Host(Protocol):
    """What a pod needs of the world around it."""

    images_dir: Path
    hidden: tuple[Path, ...]  # the deployer's folders, which a pod on another machine cannot see

    def lookup(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None: ...

    def bucket_view(self, bucket: str) -> Path: ...

    def pod_env(self) -> dict[str, str]: ...

    def update_pod(self, name: str, change: Callable[[dict[str, Any]], None]) -> None: ...

    def event(self, pod: Mapping[str, Any], reason: str, message: str, kind: str = "Normal") -> None: ...


class PodFailure(Exception):
    """The pod cannot start as specified (a volume or image the journey cannot provide): the sentence says which."""


@dataclass
class ContainerRun:
    name: str
    log: Path | None = None
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0


@dataclass
class PodRun:
    """Run one pod's containers in a thread; `stop()` terminates them. Status goes to the host as it changes."""

    host: Host
    pod: dict[str, Any]
    folder: Path
    ip: str
    stopping: threading.Event = field(default_factory=threading.Event)
    containers: dict[str, ContainerRun] = field(default_factory=dict)
    thread: threading.Thread | None = None
    ended: threading.Event = field(default_factory=threading.Event)

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"]["namespace"])

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=f"pod-{self.name}", daemon=True)
        self.thread.start()

    def stop(self, grace_s: float) -> None:
        """SIGTERM every running container's process group, SIGKILL what is left after the grace period."""
        self.stopping.set()
        running = [c.process for c in self.containers.values() if c.process and c.process.poll() is None]
        for proc in running:
            _signal(proc, signal.SIGTERM)
        deadline = time.monotonic() + min(grace_s, GRACE_MAX_S)
        for proc in running:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal(proc, signal.SIGKILL)
                proc.wait()
        if self.thread is not None:
            self.thread.join(timeout=GRACE_MAX_S)

    # --- volumes ---------------------------------------------------------------------------------------------

    def _volumes(self) -> dict[str, Path]:
        out: dict[str, Path] = {}
        for volume in self.pod["spec"].get("volumes", []):
            name = volume["name"]
            target = self.folder / "volumes" / name
            if "configMap" in volume:
                out[name] = self._config_map(volume["configMap"], target)
            elif "emptyDir" in volume:
                target.mkdir(parents=True, exist_ok=True)
                out[name] = target
            elif "persistentVolumeClaim" in volume:
                out[name] = self._claim(volume["persistentVolumeClaim"]["claimName"])
            else:
                raise PodFailure(f"volume {name} ({', '.join(k for k in volume if k != 'name')}) is not emulated")
        return out

    def _config_map(self, source: Mapping[str, Any], target: Path) -> Path:
        found = self.host.lookup("ConfigMap", self.namespace, source["name"])
        if found is None:
            raise PodFailure(f'configmap "{source["name"]}" not found')
        files = {k: v.encode() for k, v in (found.get("data") or {}).items()}
        files |= {k: base64.b64decode(v) for k, v in (found.get("binaryData") or {}).items()}
        items = source.get("items")
        wanted = {i["key"]: i["path"] for i in items} if items else {k: k for k in files}
        for key, rel in wanted.items():
            if key not in files:
                raise PodFailure(f'configmap "{source["name"]}" has no key {key}')
            path = target / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(files[key])
        _read_only(target)
        return target

    def _claim(self, claim: str) -> Path:
        pvc = self.host.lookup("PersistentVolumeClaim", self.namespace, claim)
        pv = self.host.lookup("PersistentVolume", "", (pvc or {}).get("spec", {}).get("volumeName", ""))
        csi = (pv or {}).get("spec", {}).get("csi", {})
        if csi.get("driver") != MOUNTPOINT_DRIVER:
            raise PodFailure(f"persistentvolumeclaim {claim}: only Mountpoint for S3 ({MOUNTPOINT_DRIVER}) is emulated")
        return self.host.bucket_view(csi["volumeAttributes"]["bucketName"])

    # --- containers ------------------------------------------------------------------------------------------

    def _command(self, spec: Mapping[str, Any], volumes: Mapping[str, Path]) -> tuple[list[str], dict[str, str]]:
        mounts = spec.get("volumeMounts", [])
        table = {m["mountPath"]: str(volumes[m["name"]]) for m in mounts}
        read_only = [str(volumes[m["name"]]) for m in mounts if m.get("readOnly") or self._always_read_only(m["name"])]
        rootfs = self.folder / "rootfs"
        (rootfs / "tmp").mkdir(parents=True, exist_ok=True)
        (rootfs / "root").mkdir(exist_ok=True)
        table.setdefault("/tmp", str(rootfs / "tmp"))
        rewrite = path_rewriter(table)
        argv = [rewrite(a) for a in [*spec.get("command", []), *spec.get("args", [])]]
        if not argv:
            raise PodFailure(f"container {spec['name']} has no command: image entrypoints are not emulated")
        image = images.image_for(spec["image"])
        env = {
            "PATH": f"{images.install(self.host.images_dir, image)}{os.pathsep}/usr/bin{os.pathsep}/bin",
            "HOME": str(rootfs / "root"),
            "HOSTNAME": self.name,
            "LANG": "C.UTF-8",
            **self.host.pod_env(),
            "JOURNEY_POD_IP": self.ip,
            "JOURNEY_POD_DIR": str(self.folder),
            "JOURNEY_READ_ONLY": os.pathsep.join(read_only),
            "JOURNEY_HIDDEN": os.pathsep.join(str(p) for p in self.host.hidden),
            "JOURNEY_IMAGE": os.pathsep.join(str(p) for p in images.visible()),
        }
        for var in spec.get("env", []):
            if "value" in var:
                env[var["name"]] = rewrite(str(var["value"]))
            elif ref := var.get("valueFrom", {}).get("secretKeyRef"):
                secret = self.host.lookup("Secret", self.namespace, ref["name"])
                if secret is None and ref.get("optional"):
                    continue
                if secret is None or ref["key"] not in secret.get("data", {}):
                    raise PodFailure(f'secret "{ref["name"]}" (key {ref["key"]}) not found')
                env[var["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
            else:
                raise PodFailure(f"env {var['name']}: only value and secretKeyRef are emulated")
        return argv, env

    def _always_read_only(self, volume: str) -> bool:
        """ConfigMap volumes are read-only whatever the mount says (kubernetes.io, "Volumes", configMap)."""
        return any(v["name"] == volume and "configMap" in v for v in self.pod["spec"].get("volumes", []))

    def _run_container(self, spec: Mapping[str, Any], volumes: Mapping[str, Path], status_key: str) -> int:
        run = self.containers.setdefault(spec["name"], ContainerRun(spec["name"]))
        argv, env = self._command(spec, volumes)
        run.log = self.folder / "logs" / f"{spec['name']}.{run.restarts}.log"
        run.log.parent.mkdir(parents=True, exist_ok=True)
        started = time.time()
        self._set_state(status_key, spec, {"running": {"startedAt": api_time(started)}}, run)
        self.host.event(self.pod, "Started", f"Started container {spec['name']}")
        with run.log.open("w") as out:
            run.process = subprocess.Popen(
                argv,
                cwd=self.folder / "rootfs",
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            assert run.process.stdout is not None
            for line in iter(run.process.stdout.readline, b""):
                out.write(f"{log_time()} {line.decode(errors='replace').rstrip()}\n")
                out.flush()
            code = run.process.wait()
        code = 128 - code if code < 0 else code
        terminated = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": api_time(started),
            "finishedAt": api_time(),
        }
        self._set_state(status_key, spec, {"terminated": terminated}, run)
        return code

    def _set_state(self, key: str, spec: Mapping[str, Any], state: dict[str, Any], run: ContainerRun) -> None:
        def change(pod: dict[str, Any]) -> None:
            statuses = pod["status"].setdefault(key, [])
            current = next((s for s in statuses if s["name"] == spec["name"]), None)
            if current is None:
                current = {"name": spec["name"], "image": spec["image"], "ready": False, "restartCount": 0}
                statuses.append(current)
            if "running" in state and "terminated" in current.get("state", {}):
                current["lastState"] = {"terminated": current["state"]["terminated"]}
            current["state"] = state
            current["restartCount"] = run.restarts
            current["started"] = "running" in state
            if "running" not in state:
                current["ready"] = False

        self.host.update_pod(self.name, change)

    def _backoff(self, spec: Mapping[str, Any], key: str, run: ContainerRun) -> bool:
        """Wait out the restart back-off; False when the pod is being stopped meanwhile."""
        run.restarts += 1
        delay = min(BACKOFF_S * 2 ** (run.restarts - 1), BACKOFF_MAX_S)
        message = f"back-off {delay:g}s restarting failed container={spec['name']} pod={self.name}"

        def waiting(pod: dict[str, Any]) -> None:
            for s in pod["status"].get(key, []):
                if s["name"] == spec["name"]:
                    if "terminated" in s.get("state", {}):
                        s["lastState"] = {"terminated": s["state"]["terminated"]}
                    s["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
                    s["restartCount"] = run.restarts

        self.host.update_pod(self.name, waiting)
        self.host.event(self.pod, "BackOff", message, "Warning")
        return not self.stopping.wait(delay)

    def _run(self) -> None:
        try:
            volumes = self._volumes()
            for spec in [*self.pod["spec"].get("initContainers", []), *self.pod["spec"]["containers"]]:
                self._command(spec, volumes)  # an image or env the journey cannot provide fails before anything runs
        except (PodFailure, LookupError) as err:
            message = str(err)
            self.host.event(self.pod, "Failed", f"Error: {message}", "Warning")
            self.host.update_pod(
                self.name, lambda p: p["status"].update(phase="Failed", reason="CreateContainerError", message=message)
            )
            self.ended.set()
            return
        never = self.pod["spec"].get("restartPolicy", "Always") == "Never"
        for spec in self.pod["spec"].get("initContainers", []):
            while not self.stopping.is_set():
                if self._run_container(spec, volumes, "initContainerStatuses") == 0:
                    break
                if never or self.stopping.is_set():
                    self._finish("Failed")
                    return
                if not self._backoff(spec, "initContainerStatuses", self.containers[spec["name"]]):
                    break
        if self.stopping.is_set():
            self.ended.set()
            return
        self.host.update_pod(
            self.name, lambda p: (_condition(p, "Initialized", True), p["status"].update(phase="Running"))
        )
        codes: dict[str, int] = {}
        threads = [
            threading.Thread(target=self._main_container, args=(spec, volumes, never, codes), daemon=True)
            for spec in self.pod["spec"]["containers"]
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self._finish("Succeeded" if codes and all(c == 0 for c in codes.values()) else "Failed")

    def _main_container(self, spec: Mapping[str, Any], volumes: Mapping[str, Path], never: bool, codes: dict) -> None:
        while not self.stopping.is_set():
            codes[spec["name"]] = self._run_container(spec, volumes, "containerStatuses")
            if never or self.stopping.is_set():
                return
            if not self._backoff(spec, "containerStatuses", self.containers[spec["name"]]):
                return

    def _finish(self, phase: str) -> None:
        def ended(pod: dict[str, Any]) -> None:
            pod["status"]["phase"] = phase
            _condition(pod, "ContainersReady", False)
            _condition(pod, "Ready", False)

        if not self.stopping.is_set():
            self.host.update_pod(self.name, ended)
        self.ended.set()


def _condition(pod: dict[str, Any], kind: str, value: bool, message: str | None = None) -> None:
    """Set a pod condition, moving its lastTransitionTime only when its status changes."""
    conditions = pod["status"].setdefault("conditions", [])
    status = "True" if value else "False"
    current = next((c for c in conditions if c["type"] == kind), None)
    if current is None:
        current = {"type": kind}
        conditions.append(current)
    if current.get("status") != status:
        current["lastTransitionTime"] = api_time()
    current["status"] = status
    if message:
        current["message"] = message
    else:
        current.pop("message", None)


set_condition = _condition


def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def _read_only(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        path.chmod(0o555 if path.is_dir() else 0o444)
    root.chmod(0o555)


def make_writable(root: Path) -> None:
    """Undo _read_only before the world removes its folder."""
    if not root.exists():
        return
    for path in [root, *root.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
