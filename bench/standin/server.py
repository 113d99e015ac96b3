"""A scripted OpenAI-compatible streaming server on 127.0.0.1 whose per-token timing is known exactly.

Why: the client's TTFT, TPOT and token-weighted ITL must be checked against truth, including chunks that carry
several tokens as speculative decoding produces, and a real vLLM needs accelerators. Tests and
`python -m bench.standin.selfcheck` start it with `python -m bench.standin.server`; it prints `LISTENING <url>` and
stops by itself after --lifetime-s.

Chunk i of a response is sent at request arrival + ttft + i * step (absolute schedule, so lateness does not
accumulate); chunk sizes cycle through --pattern. Each chunk is one engine step.

/metrics speaks one serving stack's vLLM (--stack NAME, its LiveMetrics in serving_stacks/contract.py): exactly the
series of it that the dashboard, KEDA, the alert rules and bench read, with that vLLM's labels, in Prometheus' text
format, driven by the requests served: TTFT per request, one inter-token interval per request per chunk, generated
tokens (or steps, where that vLLM counts steps), decode time and output tokens per finished request, requests waiting
for a sequence slot and running, and, only where the stack reports acceptance, chunks after the first as one
speculative step each with k drafted and (size - 1) accepted tokens. Without --stack it serves no vLLM series.

Load: a step takes either the linear model (--step-ms + --step-per-seq-ms x running) or, with a step-time curve
(--step-table FILE --table-k K, or --step-curve), the measured time at the running batch (bench/standin/step_table.py),
so a sweep over two stand-ins sees a memory-bound floor and then a compute-bound slope, as on an accelerator.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

from bench.standin.step_table import Curve, StepTable, StepTableError, step_at
from config.live_metrics import POSITION_LABEL, STACK_NAMES, LiveMetrics, of_stack, total

Usage = Literal["auto", "final", "none"]
# Misbehaviour after the second chunk: `data: null`, a line that is not JSON, or closing without [DONE].
Fault = Literal["none", "null-event", "not-json", "truncate"]


@dataclass(frozen=True)
class Script:
    """How the server answers: timing, chunking, which usage it reports, which metrics it exposes."""

    ttft_s: float = 0.2
    step_s: float = 0.04
    pattern: tuple[int, ...] = (1,)
    usage: Usage = "auto"  # auto: like vLLM, per-chunk usage only when the request asks continuous_usage_stats
    token_ids: bool = False
    stack: str | None = None  # whose vLLM's series /metrics serves (config.live_metrics.STACK_NAMES); None: none
    num_speculative_tokens: int = 7
    model: str = "loopback-model"
    fail_every: int = 0  # answer HTTP 503 to every n-th completion request (0: never)
    prompt_patterns: tuple[tuple[str, tuple[int, ...]], ...] = ()  # (substring, pattern): per-prompt chunking
    fault: Fault = "none"
    # (prompt substring, token position): from that position on, prompts containing it get other tokens
    diverge: tuple[tuple[str, int], ...] = ()
    eos_after: int | None = None  # without ignore_eos, the output ends here (finish_reason "stop")
    # A model of load (bench sweep): each step after the first chunk takes step_s + step_per_seq_s x (requests
    # running then); at most max_num_seqs run at once, the rest wait in arrival order (0: no limit).
    step_per_seq_s: float = 0.0
    max_num_seqs: int = 0
    # A measured model of load instead of the linear one: step seconds per batch (bench/standin/step_table.py).
    step_curve: Curve = ()

    @property
    def live_metrics(self) -> LiveMetrics | None:
        return of_stack(self.stack) if self.stack else None

    def step_at(self, running: int) -> float:
        """Seconds of one step while `running` requests are in the batch."""
        if self.step_curve:
            return step_at(self.step_curve, max(running, 1))
        return self.step_s + self.step_per_seq_s * running

    def tpot_at(self, running: int, tokens: int, prompt: str = "") -> float:
        """TPOT (e2e - TTFT) / (tokens - 1) of a `tokens`-token response while `running` requests are in the batch."""
        steps = len(self.chunk_sizes(tokens, prompt)) - 1
        return steps * self.step_at(running) / (tokens - 1) if tokens > 1 else 0.0

    def diverges_at(self, prompt: str) -> int | None:
        return next((at for sub, at in self.diverge if sub in prompt), None)

    def output(self, tokens: int, prompt: str = "") -> tuple[str, list[int]]:
        """The text and token ids of a response of `tokens` tokens to `prompt`."""
        at = self.diverges_at(prompt)
        return "".join(_token_text(i, at) for i in range(tokens)), [_token_id(i, at) for i in range(tokens)]

    def chunk_sizes(self, tokens: int, prompt: str = "") -> list[int]:
        pattern = next((p for sub, p in self.prompt_patterns if sub in prompt), self.pattern)
        sizes: list[int] = []
        left = tokens
        while left > 0:
            sizes.append(min(pattern[len(sizes) % len(pattern)], left))
            left -= sizes[-1]
        return sizes

    def truth(self, tokens: int, prompt: str = "") -> dict[str, float]:
        """What an exact client should report for a response of `tokens` tokens (seconds)."""
        sizes = self.chunk_sizes(tokens, prompt)
        times = [self.ttft_s + i * self.step_s for i in range(len(sizes))]
        after_first = sum(sizes[1:])
        e2e = times[-1]
        return {
            "ttft": self.ttft_s,
            "e2e": e2e,
            "tpot": (e2e - self.ttft_s) / (tokens - 1) if tokens > 1 else 0.0,
            "itl_mean": (times[-1] - times[0]) / after_first if after_first else 0.0,
        }


# Bucket bounds: vLLM 0.29.0's TTFT buckets up to 10 s (vllm/v1/metrics/loggers.py:797-820) for every latency, and
# 1-2-5 steps for token counts as both pinned vLLMs build them (build_1_2_5_buckets). Both vLLMs use other bounds for
# some histograms; a quantile over these differs only in resolution.
SECONDS_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
TOKENS_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


@dataclass
class Histogram:
    """A Prometheus histogram's state: cumulative bucket counts by upper bound, sum and count."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    sum: float = 0.0
    count: int = 0

    def observe(self, value: float) -> None:
        if not self.counts:
            self.counts = [0] * len(self.bounds)
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, cumulative count) per bucket, +Inf last."""
        counts = self.counts or [0] * len(self.bounds)
        return [(_number(b), c) for b, c in zip(self.bounds, counts, strict=True)] + [("+Inf", self.count)]


def _number(value: float) -> str:
    """A bucket bound as prometheus_client writes it (floatToGoString: 1.0, 0.25, +Inf)."""
    return repr(float(value))


@dataclass
class _State:
    requests: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: list[int] = field(default_factory=list)
    running: int = 0
    waiting: int = 0
    generated: int = 0  # generated tokens, or steps where the stack's vLLM counts steps
    ttft: Histogram = field(default_factory=lambda: Histogram(SECONDS_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(SECONDS_BUCKETS))
    decode_time: Histogram = field(default_factory=lambda: Histogram(SECONDS_BUCKETS))
    output_tokens: Histogram = field(default_factory=lambda: Histogram(TOKENS_BUCKETS))
    received: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=200))


_WORDS = ("alpha", "beta", "gamma", "delta")  # ' ' + 4-5 letters: near-uniform token text length
DIVERGED_ID_OFFSET = 1000  # token i after a scripted divergence has id 1000 + i and text " zeta"


def _token_text(i: int, diverge_at: int | None = None) -> str:
    if diverge_at is not None and i >= diverge_at:
        return " zeta"
    return " " + _WORDS[i % len(_WORDS)][:4]


def _token_id(i: int, diverge_at: int | None = None) -> int:
    return i + DIVERGED_ID_OFFSET if diverge_at is not None and i >= diverge_at else i


def make_app(script: Script) -> web.Application:
    server = _Server(script)
    app = web.Application()
    app.router.add_get("/v1/models", server.models)
    app.router.add_get("/health", server.health)
    app.router.add_get("/metrics", server.metrics)
    app.router.add_get("/debug/requests", server.debug_requests)
    app.router.add_post("/v1/completions", server.complete)
    app.router.add_post("/v1/chat/completions", server.complete)
    return app


PROMPT_TOKENS = 7  # what usage reports for every prompt
# What the scripted fault adds after the second chunk; "truncate" instead ends the stream there.
FAULT_EVENTS: dict[Fault, bytes] = {
    "none": b"",
    "null-event": b"data: null\n\n",
    "not-json": b"data: {oops\n\n",
    "truncate": b"",
}


class _Server:
    """The handlers of one stand-in: its script, the live series' state, and the sequence slots of its batch."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.state = _State(per_pos=[0] * script.num_speculative_tokens)
        self.slots = asyncio.Semaphore(script.max_num_seqs or 1_000_000)  # 0: no limit

    async def models(self, _: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.script.model, "object": "model"}]})

    async def health(self, _: web.Request) -> web.Response:
        return web.Response(status=200)

    async def metrics(self, _: web.Request) -> web.Response:
        return web.Response(text=_exposition(self.script, self.state), content_type="text/plain", charset="utf-8")

    async def debug_requests(self, _: web.Request) -> web.Response:
        return web.json_response(list(self.state.received))

    async def complete(self, request: web.Request) -> web.StreamResponse:
        arrived = time.perf_counter()
        body = await request.json()
        log: dict[str, Any] = {"body": body, "arrived": arrived, "sent": []}
        state = self.state
        state.received.append(log)
        state.requests += 1
        if self.script.fail_every and state.requests % self.script.fail_every == 0:
            return web.json_response({"error": {"message": "scripted failure", "code": 503}}, status=503)
        asked = _Asked.read(self.script, body, chat=request.path.endswith("/chat/completions"))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        state.waiting += 1
        await self.slots.acquire()  # queued until a sequence slot frees, like a full vLLM batch
        state.waiting -= 1
        due = _started(self.script, arrived) + self.script.ttft_s
        state.running += 1
        try:
            await self._stream(resp, asked, body, log, due)
        finally:
            state.running -= 1
            self.slots.release()
        await resp.write_eof()
        return resp

    async def _stream(
        self, resp: web.StreamResponse, asked: _Asked, body: dict[str, Any], log: dict[str, Any], due: float
    ) -> None:
        """One chunk per engine step, the first at `due`, each logged as sent and counted in the live series."""
        script, state = self.script, self.state
        reply = _Reply(script, asked, rid=f"cmpl-{state.requests}", created=int(time.time()))
        if asked.chat:  # vLLM's first chat chunk carries the role and no token
            await resp.write(reply.opening())
        prompt = _prompt(body, chat=asked.chat)
        sizes = script.chunk_sizes(asked.tokens, prompt)
        diverge_at = script.diverges_at(prompt)
        log["sizes"] = sizes
        for i, size in enumerate(sizes):
            await _sleep_until(due)
            last = i == len(sizes) - 1
            payload = reply.step(size, diverge_at, last=last)
            now = time.perf_counter()
            _count_output(state, script.live_metrics, log, size, now, finished=reply.produced if last else None)
            if i > 0:
                _count_step(state, size, script.num_speculative_tokens)
            if i == 1 and script.fault == "truncate":
                await resp.write(payload)
                return
            if i == 1:
                payload += FAULT_EVENTS[script.fault]
            if last:
                payload += reply.closing()
            log["sent"].append(now)
            await resp.write(payload)
            due += script.step_at(state.running)  # absolute schedule: lateness does not accumulate


