from __future__ import annotations

from pathlib import Path

import pytest

from bench.report import Source, load_many, markdown, write_report
from bench.results import BenchResults, save_results
from tests.bench.conftest import CASES


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_report_writes_markdown_and_plots(bench_results: BenchResults, tmp_path: Path) -> None:
    results = save_results(bench_results, tmp_path / "run.json")
    md, latency, speedup = write_report([results], tmp_path / "report")
    text = md.read_text()
    for case in CASES:
        assert f"| {case} | " in text
    assert "| counting | structured | fixed | speculative |" in text
    assert "### Lossless check" in text and "- `speculative`: 4 of 16 outputs diverge (25.0%)" in text
    assert (
        "| json | fixed | speculative | 0/4 | 100% | request 0, token 9: baseline ' beta' vs ' zeta' (text) |" in text
    )
    assert "structured: geometric-mean TPOT speedup" in text and "open-ended: geometric-mean" in text
    assert "`baseline` acceptance: not exposed" in text
    assert "![speedup](speedup.png)" in text and "![latency](latency.png)" in text
    width, height = _png_size(latency)
    assert width > 800 and height > 600
    assert _png_size(speedup)[0] > 600


def test_several_results_files_are_labelled(bench_results: BenchResults, tmp_path: Path) -> None:
    a = save_results(bench_results, tmp_path / "k7.json")
    b = save_results(bench_results, tmp_path / "k5.json")
    sources = load_many([a, b])
    assert [s.label for s in sources] == ["k7", "k5"]
    text = markdown(sources)
    assert "## k7" in text and "## k5" in text
    paths = write_report([a, b], tmp_path / "both")
    assert all(p.stat().st_size > 0 for p in paths)
    same_stem = save_results(bench_results, tmp_path / "other" / "k7.json")
    assert [s.label for s in load_many([a, same_stem])] == ["1:k7", "2:k7"]
    with pytest.raises(ValueError, match="at least one"):
        load_many([])


def test_acceptance_length_falls_back_to_tokens_per_chunk_labelled_client(bench_results: BenchResults) -> None:
    hidden = bench_results.model_copy(deep=True)
    for run in hidden.runs:
        run.spec_decode = run.spec_decode.model_copy(update={"mean_acceptance_length": None})
    counting = hidden.run("speculative", "counting")
    text = markdown(load_many_from(hidden))
    assert f"| {counting.tokens_per_step():.2f} (client) |" in text  # type: ignore[union-attr]
    assert "(client) |" not in markdown(load_many_from(bench_results))


def load_many_from(results: BenchResults) -> list[Source]:
    return [Source("run", results)]


def test_natural_stop_rows_and_means_sit_beside_the_fixed_length_ones(bench_results: BenchResults) -> None:
    both = bench_results.model_copy(deep=True)
    both.runs += [r.model_copy(update={"stop": "natural"}) for r in bench_results.runs]
    text = markdown(load_many_from(both))
    assert "| counting | structured | natural | speculative |" in text
    fixed = [line for line in text.splitlines() if "geometric-mean" in line and "fixed stop" in line]
    natural = [line for line in text.splitlines() if "geometric-mean" in line and "natural stop" in line]
    assert len(fixed) == len(natural) == 2
    assert [line.split("speedup")[1] for line in fixed] == [line.split("speedup")[1] for line in natural]
