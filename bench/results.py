"""The versioned results file and the statistics computed from it.

One schema shared by the runner (writes it), the report and CloudWatch publishing (read it), so a results
file from the in-cluster Job can be reported on a laptop later. Bump SCHEMA_VERSION on any breaking change.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bench.spec_metrics import SpecDecodeResult
from config import bounded_file, pydantic_errors
from config.prompt_kind import PromptKind

SCHEMA_VERSION = 1

# Where each request's per-chunk token counts came from, best first (see bench/client.py).
TokenSource = Literal["usage_per_chunk", "token_ids", "usage_text_share", "chunk_count", "none"]
# How a request ends: `fixed` at exactly max_tokens (ignore_eos), `natural` at end-of-sequence (max_tokens caps it).
Stop = Literal["fixed", "natural"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RequestRecord(_Model):
    """One streamed request: raw timings, so any statistic can be recomputed later."""

    start_s: float = Field(description="When the request was written to the socket, seconds since the run started.")
    send_delay_s: float = Field(default=0.0, description="Client-side wait before that: connection set-up, queueing.")
    ttft_s: float | None = Field(default=None, description="Time to the first token-carrying chunk.")
    e2e_s: float | None = Field(default=None, description="Time to the end of the stream.")
    output_tokens: int = Field(default=0, description="From the server's usage; see usage_missing.")
    usage_missing: bool = Field(
        default=False,
        description="True when no exact token count came back (no usage, no token_ids): the request counts for "
        "TTFT and E2E only and is excluded from TPOT, ITL and throughput.",
    )
    token_source: TokenSource = "none"
    chunk_times_s: list[float] = Field(default_factory=list, description="Arrival of each token chunk.")
    chunk_tokens: list[int] = Field(default_factory=list, description="Tokens each of those chunks carried.")
    chunk_texts: list[str] = Field(
        default_factory=list, description="Text of each of those chunks (empty in files from before it was kept)."
    )
    output_token_ids: list[int] | None = Field(
        default=None, description="The output's token ids, when the server sent them on every chunk."
    )
    error: str | None = None

    @model_validator(mode="after")
    def _chunks_pair_up(self) -> RequestRecord:
        if len(self.chunk_times_s) != len(self.chunk_tokens):
            raise ValueError(
                f"chunk_times_s has {len(self.chunk_times_s)} entries but chunk_tokens has {len(self.chunk_tokens)}; "
                "each chunk needs one arrival time and one token count"
            )
        if self.chunk_texts and len(self.chunk_texts) != len(self.chunk_tokens):
            raise ValueError(
                f"chunk_texts has {len(self.chunk_texts)} entries but chunk_tokens has {len(self.chunk_tokens)}; "
                "each chunk needs one text (or leave chunk_texts empty)"
            )
        return self

    @property
    def output_text(self) -> str:
        return "".join(self.chunk_texts)

    @property
    def ok(self) -> bool:
        return self.error is None and self.ttft_s is not None and self.e2e_s is not None

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first: (e2e - TTFT) / (tokens - 1), as `vllm bench serve` defines it."""
        if not self.ok or self.usage_missing or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)  # type: ignore[operator]

    def itl(self) -> tuple[list[float], list[int]]:
        """Token-weighted inter-token latency: each chunk gap split evenly over the tokens that chunk carried.

        Returns (per-token latency of each chunk, token count of each chunk) for the chunks after the first,
        so a weighted mean is (last chunk - first chunk) / tokens after the first chunk.
        """
        values: list[float] = []
        weights: list[int] = []
        if self.usage_missing:
            return values, weights
        times, tokens = self.chunk_times_s, self.chunk_tokens
        for i in range(1, len(times)):
            if tokens[i] > 0:
                values.append((times[i] - times[i - 1]) / tokens[i])
                weights.append(tokens[i])
        return values, weights

    @property
    def output_tok_s(self) -> float | None:
        if not self.ok or self.usage_missing or not self.e2e_s:
            return None
        return self.output_tokens / self.e2e_s


