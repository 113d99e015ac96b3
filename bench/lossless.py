"""Greedy equivalence: at temperature 0, does each speculative output equal the baseline's, token for token?

Why: speculative decoding with exact verification must not change the output distribution; at temperature 0
that means the same tokens. Both variants get the same prompt list (request i of a case sends the same prompt
to every variant), so request i of the speculative run is compared with request i of the baseline's.

Token ids are compared when the server sent them for both outputs; otherwise the text, and the position is
counted in the baseline's streamed chunks (exact when the baseline streams one token per chunk, as a
non-speculative vLLM does; else the first token of the chunk, marked approximate).

A divergence is a fact to report, not by itself a bug: bf16 arithmetic in a different batch shape or kernel
(the verifier scores k+1 positions at once) can flip an argmax between two near-tied tokens, after which the
outputs legitimately differ. The rate, and where the first divergence falls, are what to look at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench import table
from bench.results import BenchResults, RequestRecord, Stop

_EXCERPT = 24  # characters of text shown for each side of a text divergence


@dataclass(frozen=True)
class Divergence:
    """The first difference of one output pair."""

    request: int  # index of the request (the same prompt in both runs)
    position: int  # output token index where the outputs first differ
    exact: bool  # False: position is the first token of the baseline chunk holding the first differing character
    baseline: str  # the baseline's token there (token id, or text)
    variant: str  # the variant's token there (token id, or text from the same character offset)
    by: str  # "token ids" or "text"


@dataclass(frozen=True)
class CaseCheck:
    """One speculative variant against the baseline on one test case (and stop mode)."""

    variant: str
    baseline: str
    test_case: str
    stop: Stop
    compared: int  # request pairs where both sides succeeded with an output
    divergences: list[Divergence]

    @property
    def rate(self) -> float | None:
        return len(self.divergences) / self.compared if self.compared else None


def first_divergence(base: RequestRecord, other: RequestRecord, request: int = 0) -> Divergence | None:
    """None when the outputs are identical (token ids if both have them, else text)."""
    if base.output_token_ids is not None and other.output_token_ids is not None:
        a, b = base.output_token_ids, other.output_token_ids
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return Divergence(request, i, True, str(x), str(y), "token ids")
        if len(a) == len(b):
            return None
        i = min(len(a), len(b))
        end = "(end)"
        return Divergence(
            request, i, True, str(a[i]) if i < len(a) else end, str(b[i]) if i < len(b) else end, "token ids"
        )
    a_text, b_text = base.output_text, other.output_text
    if a_text == b_text:
        return None
    c = next((i for i, (x, y) in enumerate(zip(a_text, b_text, strict=False)) if x != y), min(len(a_text), len(b_text)))
    position, start, piece, exact = _chunk_at(base, c)
    other_piece = b_text[start : start + min(len(piece) or _EXCERPT, _EXCERPT)]
    return Divergence(request, position, exact, piece[:_EXCERPT] or "(end)", other_piece or "(end)", "text")


def _chunk_at(record: RequestRecord, offset: int) -> tuple[int, int, str, bool]:
    """(token position, character start, text, exact) of the baseline chunk that holds character `offset`."""
    start = position = 0
    for text, tokens in zip(record.chunk_texts, record.chunk_tokens, strict=True):
        if offset < start + len(text):
            return position, start, text, tokens == 1
        start += len(text)
        position += tokens
    return position, start, "", True  # past the end: the baseline's output stopped here


def check(results: BenchResults) -> list[CaseCheck]:
    """Every speculative variant's runs against the baseline's runs of the same test case and stop mode."""
    out: list[CaseCheck] = []
    for run in results.runs:
        if run.variant == results.baseline:
            continue
        base = results.run(results.baseline, run.test_case, run.stop)
        if base is None:
            continue
        compared = 0
        divergences: list[Divergence] = []
        for i, (b, v) in enumerate(zip(base.records, run.records, strict=False)):
            if not (_has_output(b) and _has_output(v)):
                continue
            compared += 1
            if (d := first_divergence(b, v, i)) is not None:
                divergences.append(d)
        out.append(CaseCheck(run.variant, results.baseline, run.test_case, run.stop, compared, divergences))
    return out


def _has_output(record: RequestRecord) -> bool:
    return record.ok and (bool(record.chunk_texts) or record.output_token_ids is not None)


def rows(checks: Sequence[CaseCheck]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the lossless table, shared by the console and the report."""
    header = ["test case", "stop", "variant", "identical/compared", "divergence rate", "first divergence"]
    body = []
    for c in checks:
        identical = c.compared - len(c.divergences)
        body.append(
            [
                c.test_case,
                c.stop,
                c.variant,
                f"{identical}/{c.compared}",
                "-" if c.rate is None else f"{c.rate:.0%}",
                describe(min(c.divergences, key=lambda d: d.position)) if c.divergences else "-",
            ]
        )
    return header, body


def describe(d: Divergence) -> str:
    where = f"token {d.position}" if d.exact else f"about token {d.position}"
    return f"request {d.request}, {where}: baseline {d.baseline!r} vs {d.variant!r} ({d.by})"


def overall(checks: Sequence[CaseCheck]) -> dict[str, tuple[int, int]]:
    """Per variant: (diverged, compared) over every test case."""
    totals: dict[str, tuple[int, int]] = {}
    for c in checks:
        d, n = totals.get(c.variant, (0, 0))
        totals[c.variant] = (d + len(c.divergences), n + c.compared)
    return totals


def format_lossless(results: BenchResults) -> str:
    """The console's lossless section: a table and one line per variant."""
    checks = check(results)
    if not checks:
        return "lossless check: no speculative run with a baseline run of the same test case to compare"
    header, body = rows(checks)
    lines = table.text(header, body)
    lines.insert(0, f"lossless check at temperature 0, each output against `{results.baseline}`'s for the same prompt:")
    for variant, (diverged, compared) in overall(checks).items():
        rate = f"{diverged / compared:.1%}" if compared else "-"
        lines.append(f"{variant}: {diverged} of {compared} outputs diverge from {results.baseline} ({rate})")
    return "\n".join(lines)
