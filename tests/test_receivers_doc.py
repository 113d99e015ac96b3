"""docs/receivers.md names the test that holds each receiver's rule: every test it names must exist, so a renamed or
deleted test cannot leave a rule that only looks encoded."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "receivers.md"
# `tests/x.py::test_name`, or `::test_name` after one that named its file in the same table cell
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)?(?:::(\w+))?(?:\[[^\]]*\])?`")


def named_tests(text: str) -> list[tuple[str, str]]:
    found = []
    for cell in (cell for line in text.splitlines() if line.startswith("|") for cell in line.split("|")):
        current = None
        for match in REFERENCE.finditer(cell):
            path, name = match.groups()
            current = path or current
            if name:
                assert current, f"docs/receivers.md names ::{name} without its file in the same cell"
                found.append((current, name))
    return found


def test_every_test_the_receivers_doc_names_exists() -> None:
    named = named_tests(DOC.read_text())
    assert len(named) > 30, "the receivers table names the tests that encode each rule"
    missing = [
        f"{path}::{name}"
        for path, name in named
        if not (ROOT / path).is_file() or not re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.MULTILINE)
    ]
    assert not missing, f"docs/receivers.md names tests that do not exist: {missing}"