def percentile(values: Sequence[float], q: float, weights: Sequence[float] | None = None) -> float | None:
    """The q-th percentile (0..100). Unweighted: linear interpolation (numpy's default), so results compare
    with other tools. Weighted: the inverted CDF, i.e. the percentile of the list with each value repeated
    `weight` times, which is what token weighting means."""
    if not values:
        return None
    if weights is None:
        s = sorted(values)
        pos = (len(s) - 1) * q / 100
        lo = math.floor(pos)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)
    pairs = sorted((v, w) for v, w in zip(values, weights, strict=True) if w > 0)
    total = sum(w for _, w in pairs)
    if total <= 0:
        return None
    target = q / 100 * total
    cumulative = 0.0
    for value, weight in pairs:
        cumulative += weight
        if cumulative >= target - 1e-9 * total:
            return value
    return pairs[-1][0]


class Stat(_Model):
    """Summary of one latency metric over the successful requests of a run (seconds)."""

    n: float = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = Field(default=None, description="Meaningful from about 100 values; see n.")

    @classmethod
    def of(cls, values: Sequence[float], weights: Sequence[float] | None = None) -> Stat:
        if not values:
            return cls()
        w = list(weights) if weights is not None else [1.0] * len(values)
        total = sum(w)
        mean = sum(v * x for v, x in zip(values, w, strict=True)) / total if total else None
        return cls(
            n=total,
            mean=mean,
            p50=percentile(values, 50, weights),
            p90=percentile(values, 90, weights),
            p99=percentile(values, 99, weights),
        )


class RunSummary(_Model):
    """Per (variant, test case): what the console table, the report and the dashboard show."""

    requests: int
    ok: int
    errors: int
    usage_missing: int = Field(description="Requests without exact token counts: excluded from token metrics.")
    short_outputs: int = Field(
        description="Fixed-length runs: requests with fewer output tokens than max_tokens (EOS not ignored?)."
    )
    output_tokens: int
    duration_s: float
    output_tok_s: float = Field(description="All output tokens of the run divided by its wall-clock time.")
    ttft_s: Stat
    tpot_s: Stat
    itl_s: Stat = Field(description="Token-weighted inter-token latency.")
    e2e_s: Stat
    request_tok_s: Stat = Field(description="Per-request output tokens per second (tokens / e2e).")


def summarize(
    records: Sequence[RequestRecord], *, duration_s: float, max_tokens: int, stop: Stop = "fixed"
) -> RunSummary:
    ok = [r for r in records if r.ok]
    itl_values: list[float] = []
    itl_weights: list[int] = []
    for r in ok:
        v, w = r.itl()
        itl_values += v
        itl_weights += w
    tokens = sum(r.output_tokens for r in ok if not r.usage_missing)
    return RunSummary(
        requests=len(records),
        ok=len(ok),
        errors=len(records) - len(ok),
        usage_missing=sum(r.usage_missing for r in ok),
        short_outputs=sum(r.output_tokens < max_tokens for r in ok if not r.usage_missing) if stop == "fixed" else 0,
        output_tokens=tokens,
        duration_s=duration_s,
        output_tok_s=tokens / duration_s if duration_s > 0 else 0.0,
        ttft_s=Stat.of([r.ttft_s for r in ok if r.ttft_s is not None]),
        tpot_s=Stat.of([t for r in ok if (t := r.tpot_s) is not None]),
        itl_s=Stat.of(itl_values, itl_weights),
        e2e_s=Stat.of([r.e2e_s for r in ok if r.e2e_s is not None]),
        request_tok_s=Stat.of([t for r in ok if (t := r.output_tok_s) is not None]),
    )


