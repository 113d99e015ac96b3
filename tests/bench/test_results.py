from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.results import (
    BenchResults,
    RequestRecord,
    ResultsError,
    Stat,
    load_results,
    percentile,
    save_results,
    summarize,
)


def _record(times: list[float], tokens: list[int], e2e: float | None = None) -> RequestRecord:
    return RequestRecord(
        start_s=0.0,
        ttft_s=times[0],
        e2e_s=e2e if e2e is not None else times[-1],
        output_tokens=sum(tokens),
        token_source="usage_per_chunk",
        chunk_times_s=times,
        chunk_tokens=tokens,
    )


def test_itl_splits_each_gap_over_the_tokens_it_carried() -> None:
    r = _record([0.1, 0.14, 0.18, 0.22], [1, 4, 1, 2])
    values, weights = r.itl()
    assert values == pytest.approx([0.01, 0.04, 0.02]) and weights == [4, 1, 2]
    # token-weighted mean = decode time / tokens after the first chunk = TPOT when the first chunk is 1 token
    mean = sum(v * w for v, w in zip(values, weights, strict=True)) / sum(weights)
    assert mean == pytest.approx(0.12 / 7) == pytest.approx(r.tpot_s)


def test_failed_and_one_token_records_have_no_tpot() -> None:
    assert RequestRecord(start_s=0, error="boom").tpot_s is None
    assert _record([0.1], [1]).tpot_s is None


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=50), st.sampled_from([0, 10, 50, 90, 99, 100]))
def test_unweighted_percentile_matches_numpy(values: list[float], q: int) -> None:
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-9, abs=1e-6)


@given(
    st.lists(st.tuples(st.integers(-1000, 1000), st.integers(1, 5)), min_size=1, max_size=30),
    st.sampled_from([1, 10, 50, 90, 99]),
)
def test_weighted_percentile_equals_percentile_of_repeated_values(pairs: list[tuple[int, int]], q: int) -> None:
    values = [float(v) for v, _ in pairs]
    weights = [w for _, w in pairs]
    expanded = [v for v, w in pairs for _ in range(w)]
    assert percentile(values, q, weights) == float(np.percentile(expanded, q, method="inverted_cdf"))


def test_summary_counts_errors_short_outputs_and_excludes_missing_usage_from_token_metrics() -> None:
    ok = _record([0.1, 0.2, 0.3], [1, 1, 1])
    short = ok.model_copy(update={"output_tokens": 2})
    counted = ok.model_copy(update={"usage_missing": True})
    s = summarize([ok, short, counted, RequestRecord(start_s=0, error="x")], duration_s=2.0, max_tokens=3)
    assert (s.requests, s.ok, s.errors, s.short_outputs, s.usage_missing) == (4, 3, 1, 1, 1)
    assert s.output_tokens == 5 and s.output_tok_s == 2.5  # the counted request's 3 tokens are not trusted
    assert s.ttft_s.n == 3 and s.e2e_s.n == 3  # ... but its timing is
    assert s.tpot_s.n == 2 and s.itl_s.n == 4 and s.request_tok_s.n == 2
    assert s.ttft_s.p50 == pytest.approx(0.1)
    assert Stat.of([]) == Stat()


