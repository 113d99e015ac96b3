"""The streaming client against real HTTP servers on 127.0.0.1 that stream with known timing."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import urllib.request
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.client import (
    LoadResult,
    RawStream,
    Target,
    discover_model,
    make_session,
    poisson_arrivals,
    request_body,
    run_load,
    share_by_text,
)
from bench.results import summarize
from bench.standin.selfcheck import server_log
from bench.standin.server import Script
from tests.bench.conftest import Serve


def completions(url: str, **load: Any) -> LoadResult:
    """`run_load` of the prompt "hi" through the completions API of the loopback server at `url`, to the end."""
    return asyncio.run(run_load(Target(url, "loopback-model", "completions"), "hi", **load))


FAST = {"ttft_s": 0.03, "step_s": 0.005}


def _log(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(url + "/debug/requests", timeout=10) as resp:
        return json.loads(resp.read())


def test_request_asks_for_greedy_fixed_length_stream_with_usage() -> None:
    chat = request_body(Target("http://x", "m", "chat"), "hi", 600)
    assert chat["messages"] == [{"role": "user", "content": "hi"}] and "prompt" not in chat
    assert (chat["max_tokens"], chat["min_tokens"], chat["ignore_eos"], chat["temperature"]) == (600, 600, True, 0.0)
    assert chat["stream"] and chat["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    plain = request_body(Target("http://x", "m", "completions"), "hi", 5, continuous_usage=False)
    assert plain["prompt"] == "hi" and plain["stream_options"] == {"include_usage": True}
    natural = request_body(Target("http://x", "m", "chat"), "hi", 600, stop="natural")
    assert natural["max_tokens"] == 600 and "min_tokens" not in natural and "ignore_eos" not in natural
    assert natural["temperature"] == 0.0
    assert Target("http://x/", "m", "completions").url == "http://x/v1/completions"


@pytest.mark.parametrize(
    ("api", "usage", "token_ids", "continuous", "source"),
    [
        ("chat", "auto", False, True, "usage_per_chunk"),
        ("completions", "auto", False, True, "usage_per_chunk"),
        ("completions", "final", True, True, "token_ids"),
        ("chat", "final", False, True, "usage_text_share"),
        ("completions", "auto", False, False, "usage_text_share"),
        ("completions", "none", False, True, "chunk_count"),
    ],
)
def test_tokens_per_chunk_follow_the_best_source(
    serve: Serve, api: str, usage: str, token_ids: bool, continuous: bool, source: str
) -> None:
    script = Script(pattern=(1, 3, 2, 4), usage=usage, token_ids=token_ids, **FAST)  # type: ignore[arg-type]
    url = serve(script)
    load = asyncio.run(
        run_load(
            Target(url, "loopback-model", api),  # type: ignore[arg-type]
            "hi",
            requests=2,
            max_tokens=23,
            concurrency=2,
            continuous_usage=continuous,
        )
    )
    expected = script.chunk_sizes(23)
    text, ids = script.output(23)
    for r in load.records:
        assert r.ok and r.token_source == source
        assert r.output_text == text and len(r.chunk_texts) == len(expected)  # what the lossless check compares
        assert r.output_token_ids == (ids if token_ids else None)
        assert len(r.chunk_tokens) == len(expected) and len(r.chunk_times_s) == len(expected)
        if source == "chunk_count":  # no usage: one per chunk, flagged
            assert r.usage_missing and r.output_tokens == len(expected)
        else:  # the server's count, and the exact split except for the text share of uneven chunks
            assert not r.usage_missing and r.output_tokens == 23 and sum(r.chunk_tokens) == 23
            if source != "usage_text_share":
                assert r.chunk_tokens == expected
    # the text-share estimate is exact here because every token's text has the same length
    if source == "usage_text_share":
        assert load.records[0].chunk_tokens == expected


def test_natural_stop_ends_at_end_of_sequence_and_is_not_a_short_output(serve: Serve) -> None:
    url = serve(Script(eos_after=9, **FAST))
    target = Target(url, "loopback-model", "chat")
    for stop, tokens in (("fixed", 23), ("natural", 9)):
        load = asyncio.run(run_load(target, "hi", requests=2, max_tokens=23, concurrency=2, stop=stop))  # type: ignore[arg-type]
        assert [r.output_tokens for r in load.records] == [tokens, tokens]
        summary = summarize(load.records, duration_s=load.duration_s, max_tokens=23, stop=stop)  # type: ignore[arg-type]
        assert summary.short_outputs == 0 and summary.ok == 2


def test_64_streams_of_multi_token_chunks_are_all_recorded_and_token_weighted(serve: Serve) -> None:
    """64 concurrent streams with multi-token chunks (as speculation sends): every request is recorded with the
    server's chunking and token count. How close the timings are to the server's is measured by
    perf/client_accuracy.py and `python -m bench.standin.selfcheck`, not asserted here."""
    script = Script(ttft_s=0.2, step_s=0.02, pattern=(1, 3, 2, 4))
    url = serve(script)
    tokens = 100

    async def go() -> Any:
        async with make_session(limit=64) as session:
            target = Target(url, "loopback-model", "completions")
            await run_load(target, "hi", requests=64, max_tokens=2, concurrency=64, session=session)  # connect
            return await run_load(target, "hi", requests=64, max_tokens=tokens, concurrency=64, session=session)

    load = asyncio.run(go())
    s = summarize(load.records, duration_s=load.duration_s, max_tokens=tokens)
    assert s.ok == 64 and s.errors == 0 and s.output_tokens == 64 * tokens
    assert all(r.chunk_tokens == script.chunk_sizes(tokens) for r in load.records)
    # token weighting: a 4-token chunk after 40 ms is four 10 ms tokens, not one 40 ms gap; per-chunk ITL
    # (what `vllm bench serve` reports) overstates it by tokens per chunk: 99 tokens in 39 chunks after the first
    per_chunk_gaps = [b - a for r in load.records for a, b in zip(r.chunk_times_s, r.chunk_times_s[1:], strict=False)]
    assert statistics.fmean(per_chunk_gaps) / s.itl_s.mean == pytest.approx(99 / 39, rel=1e-6)


def test_warmup_is_sent_but_not_recorded(serve: Serve) -> None:
    url = serve(Script(**FAST))
    before = len(_log(url))
    load = completions(url, requests=3, max_tokens=4, concurrency=2, warmup=2)
    assert len(load.records) == 3
    assert len(_log(url)) - before == 5


def test_errors_are_recorded_not_raised(serve: Serve) -> None:
    url = serve(Script(fail_every=2, **FAST))
    load = completions(url, requests=6, max_tokens=4, concurrency=1)
    failed = [r for r in load.records if not r.ok]
    assert len(failed) == 3 and all(r.error and "HTTP 503" in r.error for r in failed)
    assert summarize(load.records, duration_s=load.duration_s, max_tokens=4).errors == 3
    closed = asyncio.run(
        run_load(Target("http://127.0.0.1:9", "m", "completions"), "hi", requests=2, max_tokens=4, concurrency=2)
    )
    assert all(r.error and "Connect" in r.error for r in closed.records)


@pytest.mark.timing
def test_rate_mode_follows_seeded_poisson_arrivals(serve: Serve) -> None:
    arrivals = poisson_arrivals(2000, rate=50.0, seed=7)
    assert arrivals == poisson_arrivals(2000, rate=50.0, seed=7) != poisson_arrivals(2000, rate=50.0, seed=8)
    gaps = [b - a for a, b in zip([0.0, *arrivals], arrivals, strict=False)]
    assert statistics.fmean(gaps) == pytest.approx(1 / 50, rel=0.1)
    url = serve(Script(**FAST))
    load = completions(url, requests=10, max_tokens=3, rate=40.0, seed=3)
    # when each request was started (start_s is when it reached the socket, after connection set-up)
    starts = [r.start_s - r.send_delay_s for r in load.records]
    for got, planned in zip(starts, poisson_arrivals(10, 40.0, 3), strict=True):
        assert got == pytest.approx(planned, abs=0.05)


@pytest.mark.timing
def test_load_is_bounded_in_time(serve: Serve) -> None:
    url = serve(Script(ttft_s=0.05, step_s=0.05))
    load = completions(url, requests=100, max_tokens=3, concurrency=1, max_duration_s=0.3)
    assert 1 <= len(load.records) <= 4 and load.duration_s < 3.0  # 100 requests of >= 0.15 s would take 15 s
    with pytest.raises(ValueError, match="exactly one"):
        asyncio.run(run_load(Target(url, "m"), "hi", requests=1, max_tokens=1, concurrency=1, rate=1.0))


def test_discover_model(serve: Serve) -> None:
    url = serve(Script(model="Qwen/Qwen3-32B", **FAST))

    async def go(base: str) -> str:
        async with make_session() as session:
            return await discover_model(session, base)

    assert asyncio.run(go(url)) == "Qwen/Qwen3-32B"
    with pytest.raises(ConnectionError, match="pass --model"):
        asyncio.run(go("http://127.0.0.1:9"))


@given(total=st.integers(0, 2000), lengths=st.lists(st.integers(0, 200), max_size=60))
def test_text_share_sums_to_the_server_total(total: int, lengths: list[int]) -> None:
    shares = share_by_text(total, lengths)
    assert len(shares) == len(lengths) and all(s >= 0 for s in shares)
    if lengths:
        assert sum(shares) == (total if total > 0 else 0)
    if lengths and total >= len(lengths):
        assert min(shares) >= 1


def test_text_share_is_proportional() -> None:
    assert share_by_text(10, [4, 4, 8, 4]) == [2, 2, 4, 2]
    assert share_by_text(3, [1, 1, 1]) == [1, 1, 1]


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("null-event", "not a JSON object"),
        ("not-json", "not JSON"),
        ("truncate", "stream ended without `data: [DONE]` after 2 token chunk(s)"),
    ],
)
def test_a_misbehaving_stream_is_a_request_error_with_the_reason(serve: Serve, fault: str, reason: str) -> None:
    url = serve(Script(fault=fault, **FAST))  # type: ignore[arg-type]
    load = completions(url, requests=2, max_tokens=6, concurrency=2)
    assert [r.ok for r in load.records] == [False, False]
    assert all(r.error and reason in r.error and r.chunk_times_s == [] for r in load.records), load.records[0].error


def test_a_timeout_says_which_limit_it_hit(serve: Serve) -> None:
    url = serve(Script(ttft_s=5.0, step_s=0.01))
    load = completions(url, requests=1, max_tokens=3, concurrency=1, request_timeout_s=0.2)
    assert load.records[0].error == "timed out after 0.2 s (--request-timeout) with 0 bytes received"


def test_a_stream_without_usage_is_flagged_and_kept_out_of_token_metrics(serve: Serve) -> None:
    url = serve(Script(usage="none", **FAST))
    load = completions(url, requests=2, max_tokens=5, concurrency=2)
    s = summarize(load.records, duration_s=load.duration_s, max_tokens=5)
    assert s.ok == 2 and s.usage_missing == 2 and s.ttft_s.n == 2
    assert s.output_tokens == 0 and s.tpot_s.n == 0 and s.itl_s.n == 0


def _sse_line(event: object) -> bytes:
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def test_each_chunk_is_stamped_with_the_socket_read_that_completed_it() -> None:
    """Three events arrive in three socket reads, the first ending exactly with a read and the second split
    across two: each event's time is the read that brought its last byte. The reader resumed much later (a busy loop); that time is not used."""
    events = [
        _sse_line({"choices": [{"text": " a"}], "usage": {"completion_tokens": 1}}),
        _sse_line({"choices": [{"text": " b c"}], "usage": {"completion_tokens": 3}}),
        _sse_line({"choices": [{"text": " d"}], "usage": {"completion_tokens": 4}}),
        b"data: [DONE]\n\n",
    ]
    body = b"".join(events)
    split = len(events[0]) + 5  # the second event is cut after five bytes
    raw = RawStream(
        queued=10.0,
        sent=10.0,
        ended=11.0,
        body=bytearray(body),
        arrivals=[(0, 10.05), (len(events[0]) - 1, 10.1), (split, 10.15), (len(body), 10.2)],  # - 1: the blank line
        resumed=[(len(body), 10.9)],
    )
    r = raw.to_record(run_start=10.0)
    assert r.chunk_times_s == pytest.approx([0.1, 0.2, 0.2]) and r.chunk_tokens == [1, 2, 1]
    assert r.ttft_s == pytest.approx(0.1) and r.e2e_s == pytest.approx(1.0)
    assert raw.as_resumed().to_record(run_start=10.0).chunk_times_s == pytest.approx([0.9, 0.9, 0.9])


