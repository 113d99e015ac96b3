"""Async streaming client for OpenAI-compatible servers (vLLM): completions and chat completions.

Why our own: llmperf divides by chunk count with a foreign tokenizer, and per-chunk ITL is wrong when one
chunk carries several tokens, as under speculative decoding. We ask at temperature 0 for a fixed output length
(`max_tokens` = `min_tokens`, `ignore_eos`) or, in the natural-stop mode, up to end-of-sequence; take token
counts from the server's usage, weight latency by tokens, and keep the output (chunk texts, token ids when
sent) for the lossless check.

Tokens per chunk, best source first:
1. `usage_per_chunk`: differences of the cumulative `usage.completion_tokens` vLLM puts on every chunk when
   asked with `stream_options.continuous_usage_stats` (we ask by default): exact.
2. `token_ids`: `len(choices[0].token_ids)` when the server sends them: exact.
3. `usage_text_share`: the final usage's total split over chunks in proportion to their text length (largest
   remainder, integers): exact when tokens have similar lengths, approximate otherwise, and the total is
   always the server's.
4. `chunk_count`: no usage at all: one token per non-empty chunk; the record says `usage_missing`.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import gc
import json
import os
import random
import time
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import aiohttp
from aiohttp.client_proto import ResponseHandler

from bench.results import RequestRecord, Stop, TokenSource
from config.api_key import API_KEY_ENV

Api = Literal["chat", "completions"]


@dataclass(frozen=True)
class Target:
    """One OpenAI-compatible server and the model it serves."""

    base_url: str
    model: str
    api: Api = "chat"

    @property
    def url(self) -> str:
        path = "/v1/chat/completions" if self.api == "chat" else "/v1/completions"
        return self.base_url.rstrip("/") + path


def request_body(
    target: Target, prompt: str, max_tokens: int, *, continuous_usage: bool = True, stop: Stop = "fixed"
) -> dict[str, Any]:
    """Greedy and streamed. `fixed`: exactly max_tokens (`min_tokens`, `ignore_eos`), so every variant produces
    the same number of tokens; `natural`: the model stops at end-of-sequence, max_tokens only caps it."""
    options: dict[str, bool] = {"include_usage": True}
    if continuous_usage:
        options["continuous_usage_stats"] = True
    body: dict[str, Any] = {"model": target.model, "max_tokens": max_tokens}
    if stop == "fixed":
        body |= {"min_tokens": max_tokens, "ignore_eos": True}
    body |= {"temperature": 0.0, "stream": True, "stream_options": options}
    if target.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


@dataclass
class _Chunk:
    """One streamed event that may carry tokens."""

    t: float
    text: str
    ids: list[int] | None
    usage_delta: int | None


def _choice_text(choice: dict[str, Any]) -> str:
    if "text" in choice:
        return choice.get("text") or ""
    delta = choice.get("delta") or {}
    return (delta.get("content") or "") + (delta.get("reasoning_content") or "")


async def _mark_sent(_: aiohttp.ClientSession, ctx: Any, __: Any) -> None:
    sent = ctx.trace_request_ctx
    if isinstance(sent, dict) and "t" not in sent:
        sent["t"] = time.perf_counter()


class _StampingHandler(ResponseHandler):
    """aiohttp's connection protocol, plus the time of every socket read that fed the current response body.

    `data_received` runs as soon as the event loop sees the socket readable, before any coroutine of ours:
    that is when a chunk arrived, however long the loop then takes to resume the reader (at a burst of
    streams ending together it is busy finishing the others)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stamped: object | None = None
        self.stamps: list[tuple[int, float]] = []

    def data_received(self, data: bytes) -> None:
        t = time.perf_counter()
        super().data_received(data)
        payload = self._payload
        if payload is None:
            return
        if payload is not self.stamped:
            self.stamped, self.stamps = payload, []
        self.stamps.append((payload.total_bytes, t))


