"""Where a serving pod's cold start went, read from the cluster's own record: the phases between node Ready (or
the pod's creation, on a node that was already Ready) and the pod's Ready condition.

Pure: it reads Kubernetes API objects as `kubectl get -o json` returns them (Pod with its conditions and
container statuses, Node, core/v1 Events) and the two containers' logs as `kubectl logs --timestamps` prints
them; ops/coldstart_report.py fetches those. Each boundary comes from the component that records it:

    start         node Ready (Node condition) or pod created, whichever is later
    scheduled     PodScheduled condition (scheduler)
    pull start    first `Pulling` event of the pod (kubelet; events live about an hour: older pods have none)
    pull end      first `Pulled` event after it; its message carries the image size in bytes
    init start    the verify-artifact init container's startedAt
    check end     its log line "OK: ... matches" (only when it then copies the compile cache to node disk)
    init end      its finishedAt
    vLLM start    the vllm container's startedAt (its current run; earlier runs are restarts)
    engine ready  vLLM's log line that its engine is built: "init engine (...) took" (V1), "Model loading took" or
                  "Loading weights took" (V0); "compilation: N s" in the V1 line means it compiled while serving
    Ready         the pod's Ready condition

A boundary that is not recorded merges its phase into the next one. The API keeps seconds and the logs keep
nanoseconds, so a boundary up to one second before the previous one is that rounding, and is moved onto it; a
larger step back is said in the pod's notes (clocks of different machines) and also moved, so phases never
overlap or go negative.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bench.table import markdown
from config.metrics import COLD_START_PHASE, PHASE, SECONDS, START_KIND, TIME_TO_READY, VARIANT

INIT_CONTAINER = "verify-artifact"  # charts/vllm_service.py
VLLM_CONTAINER = "vllm"
PROFILE_LABEL = "app.kubernetes.io/instance"  # charts/vllm_service.py: the service's selector carries the profile

# (boundary, the phase that ends there), in order.
BOUNDARIES: tuple[tuple[str, str], ...] = (
    ("scheduled", "schedule"),
    ("pull_start", "claims and volumes"),
    ("pull_end", "image pull"),
    ("init_start", "container create"),
    ("check_end", "artifact check"),
    ("init_end", "cache copy"),
    ("vllm_start", "vLLM create"),
    ("engine_ready", "model load"),
    ("ready", "readiness"),
)
PHASES = tuple(phase for _, phase in BOUNDARIES)
ROUNDING = timedelta(seconds=1)  # API timestamps are whole seconds

_CHECKED = re.compile(r"^OK: .* matches ")
_COPIED = re.compile(r"^OK: copied \d+ files, (?P<bytes>\d+) bytes")
_ENGINE_READY = re.compile(
    r"init engine \(profile, create kv cache, warmup model\) took (?P<s>[\d.]+) s(?: \(compilation: (?P<c>[\d.]+) s)?"
    r"|Model loading took|Loading weights took"
)
_IMAGE_SIZE = re.compile(r"Image size: (?P<bytes>\d+) bytes")


def timestamp(text: str | None) -> datetime | None:
    """An API or log timestamp (RFC 3339, seconds or nanoseconds) as an aware datetime; None stays None."""
    if not text:
        return None
    whole, _, rest = text.rstrip("Z").partition(".")
    fraction = rest.split("+")[0][:6]
    parsed = datetime.fromisoformat(whole).replace(tzinfo=UTC)
    return parsed.replace(microsecond=int(fraction.ljust(6, "0"))) if fraction else parsed


def log_lines(text: str) -> list[tuple[datetime, str]]:
    """`kubectl logs --timestamps` output: each line starts with its RFC 3339 time and a space."""
    out: list[tuple[datetime, str]] = []
    for line in text.splitlines():
        stamp, _, message = line.partition(" ")
        try:
            when = timestamp(stamp)
        except ValueError:
            continue  # a continuation of a multi-line message
        if when is not None:
            out.append((when, message))
    return out


@dataclass(frozen=True)
class Phase:
    name: str
    start: datetime
    end: datetime

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


@dataclass(frozen=True)
class ColdStart:
    """One serving pod's cold start: its phases in order, how it ended, and what the record says beside."""

    pod: str
    profile: str
    node: str | None
    start_kind: str  # "new node" (pod created before its node was Ready), "ready node", "node gone", "not scheduled"
    phases: tuple[Phase, ...]
    outcome: str  # "Ready", or why not
    image_bytes: int | None = None  # from the Pulled event; 0 when the image was already on the node
    copied_bytes: int | None = None  # compile cache copied to node disk by the init check
    compiled_s: float | None = None  # vLLM said it compiled while serving (never expected)
    notes: tuple[str, ...] = field(default_factory=tuple)
    node_phases: tuple[Phase, ...] = ()  # node_scale_up: only for a pod that waited for a node brought for it

    @property
    def ready(self) -> bool:
        return self.outcome == "Ready"

    @property
    def time_to_ready_s(self) -> float | None:
        return (self.phases[-1].end - self.phases[0].start).total_seconds() if self.ready and self.phases else None


