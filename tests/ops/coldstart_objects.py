"""Kubernetes API objects of serving pods' cold starts, shaped as the API returns them (every field name and nesting
from the Kubernetes OpenAPI schema of the cluster's version; the tests validate each object with
kubernetes-validate, strict), plus their containers' logs as `kubectl logs --timestamps` prints them.

Times are seconds after T0, written as the API writes them (RFC 3339, whole seconds, Z); log lines carry
nanoseconds like the container runtime's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

T0 = datetime(2026, 11, 20, 9, 0, 0, tzinfo=UTC)
NAMESPACE = "trn-specdec"
IMAGE = "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.29.0.1.2.0-neuronx-py314-sdk2.33.0-ubuntu26.04"
IMAGE_ID = "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx@sha256:" + "ab" * 32
IMAGE_BYTES = 11_800_000_000


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=int(seconds))).strftime("%Y-%m-%dT%H:%M:%SZ")


def log_at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"


def node(name: str, ready_s: float) -> dict[str, Any]:
    def condition(kind: str, status: str, reason: str, message: str, when: float) -> dict[str, str]:
        return {
            "type": kind,
            "status": status,
            "lastHeartbeatTime": at(ready_s + 600),
            "lastTransitionTime": at(when),
            "reason": reason,
            "message": message,
        }

    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": "1001",
            "creationTimestamp": at(ready_s - 40),
            "labels": {
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": "trn2.48xlarge",
                "trn-specdec/node-role": "trn2",
            },
        },
        "spec": {
            "providerID": "aws:///us-east-2a/i-0123456789abcdef0",
            "taints": [{"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"}],
        },
        "status": {
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory", 0),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", 0),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available", 0),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", ready_s),
            ],
            "nodeInfo": {
                "machineID": "ec2" + "0" * 29,
                "systemUUID": "ec2" + "0" * 29,
                "bootID": "00000000-0000-0000-0000-000000000001",
                "kernelVersion": "6.12.40-63.114.amzn2023.x86_64",
                "osImage": "Amazon Linux 2023.9.20251110",
                "containerRuntimeVersion": "containerd://2.1.4",
                "kubeletVersion": "v1.35.0-eks-3025e55",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


@dataclass
class Timeline:
    """When each thing happened to one pod, in seconds after T0; None: it did not happen (yet)."""

    created: float
    scheduled: float | None
    pull: tuple[float, float] | None = None  # Pulling, Pulled events; None: no events were kept
    image_present: bool = False  # Pulled says the image was already on the node
    init: tuple[float, float] | None = None  # verify-artifact startedAt, finishedAt
    init_exit: int = 0
    init_restarts: int = 0
    check_end: float | None = None
    copied_bytes: int | None = None
    vllm_start: float | None = None
    vllm_restarts: int = 0
    vllm_waiting: str | None = None  # e.g. CrashLoopBackOff
    engine_ready: float | None = None
    compiled_s: float = 0.0
    ready: float | None = None
    evicted: bool = False


def pod(name: str, profile: str, node_name: str | None, t: Timeline) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "serviceAccountName": f"{profile}-vllm",
        "initContainers": [{"name": "verify-artifact", "image": IMAGE}],
        "containers": [{"name": "vllm", "image": IMAGE, "ports": [{"name": "http", "containerPort": 8000}]}],
        "tolerations": [{"key": "aws.amazon.com/neuron", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
    }
    if node_name and t.scheduled is not None:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": f"{profile}-7d9f8c6b5-",
            "namespace": NAMESPACE,
            "uid": f"uid-{name}",
            "resourceVersion": "2002",
            "creationTimestamp": at(t.created),
            "labels": {
                "app.kubernetes.io/name": "vllm",
                "app.kubernetes.io/instance": profile,
                "pod-template-hash": "7d9f8c6b5",
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{profile}-7d9f8c6b5",
                    "uid": f"uid-rs-{profile}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
        "status": _pod_status(t),
    }


def _pod_status(t: Timeline) -> dict[str, Any]:
    status: dict[str, Any] = {
        "phase": "Running" if t.vllm_start is not None else "Pending",
        "conditions": [
            _pod_condition(t, "PodReadyToStartContainers", t.init[0] - 1 if t.init else None),
            _pod_condition(
                t, "Initialized", t.init[1] if t.init and t.init_exit == 0 else None, reason="ContainersNotInitialized"
            ),
            _pod_condition(t, "Ready", t.ready, reason=None if t.ready else "ContainersNotReady"),
            _pod_condition(t, "ContainersReady", t.ready, reason=None if t.ready else "ContainersNotReady"),
            _pod_condition(
                t,
                "PodScheduled",
                t.scheduled,
                reason=None if t.scheduled is not None else "Unschedulable",
                message=None if t.scheduled is not None else "0/3 nodes are available: 3 cannot allocate all claims.",
            ),
        ],
        "qosClass": "Burstable",
        "initContainerStatuses": [_init_status(t)],
        "containerStatuses": [_vllm_status(t)],
    }
    if t.scheduled is not None:
        status |= {"hostIP": "10.64.32.10", "podIP": "10.64.33.7", "startTime": at(t.scheduled)}
    if t.evicted:
        status |= {
            "phase": "Failed",
            "reason": "Evicted",
            "message": "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 9Gi.",
        }
    return status


def _pod_condition(
    t: Timeline, kind: str, when: float | None, *, reason: str | None = None, message: str | None = None
) -> dict[str, Any]:
    c: dict[str, Any] = {
        "type": kind,
        "status": "True" if when is not None else "False",
        "lastProbeTime": None,
        "lastTransitionTime": at(when if when is not None else t.created),
    }
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def _init_status(t: Timeline) -> dict[str, Any]:
    init_status: dict[str, Any] = {
        "name": "verify-artifact",
        "image": IMAGE,
        "imageID": IMAGE_ID if t.init else "",
        "ready": t.init is not None and t.init_exit == 0,
        "restartCount": t.init_restarts,
        "started": False,
        "state": {"waiting": {"reason": "PodInitializing"}},
        "lastState": {},
    }
    if t.init is not None:
        init_status["containerID"] = f"containerd://{'1' * 64}"
        terminated = {
            "exitCode": t.init_exit,
            "reason": "Completed" if t.init_exit == 0 else "Error",
            "startedAt": at(t.init[0]),
            "finishedAt": at(t.init[1]),
            "containerID": f"containerd://{'1' * 64}",
        }
        if t.init_exit == 0:
            init_status["state"] = {"terminated": terminated}
        else:
            init_status["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting"}}
            init_status["lastState"] = {"terminated": terminated}
    return init_status


def _vllm_status(t: Timeline) -> dict[str, Any]:
    vllm_status: dict[str, Any] = {
        "name": "vllm",
        "image": IMAGE,
        "imageID": IMAGE_ID if t.vllm_start is not None else "",
        "ready": t.ready is not None,
        "restartCount": t.vllm_restarts,
        "started": t.engine_ready is not None,
        "state": {"waiting": {"reason": "PodInitializing"}},
        "lastState": {},
    }
    if t.vllm_start is None:
        return vllm_status
    vllm_status["containerID"] = f"containerd://{'2' * 64}"
    if t.vllm_waiting:
        vllm_status["state"] = {"waiting": {"reason": t.vllm_waiting, "message": "back-off 2m40s restarting"}}
    elif t.evicted:
        vllm_status["state"] = {
            "terminated": {
                "exitCode": 137,
                "reason": "ContainerStatusUnknown",
                "startedAt": at(t.vllm_start),
                "finishedAt": at(t.vllm_start + 300),
            }
        }
    else:
        vllm_status["state"] = {"running": {"startedAt": at(t.vllm_start)}}
    if t.vllm_restarts:
        last_start = t.vllm_start if t.vllm_waiting else t.vllm_start - 120
        vllm_status["lastState"] = {
            "terminated": {
                "exitCode": 1,
                "reason": "Error",
                "startedAt": at(last_start),
                "finishedAt": at(last_start + 90),
                "containerID": f"containerd://{'3' * 64}",
            }
        }
    return vllm_status


def events(name: str, node_name: str, t: Timeline) -> list[dict[str, Any]]:
    """The kubelet's Pulling/Pulled events of the pod (core/v1 Event, as `kubectl get events -o json` lists them)."""
    if t.pull is None:
        return []
    pulled = (
        f'Container image "{IMAGE}" already present on machine'
        if t.image_present
        else f'Successfully pulled image "{IMAGE}" in {t.pull[1] - t.pull[0]:.3f}s '
        f"({t.pull[1] - t.pull[0]:.3f}s including waiting). Image size: {IMAGE_BYTES} bytes."
    )
    made = [("Pulling", f'Pulling image "{IMAGE}"', t.pull[0])] if not t.image_present else []
    made.append(("Pulled", pulled, t.pull[1]))
    if not t.image_present:  # the vllm container's own Pulled, once the init container has run
        made.append(("Pulled", f'Container image "{IMAGE}" already present on machine', t.pull[1] + 60))
    return [
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{name}.18{i:014x}",
                "namespace": NAMESPACE,
                "uid": f"uid-event-{name}-{i}",
                "resourceVersion": str(3000 + i),
                "creationTimestamp": at(when),
            },
            "involvedObject": {
                "kind": "Pod",
                "namespace": NAMESPACE,
                "name": name,
                "uid": f"uid-{name}",
                "apiVersion": "v1",
                "resourceVersion": "2001",
                "fieldPath": "spec.initContainers{verify-artifact}",
            },
            "reason": reason,
            "message": message,
            "source": {"component": "kubelet", "host": node_name},
            "firstTimestamp": at(when),
            "lastTimestamp": at(when),
            "count": 1,
            "type": "Normal",
            "eventTime": None,
            "reportingComponent": "kubelet",
            "reportingInstance": node_name,
        }
        for i, (reason, message, when) in enumerate(made)
    ]