def make_session(limit: int = 0, headers: Mapping[str, str] | None = None) -> aiohttp.ClientSession:
    """A session that timestamps the moment each request body is handed to the socket and every socket read
    of a response (see receive_one); `headers` go on every request (e.g. the endpoint's arm override)."""
    trace = aiohttp.TraceConfig()
    trace.on_request_chunk_sent.append(_mark_sent)
    connector = aiohttp.TCPConnector(limit=limit)
    if not hasattr(connector, "_factory"):
        raise RuntimeError(f"aiohttp {aiohttp.__version__} has no TCPConnector._factory; use the pinned aiohttp")
    connector._factory = functools.partial(_StampingHandler, loop=asyncio.get_running_loop())
    return aiohttp.ClientSession(
        connector=connector,
        trace_configs=[trace],
        trust_env=False,
        headers={**auth_headers(os.environ), **(headers or {})},
    )


def auth_headers(env: Mapping[str, str]) -> dict[str, str]:
    """`Authorization: Bearer <key>` when the services require an API key (the bench Job gets it from the Secret)."""
    key = env.get(API_KEY_ENV, "")
    return {"Authorization": f"Bearer {key}"} if key else {}


@dataclass
class RawStream:
    """What the receive path keeps of one request: bytes and when they arrived. Parsing and the record are
    built later (`to_record`), off the receive path, so finishing one stream never delays the others' stamps."""

    queued: float
    sent: float | None = None
    ended: float = 0.0
    body: bytearray = field(default_factory=bytearray)
    arrivals: list[tuple[int, float]] = field(default_factory=list)  # (body bytes so far, perf_counter)
    resumed: list[tuple[int, float]] = field(default_factory=list)  # the same, when our reader got the bytes
    error: str | None = None

    def arrival(self, end: int) -> float:
        """When the body byte ending at offset `end` arrived."""
        i = bisect.bisect_left(self.arrivals, end, key=lambda a: a[0])
        return self.arrivals[min(i, len(self.arrivals) - 1)][1]

    def as_resumed(self) -> RawStream:
        """This stream stamped when the reader resumed instead of at the socket read: for measuring the gain."""
        return RawStream(self.queued, self.sent, self.ended, self.body, self.resumed, self.resumed, self.error)

    def to_record(self, run_start: float) -> RequestRecord:
        t0 = self.sent if self.sent is not None else self.queued
        base = RequestRecord(
            start_s=round(t0 - run_start, 6), send_delay_s=round(t0 - self.queued, 6), e2e_s=round(self.ended - t0, 6)
        )
        if self.error is not None:
            return base.model_copy(update={"error": self.error})
        try:
            chunks, final_usage = self._events()
        except _StreamError as err:
            return base.model_copy(update={"error": str(err)})
        if not chunks:
            return base.model_copy(update={"error": "stream ended without any token"})
        tokens, source = _tokens_per_chunk(chunks, final_usage)
        kept = _kept_chunks(chunks, tokens, t0)
        if not kept:
            return base.model_copy(update={"error": "usage reports zero output tokens"})
        total = final_usage.get("completion_tokens") if final_usage else None
        exact = total is not None or source in ("usage_per_chunk", "token_ids")
        ids = [i for c in chunks for i in c.ids or ()] if all(c.ids is not None for c in chunks) else None
        return base.model_copy(
            update={
                "ttft_s": round(kept[0][0], 6),
                "output_tokens": int(total) if total is not None else sum(n for _, n, _ in kept),
                "usage_missing": not exact,
                "token_source": source,
                "chunk_times_s": [round(t, 6) for t, _, _ in kept],
                "chunk_tokens": [n for _, n, _ in kept],
                "chunk_texts": [text for _, _, text in kept],
                "output_token_ids": ids,
            }
        )

    def _events(self) -> tuple[list[_Chunk], dict[str, Any] | None]:
        """Token-carrying chunks with their arrival times, and the final usage. Raises _StreamError with the
        reason for anything a well-behaved server would not send."""
        chunks: list[_Chunk] = []
        final_usage: dict[str, Any] | None = None
        last_cumulative = 0
        end = 0
        body = bytes(self.body)
        for number, raw in enumerate(body.splitlines(keepends=True), start=1):
            end += len(raw)
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                return chunks, final_usage
            usage, choices = _event(number, data)
            final_usage = usage or final_usage
            if not choices:
                continue
            delta = None
            cumulative = _cumulative_tokens(number, data, usage)
            if cumulative is not None:
                delta, last_cumulative = cumulative - last_cumulative, cumulative
            text, ids = _first_choice(number, data, choices)
            if text or ids or (delta or 0) > 0:
                chunks.append(_Chunk(self.arrival(end), text, ids, delta))
        raise _StreamError(
            f"stream ended without `data: [DONE]` after {len(chunks)} token chunk(s): the server closed it early"
        )


