"""KEDA on vLLM queue depth per replica, within static trn2 capacity (docs/metrics-and-scaling.md says why).

HPA limits: autoscaling/v2 HPAScalingPolicy periodSeconds 1..1800, stabilizationWindowSeconds 0..3600.
"""

from __future__ import annotations

import math
import zoneinfo
from typing import Any

from pydantic import Field

from config import cron
from config.profiles import ServingProfile
from config.section import Section

HPA_MAX_POLICY_PERIOD_SECONDS = 1800
HPA_MAX_STABILIZATION_SECONDS = 3600


class WarmWindow(Section):
    """Hours with more replicas, through KEDA's cron trigger on the same ScaledObject: during the window every
    profile runs at least `replicas` (the HPA takes the largest proposal), so the nodes and replicas are Ready before
    a known peak instead of a time-to-Ready after it (docs/elastic-capacity.md)."""

    timezone: str = Field(description="IANA time zone the cron expressions are read in, e.g. Europe/Berlin.")
    start: str = Field(description="5-field cron expression (minute hour day month weekday) opening the window.")
    end: str = Field(description="5-field cron expression closing the window.")
    replicas: int = Field(ge=1, le=64, description="Replicas of every profile while the window is open.")


class ScalingConfig(Section):
    """Queue-depth autoscaling of every serving profile (one KEDA ScaledObject each)."""

    enabled: bool = Field(default=True, description="Render a ScaledObject per profile (false: fixed replicas).")
    waiting_per_replica: float = Field(
        default=0.5,
        description="Target requests waiting per replica, a fraction (at most 1) of the compiled batch max_num_seqs.",
    )
    polling_interval_seconds: int = Field(default=15, ge=5, le=300, description="How often KEDA queries the store.")
    time_to_ready_seconds: int = Field(
        default=900,
        ge=60,
        le=HPA_MAX_POLICY_PERIOD_SECONDS,
        description="Seconds from a new replica's scheduling to Ready; the cold-start report measures it.",
    )
    scale_up_period_seconds: int = Field(
        default=900,
        le=HPA_MAX_POLICY_PERIOD_SECONDS,
        description="At most one new replica per period, no shorter than time_to_ready_seconds.",
    )
    scale_down_stabilization_seconds: int = Field(
        default=600,
        ge=600,
        le=HPA_MAX_STABILIZATION_SECONDS,
        description="Scale down to the highest replica count recommended over this window.",
    )
    scale_down_period_seconds: int = Field(
        default=300, ge=15, le=HPA_MAX_POLICY_PERIOD_SECONDS, description="At most one replica removed per period."
    )
    max_replicas: dict[str, int] = Field(
        default_factory=dict,
        description="Profile name -> replicas, a cap below its fair share of the devices.",
    )
    warm_schedule: list[WarmWindow] = Field(
        default_factory=list, max_length=8, description="Optional hours with more replicas (KEDA cron trigger)."
    )


def waiting_threshold(scaling: ScalingConfig, profile: ServingProfile) -> int:
    """Requests waiting per replica above which KEDA adds a replica: a fraction of the compiled batch, at least 1."""
    return max(1, math.floor(scaling.waiting_per_replica * profile.max_num_seqs))


def running_threshold(profile: ServingProfile) -> int:
    """Requests running per replica that hold the replicas serving them: a full compiled batch."""
    return int(profile.max_num_seqs)


def min_replicas(profile: ServingProfile) -> int:
    """Never zero on trn2: a replica that is not running costs a whole time-to-Ready before its first token."""
    return max(1, profile.replicas)


def devices_available(config: Any) -> int:
    """Devices of the trn2 node group at max_size: what the placement rule (config/rules.py) and the autoscaler's
    maximum share."""
    return config.trn2_nodes.max_size * config.trn2_nodes.instance.devices


def switched_on(config: Any) -> list[ServingProfile]:
    """The profiles that run (replicas above 0): a profile switched off gets no ScaledObject and claims no devices."""
    return [p for p in config.profiles if p.replicas > 0]


def fair_share_replicas(config: Any, profile: ServingProfile) -> int:
    """Replicas of `profile` that fit when every switched-on profile gets an equal share of the devices. CPU and memory
    requests are in proportion to the devices claimed (charts/neuron_claim.node_share), so devices that fit leave room
    for them."""
    return devices_available(config) // max(len(switched_on(config)), 1) // profile.placement.devices


