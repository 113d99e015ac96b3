"""Prompt suites: the reference's eight test cases plus the blog's two, each labelled structured or open-ended.

Why the label: speculation pays on predictable text (repetition, lists, code, JSON) where the draft agrees with
the target, and not on open-ended prose; the report colours speedups by it. Users add their own suites as
YAML or JSON, either a list of cases or a mapping with `test_cases:`.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

Kind = Literal["structured", "open-ended"]

SONNET_18 = (
    "Shall I compare thee to a summer's day?\n"
    "Thou art more lovely and more temperate:\n"
    "Rough winds do shake the darling buds of May,\n"
    "And summer's lease hath all too short a date;\n"
)


class TestCase(BaseModel):
    """One prompt, sent identically to every variant."""

    __test__ = False  # not a pytest class
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Short id, used as the CloudWatch TestCase dimension.")
    prompt: str = Field(min_length=1)
    kind: Kind
    source: str = ""

    @field_validator("name")
    @classmethod
    def _name_shape(cls, name: str) -> str:
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", name):
            raise ValueError("must be 1-63 lowercase letters, digits or dashes, starting with a letter or digit")
        return name


_REF = "aws-neuron-eks-samples speculative_decoding_trn2_vllm"
_BLOG = "AWS blog on speculative decoding on Trainium2"

DEFAULT_SUITE: tuple[TestCase, ...] = (
    TestCase(name="counting", prompt="counting numbers from 1 ", kind="structured", source=_REF),
    TestCase(name="sonnet", prompt=SONNET_18, kind="open-ended", source=_REF),
    TestCase(name="single-a", prompt="a", kind="open-ended", source=_REF),
    TestCase(name="hello-world", prompt="hello world ", kind="structured", source=_REF),
    TestCase(name="cat-on-mat", prompt="the cat sat on the mat. ", kind="structured", source=_REF),
    TestCase(name="json", prompt="Output valid JSON with fixed keys", kind="structured", source=_REF),
    TestCase(name="python-skeleton", prompt="Write a simple Python function skeleton", kind="structured", source=_REF),
    TestCase(name="list-numbers", prompt="List numbers from one to twenty", kind="structured", source=_REF),
    TestCase(
        name="repeat-line",
        prompt="Repeat the following line exactly 50 times: The quick brown fox jumps over the lazy dog.",
        kind="structured",
        source=_BLOG,
    ),
    TestCase(name="meaning-of-life", prompt="I believe the meaning of life is", kind="open-ended", source=_BLOG),
)


def variations(case: TestCase, n: int, seed: int) -> list[str]:
    """n distinct prompts for one case: a seeded request tag on the first line, then the case's prompt.

    Why the front: vLLM's prefix cache reuses the KV blocks of an identical prompt start, so n copies of one
    prompt would measure cache hits, not prefill. The same seed gives every variant the same n prompts."""
    rng = random.Random(f"{seed}:{case.name}")
    return [f"Request {rng.getrandbits(48):012x}.\n{case.prompt}" for _ in range(n)]


class SuiteError(ValueError):
    """A suite file problem, phrased as field, value and fix."""


class _SuiteFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    test_cases: list[TestCase] = Field(min_length=1)


def load_suite(spec: str) -> list[TestCase]:
    """`default`, or a path to a YAML/JSON file of test cases."""
    if spec == "default":
        return list(DEFAULT_SUITE)
    file = Path(spec)
    try:
        text = file.read_text()
    except OSError as err:
        raise SuiteError(f"suite {spec!r} is neither `default` nor a readable file ({err.strerror})") from None
    return parse_suite(_decode(file, text), where=str(file))


def _decode(file: Path, text: str) -> Any:
    try:
        return json.loads(text) if file.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise SuiteError(f"suite file {str(file)!r} is not valid {file.suffix.lstrip('.') or 'YAML'}: {err}") from None


def parse_suite(data: Any, where: str = "suite") -> list[TestCase]:
    if isinstance(data, list):
        data = {"test_cases": data}
    if not isinstance(data, dict):
        raise SuiteError(f"{where}: expected a list of test cases or a mapping with `test_cases:`")
    try:
        cases = _SuiteFile.model_validate(data).test_cases
    except ValidationError as err:
        raise SuiteError("\n".join(f"{where}: {_sentence(e)}" for e in err.errors())) from None
    names = [c.name for c in cases]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise SuiteError(f"{where}: test case name(s) {', '.join(dups)} used twice; give every case a unique name")
    return cases


def _sentence(error: Any) -> str:
    parts = [str(p) for p in error["loc"]]
    loc = parts[0] + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in parts[1:]) if parts else "suite"
    kind = error["type"]
    value = error.get("input")
    if kind == "missing":
        return f"{loc} is missing; add it (name, prompt and kind are required)"
    if kind == "extra_forbidden":
        return f"{loc} is not a known field; use only name, prompt, kind and source"
    if kind == "literal_error":
        return f"{loc}={value!r} is not allowed; use structured or open-ended"
    if kind == "string_too_short":
        return f"{loc} is empty; write the prompt text"
    if kind == "too_short":
        return f"{loc} has no test cases; add at least one"
    return f"{loc}={value!r}: {error['msg'].removeprefix('Value error, ')}; fix the value"