@dataclass(frozen=True)
class _Asked:
    """What one completion request asks of the script: how many tokens, and which usage to report."""

    chat: bool
    tokens: int
    natural_end: bool  # the output stops at script.eos_after (finish_reason "stop") before max_tokens
    final_usage: bool
    per_chunk_usage: bool

    @classmethod
    def read(cls, script: Script, body: dict[str, Any], *, chat: bool) -> _Asked:
        tokens = int(body.get("max_tokens") or 16)
        natural_end = script.eos_after is not None and not body.get("ignore_eos") and script.eos_after < tokens
        options = body.get("stream_options") or {}
        final_usage = script.usage != "none" and bool(options.get("include_usage"))
        return cls(
            chat=chat,
            tokens=script.eos_after if natural_end else tokens,  # type: ignore[arg-type]
            natural_end=natural_end,
            final_usage=final_usage,
            per_chunk_usage=script.usage == "auto" and final_usage and bool(options.get("continuous_usage_stats")),
        )


def _prompt(body: dict[str, Any], *, chat: bool) -> str:
    messages = body.get("messages") or [{}]
    return str(messages[-1].get("content", "")) if chat else str(body.get("prompt", ""))


async def _sleep_until(due: float) -> None:
    delay = due - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


@dataclass
class _Reply:
    """The events of one streamed response, shaped as vLLM sends them."""

    script: Script
    asked: _Asked
    rid: str
    created: int
    produced: int = 0  # tokens sent so far

    def opening(self) -> bytes:
        """The chat response's first event: the assistant's role and no token."""
        first = _chunk(
            self.rid, self.created, self.script.model, True, {"role": "assistant", "content": ""}, None, None
        )
        if self.asked.per_chunk_usage:
            first["usage"] = _usage(PROMPT_TOKENS, 0)
        return _sse(first)

    def step(self, size: int, diverge_at: int | None, *, last: bool) -> bytes:
        """The event of the next `size` tokens."""
        chat, start = self.asked.chat, self.produced
        text = "".join(_token_text(start + j, diverge_at) for j in range(size))
        ids = [_token_id(start + j, diverge_at) for j in range(size)] if self.script.token_ids else None
        self.produced += size
        content: dict[str, Any] = {"content": text} if chat else {"text": text}
        finish = ("stop" if self.asked.natural_end else "length") if last else None
        event = _chunk(self.rid, self.created, self.script.model, chat, content, ids, finish)
        if self.asked.per_chunk_usage:
            event["usage"] = _usage(PROMPT_TOKENS, self.produced)
        return _sse(event)

    def closing(self) -> bytes:
        """After the last chunk: the usage-only event when the request asked for usage, then [DONE]."""
        if not self.asked.final_usage:
            return b"data: [DONE]\n\n"
        usage = {
            "id": self.rid,
            "object": "chat.completion.chunk" if self.asked.chat else "text_completion",
            "created": self.created,
            "model": self.script.model,
            "choices": [],
            "usage": _usage(PROMPT_TOKENS, self.produced),
        }
        return _sse(usage) + b"data: [DONE]\n\n"