def _condition(obj: Mapping, kind: str) -> Mapping | None:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c.get("type") == kind), None)


def _container(pod: Mapping, key: str, name: str) -> Mapping:
    return next((c for c in pod.get("status", {}).get(key, []) if c.get("name") == name), {})


def _state_start(status: Mapping) -> datetime | None:
    """When the container's latest run started: running now, ended, or (while it waits to restart) the run before."""
    state = status.get("state", {})
    for which in ("running", "terminated"):
        if which in state:
            return timestamp(state[which].get("startedAt"))
    return timestamp(status.get("lastState", {}).get("terminated", {}).get("startedAt"))


def _event_time(event: Mapping) -> datetime | None:
    return timestamp(
        event.get("firstTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp")
    )


def _outcome(pod: Mapping, init: Mapping, vllm: Mapping) -> str:
    status = pod.get("status", {})
    if status.get("reason") == "Evicted":
        return f"evicted: {status.get('message', 'no message')}"
    if status.get("phase") in ("Failed", "Succeeded"):
        return f"ended ({status['phase']}): {status.get('message') or status.get('reason') or 'no message'}"
    ready = _condition(pod, "Ready")
    if ready and ready.get("status") == "True":
        return "Ready"
    for name, container in ((INIT_CONTAINER, init), (VLLM_CONTAINER, vllm)):
        waiting = container.get("state", {}).get("waiting", {})
        if waiting.get("reason") in ("CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerError"):
            last = container.get("lastState", {}).get("terminated", {})
            exit_ = f", last exit {last['exitCode']} ({last.get('reason', '')})" if "exitCode" in last else ""
            return f"not Ready: {name} {waiting['reason']}, {container.get('restartCount', 0)} restarts{exit_}"
    scheduled = _condition(pod, "PodScheduled")
    if scheduled and scheduled.get("status") != "True":
        return f"not Ready: unschedulable ({scheduled.get('message') or scheduled.get('reason', '')})"
    return "not Ready yet"


def cold_start(
    pod: Mapping,
    node: Mapping | None,
    events: Iterable[Mapping],
    init_log: str = "",
    vllm_log: str = "",
) -> ColdStart:
    """The phases of one pod, from its Pod, its Node (None when it was never scheduled or the node is gone), the
    events of the namespace (the pod's are picked by uid) and the logs of its init and vllm containers."""
    events = list(events)
    meta = pod["metadata"]
    init = _container(pod, "initContainerStatuses", INIT_CONTAINER)
    vllm = _container(pod, "containerStatuses", VLLM_CONTAINER)
    notes: list[str] = []
    created = timestamp(meta["creationTimestamp"])
    assert created is not None
    start_kind, start = _start(pod, node, created)

    marks: dict[str, datetime | None] = {name: None for name, _ in BOUNDARIES}
    scheduled = _condition(pod, "PodScheduled")
    if scheduled and scheduled.get("status") == "True":
        marks["scheduled"] = timestamp(scheduled.get("lastTransitionTime"))

    timed = _events_of(events, meta.get("uid"))
    marks["pull_start"], marks["pull_end"], image_bytes = _image_pull(timed)
    if not timed:
        notes.append("no events for this pod (the API keeps them about an hour): image pull is inside the next phase")

    init_marks, copied_bytes = _init_check(init, init_log)
    marks |= init_marks

    marks["vllm_start"] = _state_start(vllm)
    restarts = vllm.get("restartCount", 0)
    if restarts:
        notes.append(f"vllm restarted {restarts} times: the earlier runs are inside 'vLLM create'")
    marks["engine_ready"], compiled_s = _engine_ready(marks["vllm_start"], vllm_log)
    if compiled_s is not None:
        notes.append(f"vLLM compiled for {compiled_s:g} s while starting: the artifact did not cover it")

    outcome = _outcome(pod, init, vllm)
    ready = _condition(pod, "Ready")
    if outcome == "Ready" and ready:
        marks["ready"] = timestamp(ready.get("lastTransitionTime"))

    phases, order_notes = _phases(start, marks)
    return ColdStart(
        pod=meta["name"],
        profile=meta.get("labels", {}).get(PROFILE_LABEL, "?"),
        node=pod.get("spec", {}).get("nodeName"),
        start_kind=start_kind,
        phases=phases,
        outcome=outcome,
        image_bytes=image_bytes,
        copied_bytes=copied_bytes,
        compiled_s=compiled_s,
        notes=(*notes, *order_notes),
        node_phases=node_scale_up(pod, node, events),
    )


