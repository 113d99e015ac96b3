"""Bench fixtures: scripted streaming servers on 127.0.0.1, each in its own process, and recorded /metrics."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from bench.prompts import DEFAULT_SUITE
from bench.results import BenchResults
from bench.runner import Endpoint, run_benchmark
from bench.standin.selfcheck import loopback_server
from bench.standin.server import Script
from tests.bench.builders import quiet, run_settings

FIXTURES = Path(__file__).with_name("fixtures")
ROOT = Path(__file__).resolve().parents[2]

Serve = Callable[[Script], str]


@pytest.fixture(scope="module")
def serve() -> Iterator[Serve]:
    """A loopback server for a Script (one per distinct Script) and its URL; all stop when the module ends."""
    urls: dict[Script, str] = {}
    with ExitStack() as stack:

        def start(script: Script) -> str:
            if script not in urls:
                urls[script] = stack.enter_context(loopback_server(script, lifetime_s=300))
            return urls[script]

        yield start


def usage_error(main: Callable[[list[str]], object], argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What argparse wrote to stderr when it refused `argv`: it exits 2 before anything is run."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err


@pytest.fixture
def fixture_text() -> Callable[[str], str]:
    return lambda name: (FIXTURES / name).read_text()


DIVERGES_AT = 9
BASELINE = Script(ttft_s=0.03, step_s=0.01, pattern=(1,))
SPECULATIVE = Script(
    stack="vllm-neuron",  # its vLLM reports acceptance
    ttft_s=0.03,
    step_s=0.01,
    pattern=(1, 4, 3, 4),
    prompt_patterns=(("meaning of life", (1, 1, 2, 1)), ("Shall I compare", (1, 2, 1, 1))),
    num_speculative_tokens=4,
    diverge=(("Output valid JSON", DIVERGES_AT),),  # the json case's outputs differ from token 9 on
)
CASES = ("counting", "sonnet", "json", "meaning-of-life")  # in suite order
MAX_TOKENS = 30
REQUESTS = 4


@pytest.fixture(scope="session")
def two_servers() -> Iterator[dict[str, str]]:
    """A baseline (one token per step, no spec metrics) and a speculative server (multi-token chunks, V1
    counters) whose chunking depends on the prompt, so structured cases gain more than open-ended ones, and
    whose output for the json case diverges from the baseline's at token DIVERGES_AT."""
    with loopback_server(BASELINE, 300) as base, loopback_server(SPECULATIVE, 300) as spec:
        yield {"baseline": base, "speculative": spec}


@pytest.fixture(scope="session")
def bench_results(two_servers: dict[str, str]) -> BenchResults:
    """One real run of the runner against both servers: reused by runner, report and CloudWatch tests."""
    settings = run_settings(concurrency=REQUESTS, requests=REQUESTS, warmup=1, max_tokens=MAX_TOKENS)
    endpoints = [Endpoint(name, url) for name, url in two_servers.items()]
    cases = [c for c in DEFAULT_SUITE if c.name in CASES]
    return asyncio.run(run_benchmark(endpoints, cases, settings, options=quiet()))