def test_results_round_trip_and_clear_errors(bench_results: BenchResults, tmp_path: Path) -> None:
    path = save_results(bench_results, tmp_path / "out" / "r.json")
    again = load_results(path)
    assert again == bench_results
    data = json.loads(path.read_text())
    data["schema_version"] = 99
    (tmp_path / "v99.json").write_text(json.dumps(data))
    with pytest.raises(ResultsError, match="schema_version=99"):
        load_results(tmp_path / "v99.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ResultsError, match="not JSON"):
        load_results(tmp_path / "bad.json")
    with pytest.raises(ResultsError, match="cannot be read"):
        load_results(tmp_path / "missing.json")
    data["schema_version"] = 1
    del data["runs"][0]["summary"]
    (tmp_path / "partial.json").write_text(json.dumps(data))
    with pytest.raises(ResultsError, match=r"runs\[0\]\.summary"):
        load_results(tmp_path / "partial.json")


def test_files_without_a_recorded_baseline_fall_back_to_the_name_or_the_first(bench_results: BenchResults) -> None:
    legacy = bench_results.model_copy(update={"baseline_variant": None})
    assert legacy.baseline == "baseline"
    renamed = legacy.model_copy(
        update={"variants": [v.model_copy(update={"name": f"v{i}"}) for i, v in enumerate(legacy.variants)]}
    )
    assert renamed.baseline == "v0"


def test_every_corrupt_results_file_is_a_sentence(bench_results: BenchResults, tmp_path: Path) -> None:
    good = json.loads(bench_results.model_dump_json())
    (tmp_path / "latin1.json").write_bytes(b'{"schema_version": 1, "x": "caf\xe9"}')
    with pytest.raises(ResultsError, match=r"is not UTF-8 text \(byte 31\)"):
        load_results(tmp_path / "latin1.json")
    cases = {
        "chunks": (lambda d: d["runs"][0]["records"][0]["chunk_tokens"].pop(), "chunk_times_s has 30 entries but"),
        "no-variants": (lambda d: d.update(variants=[], runs=[]), "variants is empty"),
        "unknown": (lambda d: d["runs"][0].update(variant="ghost"), r"variant\(s\) \['ghost'\] that are not among"),
        "twice": (lambda d: d["variants"].append(d["variants"][0]), "repeat a name"),
    }
    for name, (corrupt, words) in cases.items():
        data = json.loads(json.dumps(good))
        corrupt(data)
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
        with pytest.raises(ResultsError, match=words):
            load_results(tmp_path / f"{name}.json")


def test_saving_replaces_the_file_whole(bench_results: BenchResults, tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text("an older, partial file")
    save_results(bench_results, path)
    assert load_results(path) == bench_results
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left behind


def test_the_recorded_baseline_wins_over_names(bench_results: BenchResults) -> None:
    assert bench_results.baseline_variant == "baseline"
    chosen = bench_results.model_copy(update={"baseline_variant": "speculative"})
    assert chosen.baseline == "speculative" and {s.variant for s in chosen.speedups()} == {"baseline"}
    with pytest.raises(ValueError, match="baseline_variant='ghost' is not among variants"):
        BenchResults.model_validate({**json.loads(bench_results.model_dump_json()), "baseline_variant": "ghost"})


def test_a_file_from_before_stop_modes_outputs_and_prices_still_loads(bench_results: BenchResults, tmp_path) -> None:
    from bench.cost import costs
    from bench.lossless import check

    data = json.loads(bench_results.model_dump_json())
    data.pop("node_hourly_price_usd")
    data["settings"].pop("stops")
    for v in data["variants"]:
        v.pop("devices"), v.pop("devices_per_node")
    for run in data["runs"]:
        run.pop("stop")
        for r in run["records"]:
            r.pop("chunk_texts"), r.pop("output_token_ids")
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    results = load_results(old)
    assert {r.stop for r in results.runs} == {"fixed"} and results.settings.stops == ["fixed"]
    assert all(c.compared == 0 for c in check(results)) and costs(results, price=40.0) == []


def test_a_crash_while_writing_leaves_the_previous_complete_file(
    bench_results: BenchResults, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written in place, a crash mid-write would leave a truncated file and lose every finished case."""
    import bench.results

    path = save_results(bench_results, tmp_path / "r.json")
    before = path.read_bytes()
    real_open = open

    class HalfWritten:
        """A file whose write stores half the text, then fails as a killed process or a full disk would."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            self.file = real_open(*args, **kwargs)  # type: ignore[call-overload]

        def __enter__(self) -> HalfWritten:
            return self

        def __exit__(self, *exc: object) -> None:
            self.file.close()

        def write(self, text: str) -> int:
            self.file.write(text[: len(text) // 2])
            self.file.flush()
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(bench.results, "open", HalfWritten, raising=False)
    changed = bench_results.model_copy(update={"baseline_variant": "speculative"})
    with pytest.raises(OSError, match="No space left"):
        save_results(changed, path)
    assert path.read_bytes() == before and load_results(path) == bench_results
