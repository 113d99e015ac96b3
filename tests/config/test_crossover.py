"""endpoint.crossover_file: read once, at config load, through config/crossover.py's one model, into
endpoint.spill_threshold; every bad file is one sentence naming the field, the value and the fix, before any construct
is created (and within seconds: no hang). Where a relative path lies: tests/config/test_loader.py."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from config import ConfigError, parse_config
from config.crossover import CrossoverFile
from tests.conftest import crossover_entry, crossover_file_dict, default_config_dict

FIX = "point it at a crossover.json `make bench-sweep` wrote"


def crossover_data(*, last_paying: Any = 3, crossover: Any = 6) -> dict[str, Any]:
    return crossover_file_dict(crossover_entry(crossover=crossover, last_paying=last_paying, grid=[1, 2, 4, 8]))


def load_with(path: Path | str) -> list[str]:
    data = default_config_dict()
    data["endpoint"] = {"weights": {"baseline": 50, "speculative": 50}, "crossover_file": str(path)}
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    return err.value.problems


def test_a_valid_file_is_read_at_load_and_gives_the_per_replica_threshold(tmp_path: Path) -> None:
    path = tmp_path / "crossover.json"
    path.write_text(CrossoverFile.model_validate(crossover_data()).model_dump_json())
    data = default_config_dict()
    data["endpoint"] = {"weights": {"baseline": 50, "speculative": 50}, "crossover_file": str(path)}
    config = parse_config(data)
    path.unlink()  # read once, at load: the renderer needs the file no more
    assert config.endpoint.spill_threshold == {"speculative": 3}
    assert config.endpoint.crossover_file is None  # folded: the loaded config names no file


def test_only_the_arms_that_can_spill_get_a_threshold_and_the_users_own_wins(tmp_path: Path) -> None:
    """A weighted speculative profile gets the crossover's threshold; one the weights send nothing to, and a variant
    that is no profile here, get none (they spill nothing); an explicit endpoint.spill_threshold is kept."""
    entries = [crossover_entry(crossover=6, last_paying=3, grid=[1, 2, 4, 8])]
    entries.append({**entries[0], "variant": "renamed-since"})
    path = tmp_path / "crossover.json"
    path.write_text(json.dumps(crossover_file_dict(*entries)))
    data = default_config_dict()
    data["endpoint"] = {"weights": {"baseline": 100}, "crossover_file": str(path)}
    assert parse_config(data).endpoint.spill_threshold == {}
    data["endpoint"]["weights"] = {"baseline": 50, "speculative": 50}
    assert parse_config(data).endpoint.spill_threshold == {"speculative": 3}
    data["endpoint"]["spill_threshold"] = {"speculative": 7}
    assert parse_config(data).endpoint.spill_threshold == {"speculative": 7}


def test_a_missing_file_is_a_sentence(tmp_path: Path) -> None:
    (problem,) = load_with(tmp_path / "nope.json")
    assert "endpoint.crossover_file=" in problem and "nope.json" in problem and "No such file" in problem
    assert FIX in problem


def test_a_fifo_is_refused_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "crossover.json"
    os.mkfifo(fifo)
    result: list[list[str]] = []
    worker = threading.Thread(target=lambda: result.append(load_with(fifo)), daemon=True)
    worker.start()
    worker.join(timeout=5)
    assert not worker.is_alive(), "reading a FIFO hung"
    (problem,) = result[0]
    assert "is not a regular file" in problem and FIX in problem


def test_a_device_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "crossover.json"
    link.symlink_to("/dev/zero")
    (problem,) = load_with(link)
    assert "is not a regular file" in problem


def test_a_file_over_the_size_bound_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "crossover.json"
    with path.open("wb") as f:
        f.truncate(64 * 1024 * 1024)  # sparse: size without content
    (problem,) = load_with(path)
    assert f"is {64 * 1024 * 1024} bytes; a crossover.json is at most" in problem


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("[" * 100_000 + "]" * 100_000, "nests deeper"),
        (json.dumps(crossover_data()).replace('"crossover": 6', '"crossover": Infinity'), "Infinity"),
        (json.dumps(crossover_data()).replace('"crossover": 6', '"crossover": NaN'), "NaN"),
        (json.dumps(crossover_data()).replace('"crossover": 6', '"crossover": 1e400'), "finite number"),
        (json.dumps(crossover_data(last_paying=-1)), "crossovers[0].last_paying=-1"),
        (json.dumps(crossover_data(last_paying=True)), "crossovers[0].last_paying=True"),
        (json.dumps(crossover_data(last_paying="4")), "crossovers[0].last_paying='4'"),
        (json.dumps({**crossover_data(), "schema_version": 2}), "schema_version=2"),
        ("\xff\xfe", "not UTF-8"),
        ("{", "is not JSON"),
    ],
)
def test_malformed_contents_are_one_sentence(tmp_path: Path, text: str, phrase: str) -> None:
    path = tmp_path / "crossover.json"
    path.write_bytes(text.encode("latin-1") if text.startswith("\xff") else text.encode())
    (problem,) = load_with(path)
    assert problem.startswith(f"endpoint.crossover_file={str(path)!r}") and phrase in problem and FIX in problem


def test_a_threshold_above_envoys_uint32_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "crossover.json"
    path.write_text(json.dumps(crossover_data(last_paying=2**32, crossover=2**33)))
    (problem,) = load_with(path)
    assert "spill threshold of 4294967296" in problem and "limit of 4294967295" in problem
    assert "endpoint.spill_threshold.speculative" in problem
    data = default_config_dict()  # the fix the sentence names works
    data["endpoint"] = {"weights": {"baseline": 50, "speculative": 50}, "crossover_file": str(path)}
    data["endpoint"]["spill_threshold"] = {"speculative": 8}
    assert parse_config(data).endpoint.spill_threshold == {"speculative": 8}


def test_the_envoy_limit_applies_per_replica_not_to_the_sum(tmp_path: Path) -> None:
    """Each Ready replica is its own Envoy host with the per-replica threshold (charts/envoy_bootstrap.py), so the limit
    bounds that value alone: 2^32 - 1 with two replicas renders."""
    path = tmp_path / "crossover.json"
    path.write_text(json.dumps(crossover_data(last_paying=2**32 - 1, crossover=2**32)))
    data = default_config_dict()
    data["endpoint"] = {"weights": {"baseline": 50, "speculative": 50}, "crossover_file": str(path)}
    data["scaling"] = {"enabled": False}
    data["profiles"][1]["replicas"] = 2
    config = parse_config(data)
    assert config.endpoint.spill_threshold["speculative"] == 2**32 - 1
    # what the Jobs load (the config.yaml ConfigMap): spill_threshold takes what the crossover gave
    assert parse_config(config.model_dump(mode="json")).endpoint.spill_threshold == {"speculative": 2**32 - 1}