def init_log(t: Timeline) -> str:
    if t.init is None:
        return ""
    if t.init_exit:
        return f"{log_at(t.init[1] - 0.5)} FAIL: no manifest.json in /models/artifacts/abc: never published\n"
    check_end = t.check_end if t.check_end is not None else t.init[1] - 0.4
    lines = [f"{log_at(check_end)} OK: /models/artifacts/abc matches profile p (digest abc): 412 files, 1 bytes"]
    if t.copied_bytes is not None:
        lines.append(f"{log_at(t.init[1] - 0.2)} OK: copied 412 files, {t.copied_bytes} bytes to /var/cache/vllm")
    return "\n".join(lines) + "\n"


def vllm_log(t: Timeline) -> str:
    if t.vllm_start is None:
        return ""
    lines = [
        f"{log_at(t.vllm_start + 2.1)} INFO 11-20 09:10:02 [api_server.py:1885] vLLM API server version 0.29.0",
        f"{log_at(t.vllm_start + 3.0)} Traceback-free continuation line without a timestamp follows",
        "    a continuation line",
    ]
    if t.engine_ready is not None:
        compiled = f" (compilation: {t.compiled_s:.2f} s)" if t.compiled_s else ""
        took = t.engine_ready - t.vllm_start
        lines.append(
            f"{log_at(t.engine_ready)} INFO 11-20 09:15:00 [core.py:369] init engine (profile, create kv cache, "
            f"warmup model) took {took:.2f} s{compiled}"
        )
        lines.append(f"{log_at(t.engine_ready + 1.5)} INFO:     Application startup complete.")
    return "\n".join(lines) + "\n"


