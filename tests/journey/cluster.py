"""The fake cluster: its API (what the fake kubectl asks, tests/journey/kubectl.py) and the controllers that act on
it, in one object guarded by one lock. Each behaviour imitated, and where it comes from:

- Jobs (kubernetes.io, "Jobs"): a Job creates a pod from its template; a failed pod is replaced until
  spec.backoffLimit failures, then the Job gets condition Failed; a succeeded pod gives Complete. A Job's pod template
  is immutable: applying a different one over an existing Job is refused (the API's "field is immutable").
- Deployments: spec.replicas pods from the template; a changed template replaces the old pods (the pod template hash,
  as a ReplicaSet's `pod-template-hash` label).
- KEDA v2.20.2 (kedacore/keda pkg/scaling/executor/scale_scaledobjects.go), at each reconcile: a ScaledObject
  annotated `autoscaling.keda.sh/paused-replicas` holds its target at that count (:53-55 and the controller's scale
  to it); otherwise a target below minReplicaCount goes back to the minimum (:70-73, :101-108). Scaling on the
  Prometheus triggers is not imitated (the journey's load never asks for a second replica).
- Scheduling: a pod goes to a node whose labels match its nodeSelector and whose taints it tolerates, with enough
  free Neuron devices for its DRA claims (the count its ResourceClaimTemplate requests; 16 per trn2.48xlarge); else
  it stays Pending with PodScheduled False (the scheduler's "cannot allocate all claims"). The Cluster Autoscaler
  then adds a trn2 node up to trn2_nodes.max_size and records `TriggeredScaleUp` on the pod (CA FAQ, "What events are
  emitted by CA?"); the node is Ready NODE_READY_S later (on AWS: minutes, trn2_nodes.node_ready_seconds).
- The kubelet: runs each scheduled pod (tests/journey/pods.py), probes readiness with the containers' httpGet
  readinessProbe every PROBE_S (the manifests' periods are 5-30 s; shortened), sets the Ready condition, records
  events (Scheduled, Pulled "already present on machine": the images are the local interpreter, Started, BackOff,
  Killing) and keeps each container's log. A deleted pod is Terminating (still listed) until its containers ended.
- The API's answers: `get ... -o json` objects as the API returns them (metadata, spec, status; timestamps in whole
  seconds), `NotFound` errors as kubectl prints them. One liberty, a watch in place of a poll: a `get job` waits
  until the Job has finished, at most JOB_WAIT_S (inside the --request-timeout=20s ops/kubectl.py passes), so the
  drivers' 15-20 s poll sees a fast Job's end at once. kubectl commands the journey does not imitate fail with a
  sentence naming them.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
import time
import traceback
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.journey.network import Addresses, ClusterDns, KubeProxy
from tests.journey.pods import PodRun, api_time, set_condition

PAUSED = "autoscaling.keda.sh/paused-replicas"  # KEDA v2.20.2 apis/keda/v1alpha1/scaledobject_types.go:58
RECONCILE_S = 0.2
PROBE_S = 0.5
NODE_READY_S = 2.0
JOB_WAIT_S = 19.0
DEVICES_PER_NODE = 16  # trn2.48xlarge (config/catalogue.py)
NODE_ROLE = "trn-specdec/node-role"
CLUSTER_SCOPED = {"Namespace", "PersistentVolume", "Node"}
KINDS = {
    "job": "Job", "jobs": "Job", "job.batch": "Job",
    "pod": "Pod", "pods": "Pod", "po": "Pod",
    "node": "Node", "nodes": "Node",
    "event": "Event", "events": "Event",
    "deploy": "Deployment", "deployment": "Deployment", "deployments": "Deployment",
    "scaledobject": "ScaledObject", "scaledobjects": "ScaledObject", "so": "ScaledObject",
    "svc": "Service", "service": "Service", "services": "Service",
    "configmap": "ConfigMap", "configmaps": "ConfigMap", "cm": "ConfigMap",
    "secret": "Secret", "secrets": "Secret",
}  # fmt: skip
VALUE_FLAGS = {"-n", "--namespace", "-o", "--output", "-l", "--selector", "--field-selector", "-c", "--container"}


class KubectlError(Exception):
    """What kubectl would print on stderr before exiting 1."""


def _kind(word: str) -> str:
    kind = KINDS.get(word.lower())
    if kind is None:
        raise KubectlError(f'error: the server doesn\'t have a resource type "{word}" (journey cluster)')
    return kind


def _labels_match(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _parse_selector(text: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in text.split(",") if part)


class Args:
    """kubectl's command line: the verb, its words, and the flags the drivers use."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.flags: dict[str, str] = {}
        self.words: list[str] = []
        verb_seen = None
        i = 0
        while i < len(argv):
            a = argv[i]
            if a.startswith("--") and "=" in a:
                key, _, value = a.partition("=")
                self.flags[key] = value
            elif a in VALUE_FLAGS or (a == "-f" and verb_seen == "apply"):
                self.flags[a] = argv[i + 1]
                i += 1
            elif a.startswith("-"):
                self.flags[a] = ""
            else:
                verb_seen = verb_seen or a
                self.words.append(a)
            i += 1
        self.verb = self.words[0] if self.words else ""
        self.namespace = self.flags.get("-n") or self.flags.get("--namespace") or "default"

    def flag(self, *names: str) -> str | None:
        return next((self.flags[n] for n in names if n in self.flags), None)