def test_streams_ending_together_are_stamped_after_the_server_wrote_and_before_we_parsed(serve: Serve) -> None:
    """The burst-end case (equal lengths, all finishing in the same instant), checked for causality only:
    every chunk's stamp lies between the server's write of it and our reader getting it. How close to the
    write is measured by perf/client_accuracy.py, not asserted here (a loaded machine would fail it)."""
    script = Script(ttft_s=0.08, step_s=0.01, pattern=(1, 3, 2, 4))
    url = serve(script)
    prompts = [f"burst {i}" for i in range(16)]

    async def go() -> Any:
        async with make_session(limit=16) as session:
            target = Target(url, "loopback-model", "completions")
            await run_load(target, "warm", requests=16, max_tokens=2, concurrency=16, session=session)
            return await run_load(target, prompts, requests=16, max_tokens=60, concurrency=16, session=session)

    load = asyncio.run(go())
    logs = {log["body"]["prompt"]: log for log in server_log(url, 32)}
    for i, (r, raw) in enumerate(zip(load.records, load.raw, strict=True)):
        log = logs[f"burst {i}"]
        assert r.ok and r.chunk_tokens == log["sizes"]
        resumed = raw.as_resumed().to_record(load.perf_start)
        send = load.perf_start + r.start_s
        for stamp, written, read in zip(r.chunk_times_s, log["sent"], resumed.chunk_times_s, strict=True):
            assert written - 1e-6 <= send + stamp <= send + read + 1e-6


def test_a_silent_endpoint_fails_in_the_probe_timeout_even_with_a_model_given() -> None:
    """With --model the run skipped GET /v1/models and waited --request-timeout for every request: 623 s per
    test case against a silent endpoint. The GET now runs anyway and bounds the wait."""
    from tests.silent_endpoint import silent_server

    async def go(base: str) -> str:
        async with make_session() as session:
            return await discover_model(session, base, 0.5, model="Qwen/Qwen3-32B")

    with silent_server() as port:
        started = time.monotonic()
        with pytest.raises(ConnectionError, match=f"cannot reach http://127.0.0.1:{port}/v1/models"):
            asyncio.run(go(f"http://127.0.0.1:{port}"))
        assert time.monotonic() - started < 5


def test_a_given_model_is_used_when_the_endpoint_answers(serve: Serve) -> None:
    url = serve(Script(model="Qwen/Qwen3-32B", **FAST))

    async def go() -> str:
        async with make_session() as session:
            return await discover_model(session, url, model="served-name")

    assert asyncio.run(go()) == "served-name"
