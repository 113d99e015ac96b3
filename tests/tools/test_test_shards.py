"""The sharded runner: every test runs in exactly one phase, and its closing line adds up what pytest said."""

from __future__ import annotations

from tools.test_shards import OWN_SHARDS, counts, shards


def test_pytest_closing_lines_are_counted_including_failures_and_errors():
    out = "....\nFAILED tests/x.py::t\n2 failed, 400 passed, 1 skipped, 6 deselected, 1 error in 40.10s\n"
    assert counts(out) == {"passed": 400, "failed": 2, "errors": 1, "skipped": 1, "deselected": 6}
    assert counts("no closing line at all") == {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "deselected": 0}


def test_the_shards_cover_the_whole_suite_once_and_timing_tests_run_alone():
    concurrent, timing = shards(["-x"])
    own = [p for paths in OWN_SHARDS for p in paths.split()]
    rest = concurrent[0].args
    assert rest[0] == "tests" and sorted(
        a.removeprefix("--ignore=") for a in rest if a.startswith("--ignore=")
    ) == sorted(own)
    assert sorted(p for s in concurrent[1:] for p in s.args if p.startswith("tests/")) == sorted(own)
    assert all(s.args[-3:] == ["-m", "not timing", "-x"] for s in concurrent)
    assert timing.args == ["tests", "-m", "timing", "-x"]
