"""Prompt suites: the default one (its cases are data in config/prompt_suite.py, beside the dashboard that draws
them) and users' own, as YAML or JSON, either a list of cases or a mapping with `test_cases:`.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from config import bounded_file, pydantic_errors
from config.prompt_kind import PromptKind
from config.prompt_suite import DEFAULT_CASES


class TestCase(BaseModel):
    """One prompt, sent identically to every variant."""

    __test__ = False  # not a pytest class
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Short id, used as the CloudWatch TestCase dimension.")
    prompt: str = Field(min_length=1)
    kind: PromptKind
    source: str = ""

    @field_validator("name")
    @classmethod
    def _name_shape(cls, name: str) -> str:
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", name):
            raise ValueError("must be 1-63 lowercase letters, digits or dashes, starting with a letter or digit")
        return name


# Validated here, so a malformed default case fails at import, like a user's suite file would at load.
DEFAULT_SUITE: tuple[TestCase, ...] = tuple(TestCase(**case._asdict()) for case in DEFAULT_CASES)


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


SUITE_MAX_BYTES = 16 * 1024 * 1024  # prompts for a benchmark, not a corpus


def load_suite(spec: str) -> list[TestCase]:
    """`default`, or a path to a YAML/JSON file of test cases."""
    if spec == "default":
        return list(DEFAULT_SUITE)
    file = Path(spec)
    fix = "pass `default` or a YAML/JSON file of test cases"
    try:
        raw = bounded_file.read_bounded(
            file,
            where=f"suite {spec!r}",
            max_bytes=SUITE_MAX_BYTES,
            limit_name="a suite",
            expect=fix,
            unreadable_fix=fix,
        )
        text = raw.decode("utf-8")
    except bounded_file.UnreadableFile as err:
        raise SuiteError(str(err)) from None
    except UnicodeDecodeError as err:
        raise SuiteError(f"suite {spec!r} is not UTF-8 text (byte {err.start}); {fix}") from None
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


_FIXES = {
    "missing": "{loc} is missing; add it (name, prompt and kind are required)",
    "extra_forbidden": "{loc} is not a known field; use only name, prompt, kind and source",
    "literal_error": "{loc}={value} is not allowed; use structured or open-ended",
    "string_too_short": "{loc} is empty; write the prompt text",
    "too_short": "{loc} has no test cases; add at least one",
}


def _sentence(error: Any) -> str:
    return pydantic_errors.sentence(error, fixes=_FIXES, default="{loc}={value}: {msg}; fix the value", where="suite")
