"""The default prompt suite as data: the reference's eight test cases plus the blog's two, each labelled
structured or open-ended. bench/prompts.py validates and runs them; the dashboard in stacks/ draws one row
per case from the same names and kinds, so both read them here (and stacks need not import the benchmark).

Why the label: speculation pays on predictable text (repetition, lists, code, JSON) where the draft agrees with
the target, and not on open-ended prose; the report colours speedups by it and the dashboard names it per row.

Leaf module: imports nothing of ours but the prompt kinds, from their own leaf config/prompt_kind.py.
"""

from __future__ import annotations

from typing import NamedTuple

from config.prompt_kind import PromptKind


class Case(NamedTuple):
    name: str  # the CloudWatch TestCase dimension
    prompt: str
    kind: PromptKind
    source: str


SONNET_18 = (
    "Shall I compare thee to a summer's day?\n"
    "Thou art more lovely and more temperate:\n"
    "Rough winds do shake the darling buds of May,\n"
    "And summer's lease hath all too short a date;\n"
)

_REF = "aws-neuron-eks-samples speculative_decoding_trn2_vllm"
_BLOG = "AWS blog on speculative decoding on Trainium2"

DEFAULT_CASES: tuple[Case, ...] = (
    Case("counting", "counting numbers from 1 ", "structured", _REF),
    Case("sonnet", SONNET_18, "open-ended", _REF),
    Case("single-a", "a", "open-ended", _REF),
    Case("hello-world", "hello world ", "structured", _REF),
    Case("cat-on-mat", "the cat sat on the mat. ", "structured", _REF),
    Case("json", "Output valid JSON with fixed keys", "structured", _REF),
    Case("python-skeleton", "Write a simple Python function skeleton", "structured", _REF),
    Case("list-numbers", "List numbers from one to twenty", "structured", _REF),
    Case(
        "repeat-line",
        "Repeat the following line exactly 50 times: The quick brown fox jumps over the lazy dog.",
        "structured",
        _BLOG,
    ),
    Case("meaning-of-life", "I believe the meaning of life is", "open-ended", _BLOG),
)