# The pods the tests read: name -> (profile, node, timeline). One new trn2 node became Ready at 300 s.
NODE = "ip-10-64-32-10.us-east-2.compute.internal"
NODE_READY_S = 300
# A later replica on that node: created at 1000 s, scheduled at once, its image already there, its init check done
# at 1016 s; the later pods differ from it only where they say.
LATER = Timeline(created=1000, scheduled=1001, pull=(1003, 1003), image_present=True, init=(1004, 1016))
PODS: dict[str, tuple[str, str | None, Timeline]] = {
    # created before the node existed; vllm-neuron stack: check, then the compile cache copy
    "speculative-7d9f8c6b5-normal": (
        "speculative",
        NODE,
        Timeline(
            created=0,
            scheduled=310,
            pull=(318, 438),
            init=(440, 560),
            check_end=452.3,
            copied_bytes=48_000_000_000,
            vllm_start=561,
            engine_ready=742.6,
            ready=750,
        ),
    ),
    # a second replica on the Ready node, image already there; slow model load; the legacy stack copies nothing
    "baseline-7d9f8c6b5-slow": ("baseline", NODE, replace(LATER, vllm_start=1017, engine_ready=2517.2, ready=2520)),
    # crash-looping: vllm exits, waits to restart; never Ready
    "speculative-7d9f8c6b5-crashing": (
        "speculative",
        NODE,
        replace(LATER, vllm_start=1400, vllm_restarts=3, vllm_waiting="CrashLoopBackOff"),
    ),
    # restarted twice, then Ready; events expired (older than an hour), and vLLM compiled while serving
    "baseline-7d9f8c6b5-restarted": (
        "baseline",
        NODE,
        replace(
            LATER,
            pull=None,
            image_present=False,
            vllm_start=1500,
            vllm_restarts=2,
            engine_ready=1700.4,
            compiled_s=95.0,
            ready=1701,
        ),
    ),
    # the init check fails: no artifact published; never Ready
    "speculative-7d9f8c6b5-noartifact": (
        "speculative",
        NODE,
        replace(LATER, init=(1004, 1006), init_exit=1),
    ),
    # evicted while loading
    "baseline-7d9f8c6b5-evicted": ("baseline", NODE, replace(LATER, vllm_start=1017, evicted=True)),
    # never scheduled: no node has the devices
    "speculative-7d9f8c6b5-pending": ("speculative", None, Timeline(created=1000, scheduled=None)),
}


def recorded() -> tuple[list[dict], list[dict], list[dict], dict[str, tuple[str, str]]]:
    """(pods, nodes, events, {pod: (init log, vllm log)}) of every pod above."""
    pods, evs, logs = [], [], {}
    for name, (profile, node_name, t) in PODS.items():
        pods.append(pod(name, profile, node_name, t))
        evs += events(name, node_name or "", t)
        logs[name] = (init_log(t), vllm_log(t))
    return pods, [node(NODE, NODE_READY_S)], evs, logs
