"""Cost rows from a real loopback run: unknown price, unknown devices, and the table."""

from __future__ import annotations

from bench.cost import cost_rows, costs, format_cost
from bench.results import BenchResults


def test_without_a_price_the_console_says_which_setting_gives_one(bench_results: BenchResults) -> None:
    assert costs(bench_results) == []
    assert "set trn2_nodes.hourly_price_usd to see cost" in format_cost(bench_results)


def test_variants_that_are_no_profile_of_the_config_get_no_cost_and_a_note(bench_results: BenchResults) -> None:
    priced = bench_results.model_copy(deep=True, update={"node_hourly_price_usd": 30.0})
    priced.variants[1] = priced.variants[1].model_copy(update={"devices": 4, "devices_per_node": 16})
    _, rows, notes = cost_rows(priced)
    assert {r[2] for r in rows} == {"speculative"} and all(r[3] == "7.50" for r in rows)
    assert "no cost for baseline: not a profile of the config, so its devices are unknown" in notes
    assert format_cost(priced).splitlines()[0].split("  ")[0] == "test case"