def _event(number: int, data: bytes) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The usage and choices of the `data:` event on line `number`, or _StreamError for one a well-behaved server
    would not send."""
    try:
        event = json.loads(data)
    except ValueError:
        raise _malformed(number, data, "not JSON") from None
    if not isinstance(event, dict):
        raise _malformed(number, data, "not a JSON object")
    if "error" in event:
        raise _StreamError(f"server error in stream: {json.dumps(event['error'])[:300]}")
    usage, choices = event.get("usage"), event.get("choices") or []
    if usage is not None and not isinstance(usage, dict):
        raise _malformed(number, data, "usage is not an object")
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise _malformed(number, data, "choices is not a list of objects")
    return usage, choices


def _cumulative_tokens(number: int, data: bytes, usage: dict[str, Any] | None) -> int | None:
    """The event's cumulative `usage.completion_tokens` (continuous usage stats), None when it has none."""
    cumulative = usage.get("completion_tokens") if usage else None
    if cumulative is not None and not isinstance(cumulative, int):
        raise _malformed(number, data, "usage.completion_tokens is not an integer")
    return cumulative


def _first_choice(number: int, data: bytes, choices: list[dict[str, Any]]) -> tuple[str, list[int] | None]:
    """The text and token ids of the event's first choice."""
    try:
        ids = choices[0].get("token_ids")
        return _choice_text(choices[0]), None if ids is None else [int(i) for i in ids]
    except (AttributeError, TypeError, ValueError):
        raise _malformed(number, data, "choices[0] has no text, delta or integer token_ids") from None


def _malformed(number: int, data: bytes, why: str) -> _StreamError:
    return _StreamError(f"malformed event on line {number} ({data[:60]!r}): {why}")


class _StreamError(Exception):
    """Why a received stream cannot be trusted, as a sentence for the record's error."""


async def receive_one(
    session: aiohttp.ClientSession,
    target: Target,
    prompt: str,
    max_tokens: int,
    *,
    continuous_usage: bool = True,
    timeout_s: float = 600.0,
    stop: Stop = "fixed",
) -> RawStream:
    """Send one streaming request and keep its raw bytes with the time of each socket read.

    Latency counts from when the request was written to the socket (sessions from `make_session`), not from
    when this coroutine started: at a burst of 64 streams, building and queueing requests in this one Python
    process takes milliseconds that the server never saw. That client-side wait, including connection set-up,
    is kept as `send_delay_s`."""
    body = request_body(target, prompt, max_tokens, continuous_usage=continuous_usage, stop=stop)
    raw = RawStream(queued=time.perf_counter())
    sent: dict[str, float] = {}
    reads: list[tuple[int, float]] = []
    stamps: list[tuple[int, float]] | None = None
    try:
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        async with session.post(target.url, json=body, timeout=timeout, trace_request_ctx=sent) as resp:
            if resp.status != 200:
                raw.error = f"HTTP {resp.status}: {(await resp.text(errors='replace'))[:300]}"
            else:
                proto = resp.connection.protocol if resp.connection is not None else None
                if isinstance(proto, _StampingHandler) and proto.stamped is resp.content:
                    stamps = proto.stamps
                while data := await resp.content.readany():
                    raw.body += data
                    reads.append((len(raw.body), time.perf_counter()))
    except TimeoutError:
        raw.error = f"timed out after {timeout_s:g} s (--request-timeout) with {len(raw.body)} bytes received"
    except (aiohttp.ClientError, ValueError) as err:
        raw.error = f"{type(err).__name__}: {err}"[:300]
    raw.ended = time.perf_counter()
    raw.sent = sent.get("t")
    # socket-read stamps when this session has them; else the time each read returned to us
    raw.resumed = reads
    raw.arrivals = list(stamps) if stamps and stamps[-1][0] >= len(raw.body) else reads
    return raw


