"""Speculative-decoding acceptance from vLLM's Prometheus /metrics, for both engine generations.

Why here and not in the client: acceptance is a server-side count (drafted vs accepted tokens) that no
stream shows. We scrape /metrics before and after each (variant, test case) run and difference the counters.

- vLLM V1 (`vllm/v1/spec_decode/metrics.py`, class SpecDecodingProm): counters
  `vllm:spec_decode_num_drafts_total`, `..._num_draft_tokens_total`, `..._num_accepted_tokens_total` and
  `..._num_accepted_tokens_per_pos_total{position="i"}`; windowed deltas give exact acceptance.
- vLLM V0 (`vllm/engine/metrics.py` as of v0.9.1, the serving image's engine): gauges
  `vllm:spec_decode_draft_acceptance_rate`, `vllm:spec_decode_efficiency` and "counters"
  `vllm:spec_decode_num_{accepted,draft,emitted}_tokens_total`. Those counters are incremented every 5 s by
  the sampler's *running totals* (`PrometheusStatLogger.log` -> `_log_counter(..., accepted_tokens)` with
  `accepted_tokens = _aggregate_num_accepted_tokens`), so their deltas are not windowed counts. We report the
  gauges instead, which are cumulative since server start, and say so in `scope`.
- The Neuron fused-speculation path may fill neither: the result then says "not exposed" and the run goes on.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

import aiohttp
from pydantic import BaseModel, ConfigDict

# The series' names live in config/metrics.py (the live dashboard reads them too); V1/V0 name the engine generation.
from config.metrics import SPEC_ACCEPTED_PER_POSITION as V1_PER_POS
from config.metrics import SPEC_ACCEPTED_TOKENS as V1_ACCEPTED
from config.metrics import SPEC_DRAFT_TOKENS as V1_DRAFT_TOKENS
from config.metrics import SPEC_DRAFTS as V1_DRAFTS
from config.metrics import SPEC_V0_ACCEPTANCE_RATE as V0_ACCEPTANCE_RATE
from config.metrics import SPEC_V0_EFFICIENCY as V0_EFFICIENCY


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class Exposition:
    """A parsed /metrics page: samples, plus the families declared by `# TYPE` even when they have no samples
    (prometheus_client prints HELP/TYPE for a labelled metric that was never set)."""

    samples: list[Sample]
    declared: frozenset[str]

    def has(self, name: str) -> bool:
        return any(s.name == name for s in self.samples)

    def total(self, name: str, model: str | None = None) -> float | None:
        """Sum over every label set (e.g. several engines of one server); None when absent."""
        values = [s.value for s in self.samples if s.name == name and _model_matches(s, model)]
        return sum(values) if values else None

    def by_label(self, name: str, label: str, model: str | None = None) -> dict[str, float]:
        out: dict[str, float] = {}
        for s in self.samples:
            if s.name == name and label in s.labels and _model_matches(s, model):
                out[s.labels[label]] = out.get(s.labels[label], 0.0) + s.value
        return out


def _model_matches(sample: Sample, model: str | None) -> bool:
    return model is None or sample.labels.get("model_name", model) == model


_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+-?\d+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_TYPE = re.compile(r"^#\s*TYPE\s+(\S+)\s+(\S+)")


def parse_prometheus(text: str) -> Exposition:
    """Parse the Prometheus text exposition format (0.0.4), tolerating lines it does not understand."""
    samples: list[Sample] = []
    declared: set[str] = set()
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if m := _TYPE.match(line):
                name, kind = m.group(1), m.group(2)
                declared.add(name)
                if kind == "counter" and not name.endswith("_total"):
                    declared.add(name + "_total")  # OpenMetrics-style family names
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        try:
            value = float(m.group("value"))
        except ValueError:
            continue
        labels = {k: _unescape(v) for k, v in _LABEL.findall(m.group("labels") or "")}
        samples.append(Sample(m.group("name"), labels, value))
    return Exposition(samples, frozenset(declared))


def _unescape(value: str) -> str:
    return value.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")


class SpecDecodeResult(BaseModel):
    """Acceptance for one (variant, test case) window, or why there is none."""

    model_config = ConfigDict(extra="forbid")

    engine: Literal["v1", "v0", "none"]
    exposed: bool
    scope: Literal["window", "since_server_start"] | None = None
    note: str = ""
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    per_position: list[float] = []
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    system_efficiency: float | None = None


def acceptance(
    before: str | None,
    after: str | None,
    *,
    model_name: str | None = None,
    num_speculative_tokens: int | None = None,
) -> SpecDecodeResult:
    """Acceptance between two scrapes. `num_speculative_tokens` (k) lets V0's efficiency gauge give the mean
    acceptance length; pass it when known. Never raises on missing metrics: it explains in `note`."""
    if after is None:
        return SpecDecodeResult(engine="none", exposed=False, note="metrics not scraped: /metrics unreachable")
    post = parse_prometheus(after)
    if post.has(V1_DRAFTS) or (V1_DRAFTS in post.declared and not post.has(V0_ACCEPTANCE_RATE)):
        return _v1(parse_prometheus(before) if before is not None else None, post, model_name)
    if post.has(V0_ACCEPTANCE_RATE) or V0_ACCEPTANCE_RATE in post.declared:
        return _v0(post, model_name, num_speculative_tokens)
    return SpecDecodeResult(
        engine="none", exposed=False, note="not exposed: no vllm:spec_decode_* metrics on this server"
    )


def _v1(pre: Exposition | None, post: Exposition, model: str | None) -> SpecDecodeResult:
    if pre is None:
        return SpecDecodeResult(engine="v1", exposed=True, note="no scrape before the run, so no window to difference")
    names = (V1_DRAFTS, V1_DRAFT_TOKENS, V1_ACCEPTED)
    deltas = [(post.total(n, model) or 0.0) - (pre.total(n, model) or 0.0) for n in names]
    drafts, draft_tokens, accepted = deltas
    if any(d < 0 for d in deltas):
        return SpecDecodeResult(
            engine="v1", exposed=True, scope="window", note="counters went down: the server restarted mid-run"
        )
    if drafts == 0:
        return SpecDecodeResult(
            engine="v1",
            exposed=True,
            scope="window",
            drafts=0,
            draft_tokens=draft_tokens,
            accepted_tokens=accepted,
            note="exposed, but no speculative steps were counted in this window",
        )
    before_pos = pre.by_label(V1_PER_POS, "position", model)
    after_pos = post.by_label(V1_PER_POS, "position", model)
    positions = sorted(after_pos, key=lambda p: int(p) if p.isdigit() else math.inf)
    per_position = [(after_pos[p] - before_pos.get(p, 0.0)) / drafts for p in positions]
    return SpecDecodeResult(
        engine="v1",
        exposed=True,
        scope="window",
        acceptance_rate=accepted / draft_tokens if draft_tokens else None,
        mean_acceptance_length=1 + accepted / drafts,
        per_position=per_position,
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
    )


def _v0(post: Exposition, model: str | None, k: int | None) -> SpecDecodeResult:
    rate = post.total(V0_ACCEPTANCE_RATE, model)
    efficiency = post.total(V0_EFFICIENCY, model)
    if rate is None or math.isnan(rate):
        return SpecDecodeResult(
            engine="v0",
            exposed=False,
            note="not exposed: V0 spec-decode gauges are declared but never set (no speculative steps reported)",
        )
    efficiency = None if efficiency is None or math.isnan(efficiency) else efficiency
    mean_length = efficiency * (k + 1) if efficiency is not None and k else None
    note = "V0 gauges are cumulative since server start (V0 counters sum running totals, so not differenced)"
    if mean_length is None and efficiency is not None:
        note += "; pass k to turn efficiency into mean acceptance length"
    return SpecDecodeResult(
        engine="v0",
        exposed=True,
        scope="since_server_start",
        note=note,
        acceptance_rate=rate,
        mean_acceptance_length=mean_length,
        system_efficiency=efficiency,
    )


async def scrape(session: aiohttp.ClientSession, base_url: str, timeout_s: float = 10.0) -> tuple[str | None, str]:
    """GET <base_url>/metrics. Returns (text, "") or (None, why) so a missing endpoint never stops a run."""
    url = base_url.rstrip("/") + "/metrics"
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            if resp.status != 200:
                return None, f"GET {url} returned HTTP {resp.status}"
            return await resp.text(), ""
    except (aiohttp.ClientError, TimeoutError) as err:
        return None, f"GET {url} failed: {err!r}"


# --- Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding" -------------------


def expected_tokens_per_step(alpha: float, k: int) -> float:
    """E[tokens per target step] = (1 - a^(k+1)) / (1 - a) for acceptance rate a and k drafted tokens."""
    _check(alpha, k, 0.0)
    if alpha == 1.0:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def alpha_from_length(mean_length: float, k: int) -> float:
    """The per-token acceptance rate a whose expected tokens per step (1 - a^(k+1)) / (1 - a) equals the
    measured mean acceptance length L (1 + accepted / drafts). This, not vLLM's accepted / drafted ratio, is the
    model's alpha: L = 2.735 at k = 7 is a = 0.645, while accepted / drafted is 1.735 / 7 = 0.248."""
    _check(0.0, k, 0.0)
    if not 1.0 <= mean_length <= k + 1:
        raise ValueError(f"mean acceptance length {mean_length} is outside 1..k+1 = 1..{k + 1}; is k={k} right?")
    lo, hi = 0.0, 1.0
    for _ in range(60):  # expected_tokens_per_step grows with a: bisect to float precision
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_tokens_per_step(mid, k) < mean_length else (lo, mid)
    return (lo + hi) / 2


def expected_speedup(alpha: float, k: int, c: float) -> float:
    """Expected wall-time speedup S = (1 - a^(k+1)) / ((1 - a)(k c + 1)), c = draft step cost / target step cost."""
    _check(alpha, k, c)
    return expected_tokens_per_step(alpha, k) / (k * c + 1)


def _check(alpha: float, k: int, c: float) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"acceptance rate alpha={alpha} is outside 0..1")
    if k < 0:
        raise ValueError(f"k={k} drafted tokens must be >= 0")
    if c < 0:
        raise ValueError(f"cost ratio c={c} must be >= 0")
