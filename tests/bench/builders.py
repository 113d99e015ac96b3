"""What the benchmark tests build by hand (load settings, sweep settings, request records): one owner for the
defaults, each test naming only what it varies."""

from __future__ import annotations

from typing import Any

from bench.results import RequestRecord, RunSettings
from bench.runner import RunOptions
from bench.sweep.run import SweepSettings

DEFAULTS: dict[str, Any] = {
    "suite": "default",
    "api": "chat",
    "mode": "interleaved",
    "concurrency": 1,
    "rate": None,
    "requests": 1,
    "warmup": 0,
    "max_tokens": 4,
    "seed": 0,
    "continuous_usage": True,
}


def quiet(**changes: Any) -> RunOptions:
    """RunOptions whose progress lines go nowhere, with `changes` over the defaults."""
    return RunOptions(**({"log": lambda _: None} | changes))


def run_settings(**changes: Any) -> RunSettings:
    """RunSettings of one chat request at a time, interleaved, seed 0, with `changes` over the defaults."""
    return RunSettings(**(DEFAULTS | changes))


def sweep_settings(**changes: Any) -> SweepSettings:
    """SweepSettings of one concurrency point, no rate points, one repeat of one request, over run_settings()."""
    defaults: dict[str, Any] = {"concurrencies": [1], "rates": [], "repeats": 1, "requests_per_point": 1}
    return SweepSettings(**({"run": run_settings()} | defaults | changes))


def record(start: float, ttft: float, tpot: float, tokens: int = 11) -> RequestRecord:
    """One streamed request: first token at `ttft`, the rest `tpot` apart, its usage in every chunk."""
    e2e = ttft + tpot * (tokens - 1)
    return RequestRecord(
        start_s=start,
        ttft_s=ttft,
        e2e_s=e2e,
        output_tokens=tokens,
        token_source="usage_per_chunk",
        chunk_times_s=[ttft, e2e],
        chunk_tokens=[1, tokens - 1],
    )