def _kept_chunks(chunks: list[_Chunk], tokens: list[int], t0: float) -> list[tuple[float, int, str]]:
    """(time since t0, tokens, text) of each chunk that carried tokens; text of a chunk counted as zero tokens
    moves to the next kept chunk (the last one at the end), so the texts still join to the whole output."""
    kept: list[tuple[float, int, str]] = []
    carry = ""
    for c, n in zip(chunks, tokens, strict=True):
        if n > 0:
            kept.append((c.t - t0, n, carry + c.text))
            carry = ""
        else:
            carry += c.text
    if kept and carry:
        t, n, text = kept[-1]
        kept[-1] = (t, n, text + carry)
    return kept


def _tokens_per_chunk(chunks: list[_Chunk], final_usage: dict[str, Any] | None) -> tuple[list[int], TokenSource]:
    if all(c.usage_delta is not None for c in chunks):
        return [max(c.usage_delta or 0, 0) for c in chunks], "usage_per_chunk"
    if all(c.ids is not None for c in chunks):
        return [len(c.ids or ()) for c in chunks], "token_ids"
    if final_usage and final_usage.get("completion_tokens") is not None:
        return share_by_text(int(final_usage["completion_tokens"]), [len(c.text) for c in chunks]), "usage_text_share"
    return [len(c.ids) if c.ids is not None else 1 for c in chunks], "chunk_count"


def share_by_text(total: int, text_lengths: list[int]) -> list[int]:
    """Split `total` tokens over chunks in proportion to text length (largest remainder), sum exactly `total`,
    and give every chunk at least one token when there are enough, since a chunk with text carried a token."""
    n = len(text_lengths)
    if n == 0 or total <= 0:
        return [0] * n
    weights = [max(x, 0) for x in text_lengths]
    whole = sum(weights)
    if whole == 0:
        weights, whole = [1] * n, n
    quotas = [total * w / whole for w in weights]
    shares = [int(q) for q in quotas]
    order = sorted(range(n), key=lambda i: quotas[i] - shares[i], reverse=True)
    for i in order[: total - sum(shares)]:
        shares[i] += 1
    if total >= n:
        for i in range(n):
            while shares[i] == 0:
                donor = max(range(n), key=lambda j: shares[j])
                shares[donor] -= 1
                shares[i] += 1
    return shares


@dataclass
class LoadResult:
    records: list[RequestRecord]
    started_at: datetime
    duration_s: float
    perf_start: float  # time.perf_counter() at the start; each record's start_s counts from it
    raw: list[RawStream] = field(default_factory=list, repr=False)  # what the records were built from


def _check_load(requests: int, concurrency: int | None, rate: float | None) -> None:
    if (concurrency is None) == (rate is None):
        raise ValueError("give exactly one of concurrency (closed loop) or rate (Poisson arrivals)")
    if concurrency is not None and concurrency < 1:
        raise ValueError(f"concurrency={concurrency} must be >= 1")
    if rate is not None and not rate > 0:
        raise ValueError(f"rate={rate} requests/s must be > 0")
    if requests < 0:
        raise ValueError(f"requests={requests} must be >= 0")


@dataclass(frozen=True)
class _Sender:
    """What every request of one load shares; request i sends prompts[i % len(prompts)]."""

    session: aiohttp.ClientSession
    target: Target
    prompts: tuple[str, ...]
    max_tokens: int
    timeout_s: float
    continuous_usage: bool
    stop: Stop

    def send(self, index: int) -> Awaitable[RawStream]:
        return receive_one(
            self.session,
            self.target,
            self.prompts[index % len(self.prompts)],
            self.max_tokens,
            continuous_usage=self.continuous_usage,
            timeout_s=self.timeout_s,
            stop=self.stop,
        )


