"""crossover.json, the load sweep's verdict on where speculation stops paying: one model that `bench sweep` writes
through and the config loader reads through (docs/sweep.md), and the one rule that turns it into the endpoint's
per-replica spill thresholds.

Reading is strict because the file is input: NaN and Infinity (which Python's json accepts, JSON does not), nesting
deeper than the parser's recursion limit, negative loads and unknown fields are refused. The bounded read of the
file itself is config/bounded_file.py's; the sentence is the config loader's.

Leaf module: imports nothing of ours but the prompt kinds, from their own leaf config/prompt_kind.py.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from config.prompt_kind import PromptKind

SCHEMA_VERSION = 1
MAX_BYTES = 1024 * 1024  # a sweep of 8 profiles x 2 kinds x 2 load kinds writes a few KiB

LoadKind = Literal["concurrency", "rate"]
# A load of the grid: requests in flight or requests per second; finite (the JSON reader refuses NaN/Infinity too).
Load = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SpeedupRange(_Model):
    median: float = Field(description="Median over the repeats of the p50 TPOT speedup (geometric mean over cases).")
    low: float = Field(description="Lowest repeat.")
    high: float = Field(description="Highest repeat.")
    repeats: int


class CrossoverEntry(_Model):
    variant: str = Field(description="The speculative service (profile name).")
    kind: PromptKind = Field(description="Prompt kind the speedup is measured on.")
    load: LoadKind = Field(description="concurrency: requests in flight; rate: Poisson requests per second.")
    crossover: Load | None = Field(
        description="Lowest load of the grid at which the speedup is below speedup_floor; null: none in the grid."
    )
    speedup: SpeedupRange | None = Field(description="The speedup at `crossover`.")
    last_paying: Load | None = Field(
        description="Highest load below `crossover` (or the grid's top, when there is none) where it still paid; "
        "null: it did not pay even at the lowest load."
    )
    last_paying_speedup: SpeedupRange | None
    uncertain: bool = Field(description="The floor lies within the repeats' range at either point: measure more.")
    grid: list[Load] = Field(description="The unsaturated loads measured, increasing.")


class CrossoverFile(_Model):
    """crossover.json: what the endpoint's spill threshold reads (docs/sweep.md)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    created_at: datetime
    baseline: str
    metric: Literal["p50_tpot_speedup"] = "p50_tpot_speedup"
    speedup_floor: float
    max_num_seqs: int | None
    slo_ttft_p99_ms: float
    slo_tpot_p99_ms: float
    crossovers: list[CrossoverEntry]

    def threshold(self, variant: str, kind: str, load: LoadKind = "concurrency") -> float | None:
        """The load at which to stop sending `kind` traffic to `variant`: its crossover, if the sweep found one."""
        return next(
            (c.crossover for c in self.crossovers if (c.variant, c.kind, c.load) == (variant, kind, load)), None
        )

    def paying_per_replica(self) -> dict[str, int]:
        """Per speculative profile, the in-flight requests (per replica) up to which speculation still paid:
        concurrency entries only, the prompt kind that stops paying first. A profile that never crossed gets no
        entry (its threshold stays max_num_seqs); one that did not pay even at the lowest load gets 1."""
        out: dict[str, int] = {}
        for entry in self.crossovers:
            if entry.load != "concurrency" or entry.crossover is None:
                continue
            paying = max(int(entry.last_paying or 1), 1)
            out[entry.variant] = min(out.get(entry.variant, paying), paying)
        return out


def _no_constant(name: str) -> float:
    raise ValueError(f"it holds {name}, which JSON does not allow (write a number)")


def parse(raw: bytes) -> CrossoverFile:
    """Validate the file's bytes; ValueError (a phrase) or pydantic's ValidationError on anything else."""
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError as err:
        raise ValueError(f"it is not UTF-8 text (byte {err.start})") from None
    except RecursionError:
        raise ValueError("it nests deeper than a crossover.json ever does") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"it is not JSON ({err.msg}, line {err.lineno} column {err.colno})") from None
    # strict, as JSON: `last_paying: true` or "4" is refused, not read as 1 or 4; an ISO datetime string still parses
    return CrossoverFile.model_validate_json(json.dumps(data), strict=True)