def _start(pod: Mapping, node: Mapping | None, created: datetime) -> tuple[str, datetime]:
    """How the pod's start began (ColdStart.start_kind) and when: node Ready or pod created, whichever is later."""
    node_ready = timestamp((_condition(node, "Ready") or {}).get("lastTransitionTime")) if node else None
    if node is None:
        kind = "node gone" if pod.get("spec", {}).get("nodeName") else "not scheduled"
    else:
        kind = "new node" if node_ready and node_ready > created else "ready node"
    return kind, max(created, node_ready) if node_ready else created


def _events_of(events: list[Mapping], uid: str | None) -> list[tuple[datetime, Mapping]]:
    """The events of the object with this uid that carry a time, oldest first."""
    mine = [e for e in events if e.get("involvedObject", {}).get("uid") == uid]
    return sorted(((when, e) for e in mine if (when := _event_time(e)) is not None), key=lambda pair: pair[0])


def _image_pull(timed: list[tuple[datetime, Mapping]]) -> tuple[datetime | None, datetime | None, int | None]:
    """Pull start, pull end and the image's size in bytes (0: already on the node) from the pod's events."""
    start: datetime | None = None
    end: datetime | None = None
    image_bytes: int | None = None
    for when, event in timed:
        message = event.get("message", "")
        if event.get("reason") == "Pulling" and start is None:
            start = when
        elif event.get("reason") == "Pulled" and image_bytes is None:
            if "already present on machine" in message:
                image_bytes = 0
                start = start or when
                end = when
            elif start is not None:
                end = when
                size = _IMAGE_SIZE.search(message)
                image_bytes = int(size["bytes"]) if size else None
    return start, end, image_bytes


def _init_check(init: Mapping, init_log: str) -> tuple[dict[str, datetime | None], int | None]:
    """The init container's boundaries (init_start, check_end, init_end) and the bytes it copied to node disk."""
    ended = init.get("state", {}).get("terminated", {})
    init_end = timestamp(ended.get("finishedAt")) if ended.get("exitCode") == 0 else None
    lines = log_lines(init_log)
    copied = next((match for _, m in lines if (match := _COPIED.match(m))), None)
    if copied is None:  # nothing copied (the legacy stack reads the mount): the check is the whole init container
        check_end, copied_bytes = init_end, None
    else:
        check_end, copied_bytes = next((t for t, m in lines if _CHECKED.match(m)), None), int(copied["bytes"])
    return {"init_start": _state_start(init), "check_end": check_end, "init_end": init_end}, copied_bytes


def _engine_ready(vllm_start: datetime | None, vllm_log: str) -> tuple[datetime | None, float | None]:
    """When vLLM's current run said its engine was built, and the seconds it compiled while starting, if it did."""
    if vllm_start is None:
        return None, None
    since = vllm_start - ROUNDING
    found = [(when, m) for when, line in log_lines(vllm_log) if when >= since and (m := _ENGINE_READY.search(line))]
    # V1's engine line comes last and says whether it compiled; the V0 lines are the fallback.
    engine = next(((when, m) for when, m in found if m["s"] is not None), found[0] if found else None)
    if engine is None:
        return None, None
    when, line = engine
    compiled = float(line["c"]) if line["c"] is not None and float(line["c"]) > 0 else None
    return when, compiled


# A replica that waited for a new node (issue 28): (boundary, the phase that ends there), in order, from the pod's
# creation. `TriggeredScaleUp` is the event the Cluster Autoscaler puts on a pod it adds a node for (CA FAQ, "What
# events are emitted by CA?"); the node's creationTimestamp is when its kubelet registered it.
NODE_BOUNDARIES: tuple[tuple[str, str], ...] = (
    ("scale_up", "pending until scale-up"),
    ("node_registered", "node launch"),
    ("node_ready", "node Ready"),
    ("ready", "replica start"),
)
NODE_PHASES = tuple(phase for _, phase in NODE_BOUNDARIES)
SCALE_UP_EVENT = "TriggeredScaleUp"


