"""The manifest schema shared by publish, verify and the serving init check."""

from __future__ import annotations

import dataclasses
import json

import pytest

from serving_pod.manifest import BuildRecord, Manifest, ManifestFile, file_problems, mismatches, sha256_file

FILES = [ManifestFile("a.bin", 3, "0" * 64), ManifestFile("w/b.bin", 5, "1" * 64)]
M = Manifest("d" * 20, {"k": 7, "dtype": "bfloat16"}, FILES, created_at="2026-01-01T00:00:00+00:00", builder={"x": "1"})


def test_round_trip_and_schema_check():
    assert Manifest.from_json(M.to_json()) == M
    data = json.loads(M.to_json())
    data["schema"] = 2
    with pytest.raises(ValueError, match="schema 2 is not 1; rebuild"):
        Manifest.from_json(json.dumps(data))


def test_a_build_record_of_another_schema_or_not_an_object_is_refused_with_a_sentence():
    record = BuildRecord("p", "d" * 20, {"k": 7}, {}, "2026-01-01T00:00:00+00:00", {"target": {}})
    assert BuildRecord.from_json(record.to_json()) == record
    data = json.loads(record.to_json())
    data["schema"] = 0
    with pytest.raises(ValueError, match="build record schema 0 is not 1; recompile"):
        BuildRecord.from_json(json.dumps(data))
    with pytest.raises(ValueError, match="manifest is list JSON, not an object; rebuild"):
        Manifest.from_json("[]")


def test_same_content_ignores_when_and_by_what_it_was_built():
    later = dataclasses.replace(M, created_at="2027-01-01T00:00:00+00:00", builder={"x": "2"})
    assert M.same_content(later)
    changed = dataclasses.replace(M, files=[FILES[0], ManifestFile("w/b.bin", 5, "2" * 64)])
    assert not M.same_content(changed)
    assert M.differences(changed) == [f"w/b.bin: local 5 bytes sha256 {'1' * 12}..., published 5 bytes {'2' * 12}..."]


def test_mismatches_name_every_differing_field():
    problems = mismatches(M, "e" * 20, {"k": 5, "dtype": "bfloat16", "new": 1})
    assert problems == [
        f"digest: manifest has {'d' * 20}, profile needs {'e' * 20}",
        "k: artifact was built with 7, profile needs 5",
        "new: artifact was built with null, profile needs 1",
    ]


def test_mismatches_name_the_innermost_differing_key():
    built = {"neuron_config": {"target": {"ctx_batch_size": 1, "tp_degree": 32}, "draft": None}}
    needed = {"neuron_config": {"target": {"ctx_batch_size": 2, "tp_degree": 32}, "draft": {"tp_degree": 32}}}
    problems = mismatches(dataclasses.replace(M, inputs=built), M.digest, needed)
    assert problems == [
        'neuron_config.draft: artifact was built with null, profile needs {"tp_degree": 32}',
        "neuron_config.target.ctx_batch_size: artifact was built with 1, profile needs 2",
    ]


def test_file_problems_checks_sizes_cheaply_and_content_deeply(tmp_path):
    (tmp_path / "w").mkdir()
    (tmp_path / "a.bin").write_bytes(b"abc")
    (tmp_path / "w" / "b.bin").write_bytes(b"hello")
    files = [ManifestFile(p, (tmp_path / p).stat().st_size, sha256_file(tmp_path / p)) for p in ("a.bin", "w/b.bin")]
    assert file_problems(tmp_path, files, deep=True) == []
    (tmp_path / "w" / "b.bin").write_bytes(b"jello")
    assert file_problems(tmp_path, files) == []
    assert [p.split(":")[0] for p in file_problems(tmp_path, files, deep=True)] == ["w/b.bin"]
    (tmp_path / "a.bin").unlink()
    assert file_problems(tmp_path, files)[0].startswith("a.bin: missing")


def test_build_record_round_trip():
    record = BuildRecord(
        "p", "d" * 20, {"k": 7}, {"torch": "2"}, "2026-01-01T00:00:00+00:00", {"target": {}, "draft": None}
    )
    assert BuildRecord.from_json(record.to_json()) == record


def test_differences_list_files_only_on_one_side_and_changed_inputs():
    other = dataclasses.replace(M, digest="f" * 20, files=[FILES[0], ManifestFile("c.bin", 1, "3" * 64)])
    assert M.differences(other) == [
        f"digest or inputs differ (local {'d' * 20}, published {'f' * 20})",
        "c.bin: only published",
        "w/b.bin: only local",
    ]