def max_replicas(config: Any, profile: ServingProfile) -> int:
    return config.scaling.max_replicas.get(profile.name, fair_share_replicas(config, profile))


def scaling_problems(config: Any) -> list[str]:
    """Each bad scaling value as a sentence naming the field, the value and the fix (checked before synth)."""
    s: ScalingConfig = config.scaling
    problems: list[str] = []
    if not 0 < s.waiting_per_replica <= 1:
        problems.append(
            f"scaling.waiting_per_replica={s.waiting_per_replica} puts the queue threshold outside the compiled "
            "batch (max_num_seqs); use a fraction above 0 and at most 1, e.g. 0.5"
        )
    if s.scale_up_period_seconds < s.time_to_ready_seconds:
        problems.append(
            f"scaling.scale_up_period_seconds={s.scale_up_period_seconds} is shorter than "
            f"scaling.time_to_ready_seconds={s.time_to_ready_seconds}: replicas would be added before the last one is "
            f"Ready (runaway scale-up); set scale_up_period_seconds: {s.time_to_ready_seconds} or more"
        )
    names = {p.name for p in config.profiles}
    for name in sorted(set(s.max_replicas) - names):
        problems.append(f"scaling.max_replicas names {name!r}, which is not a profile; use one of {', '.join(names)}")
    available = devices_available(config)
    for p in config.profiles:
        if p.name not in s.max_replicas:
            continue
        cap = s.max_replicas[p.name]
        if cap < min_replicas(p):
            problems.append(
                f"scaling.max_replicas.{p.name}={cap} is below the profile's {min_replicas(p)} replica(s); "
                f"set it to at least {min_replicas(p)}"
            )
        if cap > fair_share_replicas(config, p):
            problems.append(
                f"scaling.max_replicas.{p.name}={cap} x {p.placement.devices} devices does not fit the fair share "
                f"of the {available} devices the trn2 node group has (trn2_nodes.max_size="
                f"{config.trn2_nodes.max_size}); use at most {fair_share_replicas(config, p)} or add nodes"
            )
    problems += warm_schedule_problems(config)
    if s.enabled:
        for p in switched_on(config):
            if min_replicas(p) > max_replicas(config, p):
                problems.append(
                    f"profiles ({p.name}): {min_replicas(p)} replica(s) x {p.placement.devices} devices exceed its "
                    f"fair share of the {available} devices of trn2_nodes.max_size={config.trn2_nodes.max_size} "
                    "nodes; add nodes, lower replicas or set scaling.enabled: false"
                )
    return problems


def warm_schedule_problems(config: Any) -> list[str]:
    """KEDA's cron scaler parses 5-field expressions with robfig/cron and loads the zone with Go's
    time.LoadLocation (IANA names): a bad one would fail in the operator, after deploy."""
    problems: list[str] = []
    for i, w in enumerate(config.scaling.warm_schedule):
        where = f"scaling.warm_schedule[{i}]"
        try:
            zoneinfo.ZoneInfo(w.timezone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            problems.append(f"{where}.timezone={w.timezone!r} is not an IANA time zone; use a name like Europe/Berlin")
        parsed = {}
        for field in ("start", "end"):
            text = getattr(w, field)
            try:
                parsed[field] = cron.parse(text)
            except cron.CronError as err:
                problems.append(
                    f"{where}.{field}={text!r} is refused by KEDA's cron parser ({err}); write 5 fields, minute hour "
                    "day-of-month month day-of-week, like 0 8 * * 1-5"
                )
        if len(parsed) == 2 and parsed["start"] == parsed["end"]:
            problems.append(
                f"{where} opens and closes at the same times (start={w.start!r}, end={w.end!r}), so the window is "
                "empty (KEDA refuses start == end); give end a later time, like start 0 8 * * 1-5 and end 0 18 * * 1-5"
            )
        if not config.scaling.enabled:
            problems.append(
                f"{where} is set but scaling.enabled=false renders no ScaledObject to open it; set scaling.enabled: "
                "true or remove scaling.warm_schedule"
            )
        for p in config.profiles:
            if w.replicas > max_replicas(config, p):
                problems.append(
                    f"{where}.replicas={w.replicas} is above the {max_replicas(config, p)} replica(s) profile "
                    f"{p.name} may run at the ceiling (trn2_nodes.max_size={config.trn2_nodes.max_size}); use at "
                    f"most {max_replicas(config, p)} or raise the ceiling"
                )
    return problems