class Cluster:
    """The API objects, the controllers and the kubelet; every change under `lock`, waiters notified on `changed`."""

    def __init__(
        self,
        folder: Path,
        addresses: Addresses,
        *,
        host: Any,
        trn2_max_nodes: int,
        trn2_nodes: int,
        system_nodes: int,
    ) -> None:
        self.folder = folder
        self.addresses = addresses
        self.host = host  # the world: images_dir, bucket_view, pod_env (pods.Host)
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.runs: dict[str, PodRun] = {}
        self.calls: list[list[str]] = []
        self.trn2_max_nodes = trn2_max_nodes
        self.dns = ClusterDns().__enter__()
        self.proxy = KubeProxy()
        self._stop = threading.Event()
        self._counter = 0
        with self.lock:
            for i in range(system_nodes):
                self._add_node(f"system-{i}", "system")
            for i in range(trn2_nodes):
                self._add_node(f"trn2-{i}", "trn2")
        self._thread = threading.Thread(target=self._loop, name="controllers", daemon=True)
        self._thread.start()

    # --- objects ---------------------------------------------------------------------------------------------

    def _key(self, kind: str, namespace: str, name: str) -> tuple[str, str, str]:
        return (kind, "" if kind in CLUSTER_SCOPED else namespace, name)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            return self.objects.get(self._key(kind, namespace, name))

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return [o for (k, ns, _), o in self.objects.items() if k == kind and namespace in (None, ns, "")]

    def _new_meta(self, obj: dict[str, Any], namespace: str) -> None:
        meta = obj.setdefault("metadata", {})
        if obj["kind"] not in CLUSTER_SCOPED:
            meta.setdefault("namespace", namespace)
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", api_time())
        meta.setdefault("labels", {})
        meta.setdefault("annotations", {})

    def _put(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.objects[self._key(obj["kind"], meta.get("namespace", ""), meta["name"])] = obj
        self.changed.notify_all()

    def _add_node(self, name: str, role: str, ready_at: float | None = None) -> None:
        labels = {NODE_ROLE: role, "kubernetes.io/hostname": name}
        taints = [{"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"}] if role == "trn2" else []
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints},
            "status": {"conditions": []},
            "journey": {"devices": DEVICES_PER_NODE if role == "trn2" else 0, "ready_at": ready_at or time.time()},
        }
        self._new_meta(node, "")
        if ready_at is None:
            node["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": api_time()}]
        self._put(node)

    def event(self, obj: Mapping[str, Any], reason: str, message: str, kind: str = "Normal") -> None:
        with self.lock:
            meta = obj["metadata"]
            self._counter += 1
            now = api_time()
            self.events.append(
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": f"{meta['name']}.{self._counter}", "namespace": meta.get("namespace", ""),
                                 "creationTimestamp": now},
                    "involvedObject": {"kind": obj["kind"], "name": meta["name"], "namespace": meta.get("namespace", ""),
                                       "uid": meta.get("uid")},
                    "reason": reason,
                    "message": message,
                    "type": kind,
                    "firstTimestamp": now,
                    "lastTimestamp": now,
                    "count": 1,
                }
            )  # fmt: skip

    def update_pod(self, name: str, change: Callable[[dict[str, Any]], None]) -> None:
        with self.lock:
            pod = next((p for p in self.list("Pod") if p["metadata"]["name"] == name), None)
            if pod is not None:
                change(pod)
                self.changed.notify_all()

    # --- kubectl -----------------------------------------------------------------------------------------------

    def kubectl(self, argv: list[str], stdin: str = "") -> tuple[int, str, str]:
        """One kubectl invocation: (exit code, stdout, stderr)."""
        with self.lock:
            self.calls.append(list(argv))
        args = Args(argv)
        handlers: dict[str, Callable[[Args, str], str]] = {
            "apply": self._apply,
            "get": self._get,
            "delete": self._delete,
            "scale": self._scale,
            "annotate": self._annotate,
            "logs": self._logs,
            "journey-follow": self._follow,
            "journey-resolve": self._resolve,
        }
        handler = handlers.get(args.verb)
        try:
            if handler is None:
                raise KubectlError(f"error: the journey's kubectl does not imitate `kubectl {' '.join(argv)}`")
            return 0, handler(args, stdin), ""
        except KubectlError as err:
            return 1, "", str(err) + "\n"

    def _apply(self, args: Args, stdin: str) -> str:
        if args.flag("-f") != "-":
            raise KubectlError("error: the journey's kubectl applies only from stdin (-f -)")
        lines = []
        with self.lock:
            for doc in yaml.safe_load_all(stdin):
                if doc:
                    lines.append(self.apply_object(doc, args.namespace))
        return "".join(line + "\n" for line in lines)

    def apply_object(self, doc: dict[str, Any], namespace: str) -> str:
        """Create or update one object; returns kubectl's line for it."""
        with self.lock:
            obj = copy.deepcopy(doc)
            kind, name = obj["kind"], obj["metadata"]["name"]
            ns = obj["metadata"].get("namespace") or namespace
            what = f"{kind.lower()}{'.batch' if kind == 'Job' else ''}/{name}"
            current = self.get(kind, ns, name)
            if current is None:
                self._new_meta(obj, ns)
                if kind == "Service":
                    self._service_address(obj)
                obj.setdefault("status", {})
                self._put(obj)
                return f"{what} created"
            if kind == "Job":
                if current["spec"]["template"] != obj["spec"]["template"]:
                    raise KubectlError(f'The Job "{name}" is invalid: spec.template: Invalid value: field is immutable')
                return f"{what} unchanged"
            kept = {
                k: current["metadata"][k] for k in ("uid", "creationTimestamp", "namespace") if k in current["metadata"]
            }
            unchanged = all(current.get(k) == obj.get(k) for k in obj if k not in ("metadata", "status"))
            if kind == "Service":
                obj["spec"]["clusterIP"] = current["spec"].get("clusterIP")
            obj["metadata"] = {**obj["metadata"], **kept}
            obj.setdefault("metadata", {}).setdefault("annotations", {})
            obj["status"] = current.get("status", {})
            self._put(obj)
            return f"{what} {'unchanged' if unchanged else 'configured'}"

    def _service_address(self, service: dict[str, Any]) -> None:
        spec = service.setdefault("spec", {})
        if spec.get("clusterIP") == "None":
            return
        spec["clusterIP"] = self.addresses.service()
        for port in spec.get("ports", []):
            self.proxy.listen(spec["clusterIP"], int(port["port"]), lambda s=service, p=port: self._endpoints(s, p))

    def _endpoints(self, service: Mapping[str, Any], port: Mapping[str, Any]) -> list[tuple[str, int]]:
        """The Ready pods behind a Service port: (pod address, target port)."""
        with self.lock:
            out = []
            for pod in self._service_pods(service):
                target = port.get("targetPort", port["port"])
                if isinstance(target, str):
                    found = [
                        p["containerPort"]
                        for c in pod["spec"]["containers"]
                        for p in c.get("ports", [])
                        if p.get("name") == target
                    ]
                    if not found:
                        continue
                    target = found[0]
                out.append((pod["status"]["podIP"], int(target)))
            return out

    def _service_pods(self, service: Mapping[str, Any]) -> list[dict[str, Any]]:
        selector = service["spec"].get("selector") or {}
        ns = service["metadata"]["namespace"]
        return [
            p
            for p in self.list("Pod", ns)
            if selector
            and _labels_match(p["metadata"].get("labels", {}), selector)
            and _is_ready(p)
            and "deletionTimestamp" not in p["metadata"]
        ]

    def _job_finished(self, job: Mapping[str, Any]) -> bool:
        return any(c["status"] == "True" for c in job.get("status", {}).get("conditions", []))

    def _get(self, args: Args, _: str) -> str:
        if len(args.words) < 2:
            raise KubectlError("error: You must specify the type of resource to get")
        kind = _kind(args.words[1])
        if args.flag("-o", "--output") != "json":
            raise KubectlError("error: the journey's kubectl answers `get` only with -o json")
        if len(args.words) > 2:
            name = args.words[2]
            deadline = time.monotonic() + JOB_WAIT_S
            with self.lock:
                while True:
                    found = self.get(kind, args.namespace, name)
                    if found is None:
                        group = ".batch" if kind == "Job" else ""
                        raise KubectlError(f'Error from server (NotFound): {kind.lower()}s{group} "{name}" not found')
                    waited = deadline - time.monotonic()
                    if kind != "Job" or self._job_finished(found) or waited <= 0:
                        return json.dumps(_public(found))
                    self.changed.wait(min(waited, 1.0))
        with self.lock:
            if kind == "Event":
                selector = args.flag("--field-selector") or ""
                want = _parse_selector(selector).get("involvedObject.kind")
                items = [e for e in self.events if e["metadata"]["namespace"] == args.namespace]
                items = [e for e in items if want is None or e["involvedObject"]["kind"] == want]
            else:
                selector = _parse_selector(args.flag("-l", "--selector") or "")
                items = [
                    o
                    for o in self.list(kind, None if kind in CLUSTER_SCOPED else args.namespace)
                    if _labels_match(o["metadata"].get("labels", {}), selector)
                ]
            return json.dumps({"apiVersion": "v1", "kind": "List", "items": [_public(o) for o in items]})

    def _delete(self, args: Args, _: str) -> str:
        kind, name = _kind(args.words[1]), args.words[2]
        with self.lock:
            found = self.get(kind, args.namespace, name)
            if found is None:
                raise KubectlError(f'Error from server (NotFound): {kind.lower()}s "{name}" not found')
            if kind == "Job":
                for pod in self._owned("Job", found):
                    self._terminate(pod)
        deadline = time.monotonic() + JOB_WAIT_S
        with self.lock:  # --cascade=foreground --wait=true: gone once its pods are
            while kind == "Job" and self._owned("Job", found) and time.monotonic() < deadline:
                self.changed.wait(0.5)
            del self.objects[self._key(kind, args.namespace, name)]
            self.changed.notify_all()
        return f'{kind.lower()}{".batch" if kind == "Job" else ""} "{name}" deleted\n'

    def _scale(self, args: Args, _: str) -> str:
        kind, _, name = args.words[1].partition("/")
        replicas = args.flag("--replicas")
        with self.lock:
            target = self.get(_kind(kind), args.namespace, name)
            if target is None or replicas is None:
                raise KubectlError(f'Error from server (NotFound): deployments.apps "{name}" not found')
            target["spec"]["replicas"] = int(replicas)
            self.changed.notify_all()
        return f"deployment.apps/{name} scaled\n"

    def _annotate(self, args: Args, _: str) -> str:
        kind, _, name = args.words[1].partition("/")
        with self.lock:
            target = self.get(_kind(kind), args.namespace, name)
            if target is None:
                raise KubectlError(f'Error from server (NotFound): {kind}s "{name}" not found')
            annotations = target["metadata"].setdefault("annotations", {})
            for change in args.words[2:]:
                if change.endswith("-"):
                    annotations.pop(change[:-1], None)
                else:
                    key, _, value = change.partition("=")
                    if key in annotations and annotations[key] != value and "--overwrite" not in args.flags:
                        raise KubectlError(
                            f"error: --overwrite is false but found the following declared annotation(s): '{key}' already has a value"
                        )
                    annotations[key] = value
            self.changed.notify_all()
        return f"{kind}/{name} annotated\n"

    def _log_file(self, args: Args) -> tuple[Path, bool]:
        """The log of the named pod's container (job/NAME: the Job's newest pod, its only container)."""
        target = args.words[1]
        with self.lock:
            if target.startswith("job/"):
                job = self.get("Job", args.namespace, target[4:])
                pods = self._owned("Job", job) if job else []
                if not pods:
                    raise KubectlError(f"error: timed out waiting for the condition on jobs/{target[4:]}")
                pod = max(pods, key=lambda p: p["metadata"]["creationTimestamp"] + p["metadata"]["name"])
            else:
                pod = self.get("Pod", args.namespace, target)
                if pod is None:
                    raise KubectlError(f'Error from server (NotFound): pods "{target}" not found')
            container = args.flag("-c", "--container") or pod["spec"]["containers"][0]["name"]
            run = self.runs.get(pod["metadata"]["name"])
            log = run.containers.get(container).log if run and run.containers.get(container) else None
            if log is None or not log.exists():
                raise KubectlError(
                    f'error: container "{container}" in pod "{pod["metadata"]["name"]}" is waiting to start'
                )
            return log, bool(run and run.ended.is_set())

    def _logs(self, args: Args, _: str) -> str:
        log, _ = self._log_file(args)
        text = log.read_text(errors="replace")
        if "--timestamps" not in args.flags:
            text = "".join(line.partition(" ")[2] + "\n" for line in text.splitlines())
        limit = args.flag("--limit-bytes")
        return text[: int(limit)] if limit else text

    def _follow(self, args: Args, _: str) -> str:
        """`logs -f` for the client: {"text": what follows --offset, "done": the pod has ended}."""
        log, done = self._log_file(args)
        data = log.read_bytes()[int(args.flag("--offset") or 0) :]
        return json.dumps({"text": data.decode(errors="replace"), "done": done, "size": len(data)})

    def _resolve(self, args: Args, _: str) -> str:
        """For `port-forward svc/NAME PORT`: the Service's ClusterIP and port (kube-proxy forwards from there)."""
        kind, _, name = args.words[1].partition("/")
        service = self.get(_kind(kind), args.namespace, name)
        if service is None:
            raise KubectlError(f'Error from server (NotFound): services "{name}" not found')
        return json.dumps({"host": service["spec"]["clusterIP"], "port": int(args.words[2])})

    # --- controllers -------------------------------------------------------------------------------------------

    def _owned(self, kind: str, owner: Mapping[str, Any] | None) -> list[dict[str, Any]]:
        if owner is None:
            return []
        uid = owner["metadata"]["uid"]
        return [
            p
            for p in self.list("Pod", owner["metadata"]["namespace"])
            if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences", []))
        ]

    def _loop(self) -> None:
        """Every RECONCILE_S, each controller once; a controller's exception is logged and the loop goes on (a
        real controller manager keeps running too), so the step waiting on it fails with the pods' state."""
        probed = 0.0
        while not self._stop.wait(RECONCILE_S):
            try:
                with self.lock:
                    self._keda()
                    self._deployments()
                    self._jobs()
                    self._nodes()
                    self._schedule()
                    self._kubelet()
                    self._dns()
                if time.monotonic() - probed >= PROBE_S:
                    probed = time.monotonic()
                    self._probe()
            except Exception:
                with (self.folder / "controllers.log").open("a") as log:
                    log.write(traceback.format_exc())

    def _keda(self) -> None:
        for so in self.list("ScaledObject"):
            target = self.get("Deployment", so["metadata"]["namespace"], so["spec"]["scaleTargetRef"]["name"])
            if target is None:
                continue
            paused = so["metadata"].get("annotations", {}).get(PAUSED)
            spec = target["spec"]
            if paused is not None:
                spec["replicas"] = int(paused)
            elif spec.get("replicas", 1) < so["spec"].get("minReplicaCount", 0):
                spec["replicas"] = so["spec"]["minReplicaCount"]

    def _new_pod(self, owner: Mapping[str, Any], template: Mapping[str, Any], suffix: str, labels: dict) -> None:
        ns = owner["metadata"]["namespace"]
        name = f"{owner['metadata']['name']}-{suffix}-{uuid.uuid4().hex[:5]}"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": {**template.get("metadata", {}).get("labels", {}), **labels},
                "annotations": dict(template.get("metadata", {}).get("annotations", {})),
                "ownerReferences": [
                    {"kind": owner["kind"], "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}
                ],
            },
            "spec": copy.deepcopy(template["spec"]),
            "status": {"phase": "Pending", "conditions": []},
        }
        self._new_meta(pod, ns)
        self._put(pod)

    def _deployments(self) -> None:
        for deploy in self.list("Deployment"):
            template = deploy["spec"]["template"]
            digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]
            pods = [p for p in self._owned("Deployment", deploy) if "deletionTimestamp" not in p["metadata"]]
            for pod in pods:
                if pod["metadata"]["labels"].get("pod-template-hash") != digest:
                    self._terminate(pod)
            current = sorted(
                (p for p in pods if p["metadata"]["labels"].get("pod-template-hash") == digest),
                key=lambda p: p["metadata"]["creationTimestamp"],
            )
            want = int(deploy["spec"].get("replicas", 1))
            for pod in current[want:]:
                self._terminate(pod)
            for _ in range(want - len(current)):
                self._new_pod(deploy, template, digest, {"pod-template-hash": digest})
            deploy["status"] = {"replicas": min(len(current), want), "readyReplicas": sum(map(_is_ready, current))}

    def _jobs(self) -> None:
        for job in self.list("Job"):
            if self._job_finished(job):
                continue
            pods = self._owned("Job", job)
            status = job.setdefault("status", {})
            status.setdefault("startTime", api_time())
            succeeded = sum(p["status"].get("phase") == "Succeeded" for p in pods)
            failed = sum(p["status"].get("phase") == "Failed" for p in pods)
            active = sum(p["status"].get("phase") not in ("Succeeded", "Failed") for p in pods)
            status.update(active=active, succeeded=succeeded, failed=failed)
            if not active:
                status.pop("active")
            if succeeded:
                status["completionTime"] = api_time()
                status["conditions"] = [{"type": "Complete", "status": "True", "lastTransitionTime": api_time()}]
            elif failed > int(job["spec"].get("backoffLimit", 6)):
                status["conditions"] = [
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": "BackoffLimitExceeded",
                        "lastTransitionTime": api_time(),
                    }
                ]
            elif not active:
                self._new_pod(job, job["spec"]["template"], "job", {"job-name": job["metadata"]["name"]})
            self.changed.notify_all()

    def _nodes(self) -> None:
        for node in self.list("Node"):
            if not node["status"]["conditions"] and time.time() >= node["journey"]["ready_at"]:
                node["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": api_time()}]

    def _devices(self, pod: Mapping[str, Any]) -> int:
        total = 0
        for claim in pod["spec"].get("resourceClaims", []):
            template = self.get(
                "ResourceClaimTemplate", pod["metadata"]["namespace"], claim.get("resourceClaimTemplateName", "")
            )
            if template is None:
                continue
            requests = template["spec"]["spec"]["devices"]["requests"]
            total += sum(int(r.get("exactly", r).get("count", 1)) for r in requests)
        return total

    def _fits(self, pod: Mapping[str, Any], node: Mapping[str, Any], need: int) -> bool:
        if not node["status"]["conditions"]:
            return False
        if not _labels_match(node["metadata"]["labels"], pod["spec"].get("nodeSelector", {})):
            return False
        tolerated = {(t.get("key"), t.get("value"), t.get("effect")) for t in pod["spec"].get("tolerations", [])}
        if any((t["key"], t["value"], t["effect"]) not in tolerated for t in node["spec"]["taints"]):
            return False
        used = sum(
            self._devices(p)
            for p in self.list("Pod")
            if p["spec"].get("nodeName") == node["metadata"]["name"]
            and p["status"].get("phase") not in ("Succeeded", "Failed")
        )
        return used + need <= node["journey"]["devices"]

    def _schedule(self) -> None:
        for pod in self.list("Pod"):
            if pod["spec"].get("nodeName") or "deletionTimestamp" in pod["metadata"]:
                continue
            need = self._devices(pod)
            node = next((n for n in self.list("Node") if self._fits(pod, n, need)), None)
            if node is None:
                why = "0/{} nodes are available: cannot allocate all claims".format(len(self.list("Node")))
                first = not any(c["type"] == "PodScheduled" for c in pod["status"]["conditions"])
                set_condition(pod, "PodScheduled", False, why)
                if first:
                    self.event(pod, "FailedScheduling", why, "Warning")
                    self._scale_up(pod)
                continue
            pod["spec"]["nodeName"] = node["metadata"]["name"]
            pod["status"]["podIP"] = self.addresses.pod()
            set_condition(pod, "PodScheduled", True)
            self.event(
                pod,
                "Scheduled",
                f"Successfully assigned {pod['metadata']['namespace']}/{pod['metadata']['name']} to {node['metadata']['name']}",
            )

    def _scale_up(self, pod: Mapping[str, Any]) -> None:
        """The Cluster Autoscaler: a trn2 node for a pod that asks for the trn2 role, up to the group's maximum."""
        if pod["spec"].get("nodeSelector", {}).get(NODE_ROLE) != "trn2":
            return
        trn2 = [n for n in self.list("Node") if n["metadata"]["labels"][NODE_ROLE] == "trn2"]
        if len(trn2) >= self.trn2_max_nodes:
            return
        name = f"trn2-{len(trn2)}"
        self.event(
            pod,
            "TriggeredScaleUp",
            f"pod triggered scale-up: [{{trn2 {len(trn2)}->{len(trn2) + 1} (max: {self.trn2_max_nodes})}}]",
        )
        self._add_node(name, "trn2", ready_at=time.time() + NODE_READY_S)

    def _kubelet(self) -> None:
        for pod in self.list("Pod"):
            name = pod["metadata"]["name"]
            if pod["spec"].get("nodeName") and name not in self.runs and "deletionTimestamp" not in pod["metadata"]:
                for container in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]:
                    self.event(pod, "Pulled", f'Container image "{container["image"]}" already present on machine')
                run = PodRun(self, pod, self.folder / "pods" / name, pod["status"]["podIP"])
                self.runs[name] = run
                run.start()
            if "deletionTimestamp" in pod["metadata"]:
                run = self.runs.get(name)
                if run is None or (run.ended.is_set() and not (run.thread and run.thread.is_alive())):
                    del self.objects[self._key("Pod", pod["metadata"]["namespace"], name)]
                    self.changed.notify_all()

    def _terminate(self, pod: dict[str, Any]) -> None:
        if "deletionTimestamp" in pod["metadata"]:
            return
        pod["metadata"]["deletionTimestamp"] = api_time()
        self.event(pod, "Killing", f"Stopping container {pod['spec']['containers'][0]['name']}")
        run = self.runs.get(pod["metadata"]["name"])
        if run is not None:
            grace = float(pod["spec"].get("terminationGracePeriodSeconds", 30))
            threading.Thread(target=lambda: (run.stop(grace), run.ended.set()), daemon=True).start()

    def _dns(self) -> None:
        records: dict[str, list[str]] = {}
        for service in self.list("Service"):
            meta, spec = service["metadata"], service["spec"]
            name = f"{meta['name']}.{meta['namespace']}.svc.cluster.local"
            if spec.get("clusterIP") == "None":
                records[name] = [p["status"]["podIP"] for p in self._service_pods(service)]
            else:
                records[name] = [spec["clusterIP"]]
        self.dns.set(records)

    def _probe(self) -> None:
        """Readiness: each container's httpGet probe (named ports through containerPorts) on the pod's address."""
        with self.lock:
            pods = [
                (p["metadata"]["name"], p["status"].get("podIP"), copy.deepcopy(p["spec"]["containers"]),
                 {s["name"]: s for s in p["status"].get("containerStatuses", [])})
                for p in self.list("Pod")
                if p["status"].get("phase") == "Running" and "deletionTimestamp" not in p["metadata"]
            ]  # fmt: skip
        for name, ip, containers, statuses in pods:
            ready = {}
            for c in containers:
                running = "running" in statuses.get(c["name"], {}).get("state", {})
                probe = c.get("readinessProbe", {}).get("httpGet")
                if not running or probe is None:
                    ready[c["name"]] = running
                    continue
                port = probe["port"]
                if isinstance(port, str):
                    port = next(p["containerPort"] for p in c.get("ports", []) if p.get("name") == port)
                try:
                    with urllib.request.urlopen(f"http://{ip}:{port}{probe.get('path', '/')}", timeout=1) as r:
                        ready[c["name"]] = 200 <= r.status < 400
                except OSError:
                    ready[c["name"]] = False

            def mark(pod: dict[str, Any], ready: dict[str, bool] = ready) -> None:
                for s in pod["status"].get("containerStatuses", []):
                    s["ready"] = ready.get(s["name"], False)
                every = bool(ready) and all(ready.values())
                set_condition(pod, "ContainersReady", every)
                set_condition(pod, "Ready", every)

            self.update_pod(name, mark)

    # --- the end -------------------------------------------------------------------------------------------------

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        with self.lock:
            runs = list(self.runs.values())
        for run in runs:
            run.stop(2.0)
        self.proxy.close()
        self.dns.__exit__()

    # --- pods.Host, for PodRun --------------------------------------------------------------------------------

    @property
    def images_dir(self) -> Path:
        return self.folder / "images"

    @property
    def hidden(self) -> tuple[Path, ...]:
        return tuple(self.host.hidden)

    def lookup(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        found = self.get(kind, namespace, name)
        return copy.deepcopy(found) if found else None

    def bucket_view(self, bucket: str) -> Path:
        return self.host.bucket_view(bucket)

    def pod_env(self) -> dict[str, str]:
        return {**self.host.pod_env(), "JOURNEY_DNS": f"127.0.0.1:{self.dns.port}"}


def _is_ready(pod: Mapping[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def _public(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An object as the API returns it (the fake's own bookkeeping left out)."""
    return {k: v for k, v in obj.items() if k != "journey"}
