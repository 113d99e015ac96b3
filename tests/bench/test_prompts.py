from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.prompts import DEFAULT_SUITE, SuiteError, load_suite, parse_suite


def test_default_suite_has_the_reference_and_blog_cases() -> None:
    prompts = [c.prompt for c in DEFAULT_SUITE]
    for text in [
        "counting numbers from 1 ",
        "a",
        "hello world ",
        "the cat sat on the mat. ",
        "Output valid JSON with fixed keys",
        "Write a simple Python function skeleton",
        "List numbers from one to twenty",
        "I believe the meaning of life is",
    ]:
        assert text in prompts
    assert any(p.startswith("Shall I compare thee to a summer's day?") for p in prompts)
    assert any(p.startswith("Repeat the following line exactly 50 times") for p in prompts)
    assert len(DEFAULT_SUITE) == 10 and len({c.name for c in DEFAULT_SUITE}) == 10
    assert {c.kind for c in DEFAULT_SUITE} == {"structured", "open-ended"}
    assert load_suite("default") == list(DEFAULT_SUITE)


def test_user_suites_in_yaml_and_json(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("test_cases:\n  - {name: sql, prompt: 'SELECT', kind: structured}\n")
    (tmp_path / "s.json").write_text(json.dumps([{"name": "poem", "prompt": "Write a poem", "kind": "open-ended"}]))
    assert [c.name for c in load_suite(str(tmp_path / "s.yaml"))] == ["sql"]
    assert load_suite(str(tmp_path / "s.json"))[0].kind == "open-ended"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            [{"name": "x", "prompt": "p", "kind": "creative"}],
            "test_cases[0].kind='creative' is not allowed; use structured",
        ),
        ([{"name": "x", "kind": "structured"}], "test_cases[0].prompt is missing; add it"),
        ([{"name": "Bad Name", "prompt": "p", "kind": "structured"}], "test_cases[0].name='Bad Name': must be 1-63"),
        ([{"name": "x", "prompt": "", "kind": "structured"}], "test_cases[0].prompt is empty; write the prompt"),
        ([{"name": "x", "prompt": "p", "kind": "structured", "temp": 1}], "test_cases[0].temp is not a known field"),
        ({"test_cases": []}, "test_cases has no test cases; add at least one"),
        ([{"name": "x", "prompt": "p", "kind": "structured"}] * 2, "name(s) x used twice"),
        ("just text", "expected a list of test cases"),
    ],
)
def test_suite_errors_name_the_field_and_the_fix(data: object, message: str) -> None:
    with pytest.raises(SuiteError) as err:
        parse_suite(data, where="mine.yaml")
    assert str(err.value).startswith("mine.yaml: ") and message in str(err.value)


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match=r"cannot be read .*; pass `default` or a YAML/JSON file"):
        load_suite(str(tmp_path / "nope.yaml"))
    (tmp_path / "bad.json").write_text("[")
    with pytest.raises(SuiteError, match="is not valid json"):
        load_suite(str(tmp_path / "bad.json"))
