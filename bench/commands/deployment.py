"""What the commands read from the deployment config: the profiles' k, devices and price, the baseline profile,
the bench section (SLOs, sweep policy). Each works without a config where the command can (None: no config)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.runner import Hardware
    from bench.sweep.analysis import Slo
    from config.bench import BenchConfig
    from config.live_metrics import LiveMetrics


def load(path: str | None) -> object | None:
    """The deployment config, for the metrics namespace and each profile's k. None if it cannot be loaded."""
    from config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as err:
        if path:
            raise
        print(f"note: default config not loaded ({err}); continuing without it", file=sys.stderr)
        return None


def k_by_profile(cfg: object | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in getattr(cfg, "profiles", []):
        k = getattr(p.decoding, "num_speculative_tokens", None)
        if k:
            out[p.name] = k
    return out


def live_metrics_by_profile(cfg: object | None) -> dict[str, LiveMetrics]:
    """Each profile's stack's live metrics (what its /metrics serves), so acceptance reads the right counters."""
    return {p.name: p.live_metrics for p in getattr(cfg, "profiles", [])}


def hardware(cfg: object | None, fallback_price_usd: float | None = None) -> Hardware | None:
    """Devices each profile's service claims and the node price, for cost; None without a config. The config's
    trn2_nodes.hourly_price_usd wins; `fallback_price_usd` (--node-hourly-price-usd: the price `make bench` read from
    AWS) is used only where the config sets none."""
    from bench.runner import Hardware

    if cfg is None:
        return None
    configured = cfg.trn2_nodes.hourly_price_usd  # type: ignore[attr-defined]
    return Hardware(
        devices_by_variant={p.name: cfg.profile_devices(p) for p in cfg.profiles},  # type: ignore[attr-defined]
        devices_per_node=cfg.trn2_nodes.instance.devices,  # type: ignore[attr-defined]
        hourly_price_usd=configured if configured is not None else fallback_price_usd,
    )


def config_baseline(cfg: object | None, endpoint_names: list[str]) -> str | None:
    """The config's baseline profile (its one owner), when an endpoint carries that profile's name."""
    name = cfg.baseline_profile.name if cfg is not None else None  # type: ignore[attr-defined]
    return name if name in endpoint_names else None


def max_num_seqs(cfg: object | None, names: list[str] | None = None) -> int | None:
    """The largest batch among the config's profiles (those named `names`, if given); None without any."""
    profiles = [p for p in getattr(cfg, "profiles", []) if names is None or p.name in names]
    return max(p.max_num_seqs for p in profiles) if profiles else None


def bench_config(cfg: object | None) -> BenchConfig:
    """The config's bench section (SLOs, sweep), else its defaults."""
    from config.bench import BenchConfig

    return getattr(cfg, "bench", None) or BenchConfig()


def sweep_policy(cfg: object | None) -> tuple[float, Slo]:
    """(speedup floor, SLO) from the config's bench section, else its defaults."""
    from bench.sweep.analysis import Slo

    bench = bench_config(cfg)
    return bench.sweep.speedup_floor, Slo(bench.slo.ttft_p99_ms / 1000, bench.slo.tpot_p99_ms / 1000)