async def run_load(
    target: Target,
    prompt: str | Sequence[str],
    *,
    requests: int,
    max_tokens: int,
    concurrency: int | None = None,
    rate: float | None = None,
    warmup: int = 0,
    seed: int = 0,
    request_timeout_s: float = 600.0,
    max_duration_s: float | None = None,
    continuous_usage: bool = True,
    stop: Stop = "fixed",
    session: aiohttp.ClientSession | None = None,
) -> LoadResult:
    """Send `warmup` requests (discarded), then `requests` measured ones, either by `concurrency` workers
    back to back or at Poisson arrivals of `rate` per second (seeded, so every variant gets the same schedule).
    No new request starts after `max_duration_s`; each request ends by `request_timeout_s`. Given a list of
    prompts, request i sends prompt i (cycling), and records come back in request order.

    Records are built after the last stream ends: nothing proportional to a request runs while others are
    still receiving."""
    _check_load(requests, concurrency, rate)
    prompts = (prompt,) if isinstance(prompt, str) else tuple(prompt)
    if not prompts:
        raise ValueError("run_load needs at least one prompt")
    own = session is None
    if session is None:
        session = make_session(limit=concurrency or 0)
    sender = _Sender(session, target, prompts, max_tokens, request_timeout_s, continuous_usage, stop)
    try:
        if warmup > 0:
            await _closed_loop(sender, warmup, concurrency or warmup, None)
        started_at = datetime.now(UTC)
        t0 = time.perf_counter()
        deadline = t0 + max_duration_s if max_duration_s is not None else None
        with _heap_frozen():
            if rate is not None:
                raws = await _open_loop(sender, requests, rate, seed, t0, deadline)
            else:
                raws = await _closed_loop(sender, requests, concurrency or 1, deadline)
        duration = time.perf_counter() - t0
        records = [r.to_record(t0) for r in raws]
        return LoadResult(records, started_at=started_at, duration_s=duration, perf_start=t0, raw=raws)
    finally:
        if own:
            await session.close()


_frozen_loads = 0


@contextmanager
def _heap_frozen() -> Iterator[None]:
    """Keep the objects that exist before a measured load out of garbage collection while it runs.

    A full collection walks every tracked object (all of pydantic, aiohttp, ...): 40-50 ms of CPU with the
    event loop stopped, which stamps every chunk that arrives meanwhile late. Frozen, a collection during the
    load only walks what the load created. Counted, so overlapping loads (simultaneous mode) unfreeze once."""
    global _frozen_loads
    if _frozen_loads == 0:
        gc.freeze()
    _frozen_loads += 1
    try:
        yield
    finally:
        _frozen_loads -= 1
        if _frozen_loads == 0:
            gc.unfreeze()


async def _closed_loop(sender: _Sender, n: int, workers: int, deadline: float | None) -> list[RawStream]:
    raws: list[RawStream | None] = [None] * n
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < n and (deadline is None or time.perf_counter() < deadline):
            i = next_index
            next_index += 1
            raws[i] = await sender.send(i)

    await asyncio.gather(*(worker() for _ in range(min(workers, n))))
    return [r for r in raws if r is not None]


def poisson_arrivals(n: int, rate: float, seed: int) -> list[float]:
    """Arrival offsets (s) of a Poisson process: exponential gaps with mean 1/rate, reproducible by seed."""
    rng = random.Random(seed)
    t = 0.0
    out: list[float] = []
    for _ in range(n):
        t += rng.expovariate(rate)
        out.append(t)
    return out


async def _open_loop(
    sender: _Sender, n: int, rate: float, seed: int, run_start: float, deadline: float | None
) -> list[RawStream]:
    tasks: list[asyncio.Task[RawStream]] = []
    for index, offset in enumerate(poisson_arrivals(n, rate, seed)):
        at = run_start + offset
        if deadline is not None and at >= deadline:
            break
        delay = at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(sender.send(index)))
    return list(await asyncio.gather(*tasks))


async def discover_model(
    session: aiohttp.ClientSession, base_url: str, timeout_s: float = 30.0, *, model: str | None = None
) -> str:
    """The first model id from GET /v1/models, so users need not repeat what the server already knows. With
    `model` given, the same GET still runs as a reachability check: a silent endpoint then fails in timeout_s
    instead of costing --request-timeout for every request of every test case."""
    url = base_url.rstrip("/") + "/v1/models"
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            if model is not None:
                return model  # it answered; whether it lists models is not our business then
            if resp.status != 200:
                raise ConnectionError(f"GET {url} returned HTTP {resp.status}; is this an OpenAI-compatible server?")
            data = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError) as err:
        hint = "" if model is not None else ", or pass --model"
        raise ConnectionError(f"cannot reach {url} ({err!r}); check the URL or port-forward{hint}") from None
    models = data.get("data") if isinstance(data, dict) else None
    if not models:
        raise ConnectionError(f"GET {url} lists no models; pass --model")
    return str(models[0]["id"])