def error_reasons(records: Sequence[RequestRecord], top: int = 3) -> list[str]:
    """The most common reasons requests failed, as `3x HTTP 503: ...`, for the console."""
    counts: dict[str, int] = {}
    for r in records:
        if not r.ok:
            reason = r.error or "no timing recorded"
            counts[reason] = counts.get(reason, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    return [f"{n}x {reason[:200]}" for reason, n in ranked[:top]]


class RunSettings(_Model):
    """The load every variant received, identically."""

    suite: str
    api: Literal["chat", "completions"]
    mode: Literal["interleaved", "simultaneous"]
    concurrency: int | None
    rate: float | None
    requests: int
    warmup: int
    max_tokens: int
    seed: int
    continuous_usage: bool
    stops: list[Stop] = Field(
        default_factory=lambda: ["fixed"], min_length=1, description="Each test case runs once per stop mode."
    )


class VariantInfo(_Model):
    name: str
    base_url: str
    model: str
    num_speculative_tokens: int | None = Field(default=None, description="k, from the config's profile, if known.")
    devices: int | None = Field(default=None, description="Neuron devices its service claims (all replicas), if known.")
    devices_per_node: int | None = Field(default=None, description="Neuron devices on one Trainium node, if known.")


class CaseRun(_Model):
    """One (variant, test case) run: raw records, their summary and the speculation counters of that window."""

    variant: str
    test_case: str
    kind: PromptKind
    stop: Stop = "fixed"
    started_at: datetime
    duration_s: float
    records: list[RequestRecord]
    summary: RunSummary
    spec_decode: SpecDecodeResult

    @property
    def case_label(self) -> str:
        """The test case as published (CloudWatch TestCase) and tuned: natural-stop runs as `<case>/natural` (no
        case name has a slash), so each run is compared with runs of its own stop mode."""
        return self.test_case if self.stop == "fixed" else f"{self.test_case}/natural"

    def _steps(self) -> tuple[int, int, float]:
        """(chunks, tokens, seconds) after each successful request's first chunk, exact token counts only."""
        chunks = tokens = 0
        seconds = 0.0
        for r in self.records:
            if r.ok and not r.usage_missing and r.token_source in ("usage_per_chunk", "token_ids"):
                chunks += len(r.chunk_tokens) - 1
                tokens += sum(r.chunk_tokens[1:])
                seconds += r.chunk_times_s[-1] - r.chunk_times_s[0] if len(r.chunk_times_s) > 1 else 0.0
        return chunks, tokens, seconds

    def tokens_per_step(self) -> float | None:
        """Client-derived mean acceptance length: output tokens per streamed chunk after the first, from exact
        per-chunk counts. vLLM streams one chunk per engine step, so this is 1 + accepted per step even when the
        server exposes no spec-decode metrics (the legacy Neuron fused path)."""
        chunks, tokens, _ = self._steps()
        return tokens / chunks if chunks else None

    def step_time_s(self) -> float | None:
        """Mean time between streamed chunks after the first: one engine step (target, plus drafting if any)."""
        chunks, _, seconds = self._steps()
        return seconds / chunks if chunks else None


class Speedup(_Model):
    """A variant against the baseline on one test case; > 1 means faster."""

    variant: str
    baseline: str
    test_case: str
    kind: PromptKind
    stop: Stop = "fixed"
    tpot: float | None = Field(description="baseline p50 TPOT / variant p50 TPOT (decode speed).")
    itl: float | None = Field(description="baseline p50 token-weighted ITL / variant p50.")
    e2e: float | None = Field(description="baseline p50 end-to-end latency / variant p50.")
    throughput: float | None = Field(description="variant output tok/s / baseline output tok/s.")


class BenchResults(_Model):
    schema_version: Literal[1] = SCHEMA_VERSION
    created_at: datetime
    settings: RunSettings
    variants: list[VariantInfo]
    baseline_variant: str | None = Field(
        default=None, description="The variant speedups are against, chosen at run time (config `baseline`)."
    )
    node_hourly_price_usd: float | None = Field(
        default=None, description="The config's trn2_nodes.hourly_price_usd at run time; None: no cost shown."
    )
    runs: list[CaseRun]

    @model_validator(mode="after")
    def _runs_name_known_variants(self) -> BenchResults:
        names = [v.name for v in self.variants]
        if not names:
            raise ValueError("variants is empty; a results file names at least one variant (its baseline)")
        if len(set(names)) != len(names):
            raise ValueError(f"variants {names} repeat a name; each variant needs its own")
        if self.baseline_variant is not None and self.baseline_variant not in names:
            raise ValueError(f"baseline_variant={self.baseline_variant!r} is not among variants {names}")
        unknown = sorted({r.variant for r in self.runs} - set(names))
        if unknown:
            raise ValueError(f"runs name variant(s) {unknown} that are not among variants {names}")
        return self

    @property
    def baseline(self) -> str:
        """The baseline recorded at run time; files from before it was recorded: `baseline`, else the first."""
        if self.baseline_variant is not None:
            return self.baseline_variant
        names = [v.name for v in self.variants]
        return "baseline" if "baseline" in names else names[0]

    def run(self, variant: str, test_case: str, stop: Stop = "fixed") -> CaseRun | None:
        return next(
            (r for r in self.runs if r.variant == variant and r.test_case == test_case and r.stop == stop), None
        )

    def speedups(self) -> list[Speedup]:
        out: list[Speedup] = []
        base_name = self.baseline
        for run in self.runs:
            if run.variant == base_name:
                continue
            base = self.run(base_name, run.test_case, run.stop)
            if base is None:
                continue
            b, v = base.summary, run.summary
            out.append(
                Speedup(
                    variant=run.variant,
                    baseline=base_name,
                    test_case=run.test_case,
                    kind=run.kind,
                    stop=run.stop,
                    tpot=_ratio(b.tpot_s.p50, v.tpot_s.p50),
                    itl=_ratio(b.itl_s.p50, v.itl_s.p50),
                    e2e=_ratio(b.e2e_s.p50, v.e2e_s.p50),
                    throughput=_ratio(v.output_tok_s, b.output_tok_s),
                )
            )
        return out


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


class ResultsError(ValueError):
    """A results file that cannot be read, phrased for the person at the keyboard."""


RESULTS_MAX_BYTES = 1024**3  # a results or sweep file holds every request's record: far less, even for long sweeps


def read_text(file: Path, *, where: str, fix: str) -> str:
    """A results or sweep file's text, read through config/bounded_file.py (a FIFO, device or directory is refused
    without opening it; the size is bounded), as a ResultsError sentence naming it and `fix` on any problem."""
    try:
        raw = bounded_file.read_bounded(
            file, where=where, max_bytes=RESULTS_MAX_BYTES, limit_name="a results file", expect=fix, unreadable_fix=fix
        )
    except bounded_file.UnreadableFile as err:
        raise ResultsError(str(err)) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ResultsError(f"{where} is not UTF-8 text (byte {err.start}); {fix}") from None


def load_results(path: str | Path) -> BenchResults:
    file = Path(path)
    text = read_text(file, where=f"results file {str(file)!r}", fix="pass a file written by `bench run`")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ResultsError(
            f"results file {str(file)!r} is not JSON ({err}); pass a file written by `bench run`"
        ) from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise ResultsError(
            f"results file {str(file)!r} has schema_version={version!r}; this bench reads version {SCHEMA_VERSION}. "
            "Re-run `bench run` or use the bench version that wrote it"
        )
    try:
        return BenchResults.model_validate(data)
    except ValidationError as err:
        first = pydantic_errors.sentence(err.errors()[0], fixes={}, default="{loc}: {msg}")
        raise ResultsError(f"results file {str(file)!r}: {first}") from None


def save_results(results: BenchResults, path: str | Path) -> Path:
    return save_json(results.model_dump_json(indent=1), path)


def folder_problem(folder: Path) -> str | None:
    """Why a report folder cannot take files, as a phrase, found before the work that fills it (a sweep used to
    fail after its whole grid): bench sweep, bench sweep-report and ops.coldstart_report check it first."""
    if folder.exists() and not folder.is_dir():
        return "is not a directory"
    probe = folder / ".bench-write-probe"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        return f"cannot be written ({err.strerror})"
    return None


def save_json(text: str, path: str | Path) -> Path:
    """Write atomically and durably: a temporary file, fsync'd, renamed over the old one, directory fsync'd.
    A crash or Ctrl-C at any moment leaves either the previous complete file or the new one."""
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(f".{file.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(text + "\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, file)
    directory = os.open(file.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return file