def node_scale_up(pod: Mapping, node: Mapping | None, events: Iterable[Mapping]) -> tuple[Phase, ...]:
    """Pending pod -> scale-up asked -> node registered -> node Ready -> pod Ready, for a pod whose node was
    registered after the pod was created (a node brought for it); empty otherwise. Unrecorded boundaries merge."""
    meta = pod["metadata"]
    created = timestamp(meta["creationTimestamp"])
    registered = timestamp(node["metadata"].get("creationTimestamp")) if node else None
    if created is None or registered is None or registered <= created:
        return ()
    uid = meta.get("uid")
    asked = [
        when
        for e in events
        if e.get("involvedObject", {}).get("uid") == uid and e.get("reason") == SCALE_UP_EVENT
        if (when := _event_time(e)) is not None
    ]
    ready = _condition(pod, "Ready")
    marks = {
        "scale_up": min(asked) if asked else None,
        "node_registered": registered,
        "node_ready": timestamp((_condition(node, "Ready") or {}).get("lastTransitionTime")),
        "ready": timestamp(ready.get("lastTransitionTime")) if ready and ready.get("status") == "True" else None,
    }
    phases: list[Phase] = []
    previous, pending = created, []
    for mark, phase in NODE_BOUNDARIES:
        when = marks[mark]
        pending.append(phase)
        if when is None:
            continue
        when = max(when, previous)
        phases.append(Phase(" + ".join(pending), previous, when))
        previous, pending = when, []
    return tuple(phases)


def node_scale_up_table(starts: Iterable[ColdStart]) -> str:
    """A Markdown table of the node phases of the pods that waited for a new node ("" when none did)."""
    header = ["pod", "service", *NODE_PHASES, "to Ready"]
    out = []
    for s in starts:
        pod, profile, phases = s.pod, s.profile, s.node_phases
        if not phases:
            continue
        cells = dict.fromkeys(NODE_PHASES, "")
        for p in phases:
            cells[p.name.split(" + ")[-1]] = f"{p.seconds:.0f}"
        out.append([pod, profile, *cells.values(), f"{(phases[-1].end - phases[0].start).total_seconds():.0f}"])
    return "\n".join(markdown(header, out)) if out else ""


def _phases(start: datetime, marks: Mapping[str, datetime | None]) -> tuple[tuple[Phase, ...], list[str]]:
    """Consecutive phases from `start` through every recorded boundary; unrecorded ones merge into the next."""
    phases: list[Phase] = []
    notes: list[str] = []
    previous, pending = start, []
    for mark, phase in BOUNDARIES:
        when = marks.get(mark)
        pending.append(phase)
        if when is None:
            continue
        if when < previous:
            behind = (previous - when).total_seconds()
            if behind > ROUNDING.total_seconds():
                notes.append(f"'{phase}' ended {behind:g} s before it began (clocks disagree); counted as 0 s")
            when = previous
        phases.append(Phase(" + ".join(pending), previous, when))
        previous, pending = when, []
    return tuple(phases), notes


def report_table(starts: Iterable[ColdStart]) -> str:
    """A Markdown table: one row per pod, one column per phase (seconds); a blank cell's time is in the next
    filled one (that boundary was not recorded)."""
    header = ["pod", "service", "start", *PHASES, "to Ready", "outcome"]
    rows = []
    for s in starts:
        cells = dict.fromkeys(PHASES, "")
        for p in s.phases:
            cells[p.name.split(" + ")[-1]] = f"{p.seconds:.0f}"
        total = f"{s.time_to_ready_s:.0f}" if s.time_to_ready_s is not None else "-"
        rows.append([s.pod, s.profile, s.start_kind, *cells.values(), total, s.outcome])
    return "\n".join(markdown(header, rows))  # escapes a | in a kubelet message


def metric_datums(starts: Iterable[ColdStart], *, now: datetime, max_age_s: float) -> list[dict]:
    """CloudWatch MetricData for every pod that became Ready within `max_age_s`: seconds per phase (phases whose
    start boundary was recorded, so every value means one thing) and time to Ready, by service."""
    datums: list[dict] = []
    for s in starts:
        if s.time_to_ready_s is None or (now - s.phases[-1].end).total_seconds() > max_age_s:
            continue
        at = s.phases[-1].end
        for p in s.phases:
            if " + " not in p.name:
                datums.append(_datum(COLD_START_PHASE, [(VARIANT, s.profile), (PHASE, p.name)], p.seconds, at))
        datums.append(_datum(TIME_TO_READY, [(VARIANT, s.profile), (START_KIND, s.start_kind)], s.time_to_ready_s, at))
    return datums


def _datum(name: str, dimensions: list[tuple[str, str]], value: float, at: datetime) -> dict:
    return {
        "MetricName": name,
        "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions],
        "Timestamp": at,
        "Unit": SECONDS,
        "Values": [round(value, 3)],
        "Counts": [1.0],
    }
