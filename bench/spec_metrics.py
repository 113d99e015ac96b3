"""Speculative-decoding acceptance from vLLM's Prometheus /metrics, read with the serving stack's own counters.

Why here and not in the client: acceptance is a server-side count (drafted vs accepted tokens) that no
stream shows. We scrape /metrics before and after each (variant, test case) run and difference the counters.

The names are the stack's (serving_stacks/contract.py LiveMetrics.acceptance, handed on by config/live_metrics.py):
- vllm-neuron (vLLM 0.29.0's V1 engine, `vllm/v1/spec_decode/metrics.py` SpecDecodingProm): counters
  `vllm:spec_decode_num_drafts_total`, `..._num_draft_tokens_total`, `..._num_accepted_tokens_total` and
  `..._num_accepted_tokens_per_pos_total{position="i"}`; windowed deltas give exact acceptance.
- legacy-v0 (vLLM 0.9.1's V0 engine on Neuron): none. Its Neuron worker never fills the spec-decode worker metrics
  that V0's `vllm:spec_decode_*` series are set from; the result says so with the stack's reason, and `bench report`
  shows tokens per streamed chunk instead.
Without the variant's stack (no config, or an endpoint that is no profile) every stack's counters are tried.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

import aiohttp
from pydantic import BaseModel, ConfigDict

from config.live_metrics import POSITION_LABEL, VOCABULARIES, AcceptanceCounters, LiveMetrics, total


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
    """Acceptance for one (variant, test case) window, or why there is none. `engine` "v1": vLLM V1's counters;
    "v0", `scope` "since_server_start" and `system_efficiency` are read from results files of earlier versions, which
    also read V0's gauges (no pinned stack sets them)."""

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
    metrics: LiveMetrics | None = None,
    model_name: str | None = None,
) -> SpecDecodeResult:
    """Acceptance between two scrapes, with the variant's stack's counters (`metrics`: the profile's
    live_metrics), or without them with every stack's. Never raises on missing metrics: it explains in `note`."""
    if metrics is not None and metrics.acceptance is None:
        return SpecDecodeResult(engine="none", exposed=False, note=f"not exposed: {metrics.no_acceptance}")
    if after is None:
        return SpecDecodeResult(engine="none", exposed=False, note="metrics not scraped: /metrics unreachable")
    post = parse_prometheus(after)
    candidates = [metrics.acceptance] if metrics is not None and metrics.acceptance else _every_stacks_counters()
    served = next((c for c in candidates if post.has(total(c.drafts)) or total(c.drafts) in post.declared), None)
    if served is None:
        names = ", ".join(sorted({total(c.drafts) for c in candidates}))
        return SpecDecodeResult(engine="none", exposed=False, note=f"not exposed: no {names} on this server")
    return _window(parse_prometheus(before) if before is not None else None, post, served, model_name)


def _every_stacks_counters() -> list[AcceptanceCounters]:
    return list(dict.fromkeys(m.acceptance for m in VOCABULARIES if m.acceptance is not None))


def _window(pre: Exposition | None, post: Exposition, c: AcceptanceCounters, model: str | None) -> SpecDecodeResult:
    if pre is None:
        return SpecDecodeResult(engine="v1", exposed=True, note="no scrape before the run, so no window to difference")
    names = (total(c.drafts), total(c.draft_tokens), total(c.accepted_tokens))
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
    per_pos = total(c.accepted_per_position)
    before_pos = pre.by_label(per_pos, POSITION_LABEL, model)
    after_pos = post.by_label(per_pos, POSITION_LABEL, model)
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
