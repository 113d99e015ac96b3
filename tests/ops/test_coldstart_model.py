"""The cold-start model is computed from the config, not typed in: docs/coldstart.md carries exactly what it
prints for each shipped config, and a prediction moves when the config value it depends on moves."""

from __future__ import annotations

from pathlib import Path

import pytest

from config import load_config, parse_config
from ops.coldstart_model import NAT_USD_PER_GB, markdown, phases, s3_gb_per_cold_start, weights_gb
from tests.conftest import default_config_dict

DOCS = Path(__file__).resolve().parents[2] / "docs" / "coldstart.md"


@pytest.mark.parametrize("path", ["config/default.yaml", "config/vllm-neuron.yaml"])
def test_the_docs_carry_the_model_of_each_shipped_config_as_computed(path):
    config = load_config(str(Path(__file__).resolve().parents[2] / path))
    assert markdown(config) in DOCS.read_text(), f"regenerate: python -m ops.coldstart_model --config {path}"


def _load(config, name: str) -> float:
    (load,) = [p for p in phases(config, config.profile(name)) if p.name == "model load"]
    return load.seconds


def test_a_slower_root_volume_slows_the_model_load_it_bounds():
    data = default_config_dict()
    fast = parse_config(data)
    data["trn2_nodes"]["disk_throughput_mibps"] = 500
    slow = parse_config(data)
    assert _load(slow, "baseline") == pytest.approx(2 * _load(fast, "baseline"))


def test_the_speculative_replica_also_loads_its_draft():
    config = load_config()
    draft = weights_gb(config, config.profile("speculative")) - weights_gb(config, config.profile("baseline"))
    assert draft == pytest.approx(4.1)  # Qwen3-1.7B in bfloat16


def test_the_nat_column_is_the_s3_bytes_at_the_nat_price_and_the_endpoint_column_is_zero():
    config = load_config()
    gb = s3_gb_per_cold_start(config, config.profile("speculative"))
    row = f"| one cold start of speculative | {gb:.1f} | ${gb * NAT_USD_PER_GB:.2f} | $0.00 |"
    assert row in markdown(config)
