"""The sharded runner: every test runs in exactly one phase, and its closing line adds up what pytest said."""

from __future__ import annotations

from pathlib import Path

from tools.test_shards import OWN_SHARDS, TIMING_PATHS, counts, shards

ROOT = Path(__file__).resolve().parents[2]


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
    assert timing.args == [*TIMING_PATHS, "-m", "timing", "-x"]
    for shard in concurrent:  # a path inside another shard's folder (a file of tests/ops) runs in its own shard only
        mine = [a for a in shard.args if a.startswith("tests")]
        for other in own:
            if other not in mine and any(other.startswith(folder + "/") for folder in mine):
                assert f"--ignore={other}" in shard.args, (shard.name, other)
    assert any(other.startswith(f"{folder}/") for other in own for folder in own), "no nested path: test it again"


def test_every_timing_marked_test_is_where_the_timing_phase_collects():
    """The timing phase collects only TIMING_PATHS and the shards deselect timing tests: one marked elsewhere
    would run in no phase at all."""
    marked = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "tests").rglob("test_*.py")
        if "mark.timing" in p.read_text() and p.name != "test_test_shards.py"
    }
    assert marked, "no timing-marked test found: the scan is broken"
    outside = sorted(m for m in marked if not any(m.startswith(t + "/") for t in TIMING_PATHS))
    assert not outside, f"timing-marked tests outside {TIMING_PATHS}: {outside}; add their folder to TIMING_PATHS"