def _started(script: Script, arrived: float) -> float:
    """When a request's clock starts: on arrival, or with a batch limit when it got a slot (TTFT then includes
    the wait in the queue, as the client sees it)."""
    return time.perf_counter() if script.max_num_seqs else arrived


def _chunk(
    rid: str, created: int, model: str, chat: bool, content: dict[str, Any], ids: list[int] | None, finish: str | None
) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if chat:
        choice["delta"] = content
    else:
        choice.update(content)
        choice["logprobs"] = None
    if ids is not None:
        choice["token_ids"] = ids
    kind = "chat.completion.chunk" if chat else "text_completion"
    return {"id": rid, "object": kind, "created": created, "model": model, "choices": [choice], "usage": None}


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _sse(event: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"


def _count_output(
    state: _State, metrics: LiveMetrics | None, log: dict[str, Any], size: int, now: float, *, finished: int | None
) -> None:
    """One chunk (one engine step) of a request into the live series, before it is logged as sent: TTFT for the first,
    an inter-token interval for the others (vLLM observes one per request per step), the generated tokens (or one per
    step where that vLLM counts steps), and with the last (`finished` tokens) the request's decode time and output."""
    sent: list[float] = log["sent"]
    if sent:
        state.itl.observe(now - sent[-1])
    else:
        state.ttft.observe(now - log["arrived"])
    state.generated += 1 if metrics is not None and metrics.generation_counts_steps else size
    if finished is not None:
        state.decode_time.observe(now - (sent[0] if sent else now))
        state.output_tokens.observe(finished)


def _count_step(state: _State, size: int, k: int) -> None:
    accepted = min(size - 1, k)
    state.drafts += 1
    state.draft_tokens += k
    state.accepted += accepted
    for pos in range(accepted):
        state.per_pos[pos] += 1


def _exposition(script: Script, state: _State) -> str:
    """The stack's vLLM series (script.live_metrics) with its labels, in Prometheus' text format 0.0.4 as
    prometheus_client writes it: HELP and TYPE per family, counters as <name>_total, histograms as cumulative
    _bucket{le} with +Inf, then _count and _sum."""
    m = script.live_metrics
    if m is None:
        return ""
    values = {"model_name": script.model, "engine": "0"}
    labels = ",".join(f'{name}="{_escape(values[name])}"' for name in m.labels)
    lines: list[str] = []

    def family(name: str, kind: str, doc: str) -> None:
        lines.extend([f"# HELP {name} {doc}", f"# TYPE {name} {kind}"])

    for name, value, doc in (
        (m.requests_running, state.running, "Number of requests in model execution batches."),
        (m.requests_waiting, state.waiting, "Number of requests waiting to be processed."),
    ):
        family(name, "gauge", doc)
        lines.append(f"{name}{{{labels}}} {float(value)}")
    family(total(m.generation_tokens), "counter", "Number of generation tokens processed.")
    lines.append(f"{total(m.generation_tokens)}{{{labels}}} {float(state.generated)}")
    for name, hist, doc in (
        (m.ttft, state.ttft, "Histogram of time to first token in seconds."),
        (m.itl, state.itl, "Histogram of the time between a request's successive steps in seconds."),
        (m.request_decode_time, state.decode_time, "Histogram of time spent in DECODE phase for request."),
        (m.request_generation_tokens, state.output_tokens, "Number of generation tokens processed."),
    ):
        family(name, "histogram", doc)
        lines += [f'{name}_bucket{{{labels},le="{le}"}} {float(c)}' for le, c in hist.cumulative()]
        lines += [f"{name}_count{{{labels}}} {float(hist.count)}", f"{name}_sum{{{labels}}} {float(hist.sum)}"]
    if m.acceptance is not None:
        a = m.acceptance
        for name, doc, value in (
            (a.drafts, "Number of spec decoding drafts.", state.drafts),
            (a.draft_tokens, "Number of draft tokens.", state.draft_tokens),
            (a.accepted_tokens, "Number of accepted tokens.", state.accepted),
        ):
            family(total(name), "counter", doc)
            lines.append(f"{total(name)}{{{labels}}} {float(value)}")
        name = total(a.accepted_per_position)
        family(name, "counter", "Accepted tokens per draft position.")
        lines += [f'{name}{{{labels},{POSITION_LABEL}="{i}"}} {float(v)}' for i, v in enumerate(state.per_pos)]
    return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    """A label value in the text format: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _parse_args(argv: list[str] | None = None) -> tuple[Script, int, float]:
    p = argparse.ArgumentParser(prog="python -m bench.standin.server", description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on stdout)")
    p.add_argument("--ttft-ms", type=float, default=200.0)
    p.add_argument("--step-ms", type=float, default=40.0, help="time between chunks")
    p.add_argument("--pattern", default="1", help="tokens per chunk, cycled, e.g. 1,3,2")
    p.add_argument("--usage", choices=["auto", "final", "none"], default="auto")
    p.add_argument("--token-ids", action="store_true", help="send choices[0].token_ids")
    p.add_argument(
        "--stack",
        choices=STACK_NAMES,
        help="whose vLLM's live series /metrics serves (that stack's names and labels); without it, none",
    )
    p.add_argument("--k", type=int, default=7, help="drafted tokens per step in the acceptance counters")
    p.add_argument("--model", default="loopback-model")
    p.add_argument("--fail-every", type=int, default=0)
    p.add_argument("--fault", choices=["none", "null-event", "not-json", "truncate"], default="none")
    p.add_argument(
        "--pattern-for", action="append", default=[], metavar="TEXT=1,2", help="chunking for prompts containing TEXT"
    )
    p.add_argument(
        "--diverge-for", action="append", default=[], metavar="TEXT=N", help="other tokens from position N on"
    )
    p.add_argument("--eos-after", type=int, default=None, help="without ignore_eos, stop after this many tokens")
    p.add_argument("--step-per-seq-ms", type=float, default=0.0, help="step time added per running request")
    p.add_argument("--max-num-seqs", type=int, default=0, help="requests running at once, the rest queue (0: no limit)")
    p.add_argument(
        "--step-table", help="measured step times (bench/standin/step_table.py format): the step at the running batch"
    )
    p.add_argument("--table-k", type=int, default=0, help="with --step-table: 0 the target alone, else k drafted")
    p.add_argument("--time-scale", type=float, default=1.0, help="with --step-table: multiply every step time")
    p.add_argument("--step-curve", help="step ms per batch, e.g. 1:25.6,16:27.1,64:32.9 (instead of --step-table)")
    p.add_argument("--lifetime-s", type=float, default=600.0, help="exit after this long, whatever happens")
    a = p.parse_args(argv)
    try:
        pattern = _pattern(a.pattern)
        per_prompt = tuple((text, _pattern(spec)) for text, _, spec in (x.rpartition("=") for x in a.pattern_for))
        diverge = tuple((text, int(at)) for text, _, at in (x.rpartition("=") for x in a.diverge_for))
    except ValueError:
        p.error("--pattern, --pattern-for and --diverge-for need integers, e.g. 1,3,2 and 'meaning of life=1'")
    try:
        curve = _curve(a.step_curve) if a.step_curve else ()
        if a.step_table:
            if a.table_k < 0 or not a.time_scale > 0:
                raise StepTableError(f"--table-k {a.table_k} must be >= 0 and --time-scale {a.time_scale} > 0")
            curve = StepTable.load(a.step_table).curve(a.table_k, a.time_scale)
    except StepTableError as err:
        p.error(str(err))
    script = Script(
        ttft_s=a.ttft_ms / 1000,
        step_s=a.step_ms / 1000,
        pattern=pattern,
        usage=a.usage,
        token_ids=a.token_ids,
        stack=a.stack,
        num_speculative_tokens=a.k,
        model=a.model,
        fail_every=a.fail_every,
        prompt_patterns=per_prompt,
        fault=a.fault,
        diverge=diverge,
        eos_after=a.eos_after,
        step_per_seq_s=a.step_per_seq_ms / 1000,
        max_num_seqs=a.max_num_seqs,
        step_curve=curve,
    )
    return script, a.port, a.lifetime_s


def _curve(spec: str) -> Curve:
    """`1:25.6,16:27.1` (batch:ms) as (batch, seconds) pairs, increasing batch."""
    try:
        pairs = sorted((int(b), float(ms) / 1000) for b, _, ms in (x.partition(":") for x in spec.split(",")))
    except ValueError:
        raise StepTableError(f"--step-curve {spec!r} is not batch:ms pairs, e.g. 1:25.6,16:27.1,64:32.9") from None
    if not pairs or pairs[0][0] < 1 or min(t for _, t in pairs) <= 0:
        raise StepTableError(f"--step-curve {spec!r} needs batches >= 1 and step times > 0")
    return tuple(pairs)


def _pattern(spec: str) -> tuple[int, ...]:
    pattern = tuple(int(x) for x in spec.split(","))
    if not pattern or min(pattern) < 1:
        raise ValueError(spec)
    return pattern


async def serve(script: Script, port: int, lifetime_s: float) -> None:
    runner = web.AppRunner(make_app(script), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    host, bound = runner.addresses[0][:2]
    print(f"LISTENING http://{host}:{bound}", flush=True)
    try:
        await asyncio.sleep(lifetime_s)
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    script, port, lifetime = _parse_args(argv)
    asyncio.run(serve(script, port, lifetime))


if __name__ == "__main__":
    main()
