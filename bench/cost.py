"""Cost per 1M output tokens and per request, per variant and test case, from measured throughput.

The node price and each variant's devices are recorded in the results file at run time (from the config);
`bench report --config` can supply a price the run did not have. The arithmetic is config/cost.py's, which the
dashboard's metric math shares.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench import table
from bench.results import BenchResults, CaseRun, VariantInfo
from config.cost import NO_PRICE, hourly_cost_usd, usd_per_million_tokens, usd_per_request


@dataclass(frozen=True)
class CaseCost:
    variant: str
    test_case: str
    stop: str
    hourly_usd: float
    output_tok_s: float
    per_million_usd: float | None
    per_request_usd: float | None


def variant_hourly_usd(variant: VariantInfo, price: float | None) -> float | None:
    """The variant's share of the node price; None when the price or its devices are unknown."""
    if price is None or variant.devices is None or not variant.devices_per_node:
        return None
    return hourly_cost_usd(price, variant.devices, variant.devices_per_node)


def costs(results: BenchResults, price: float | None = None) -> list[CaseCost]:
    """Every run whose variant has a known cost; `price` overrides the one recorded in the results."""
    price = price if price is not None else results.node_hourly_price_usd
    hourly = {v.name: variant_hourly_usd(v, price) for v in results.variants}
    return [_case_cost(run, h) for run in results.runs if (h := hourly[run.variant]) is not None]


def _case_cost(run: CaseRun, hourly: float) -> CaseCost:
    s = run.summary
    return CaseCost(
        variant=run.variant,
        test_case=run.test_case,
        stop=run.stop,
        hourly_usd=hourly,
        output_tok_s=s.output_tok_s,
        per_million_usd=usd_per_million_tokens(hourly, s.output_tok_s),
        per_request_usd=usd_per_request(hourly, s.duration_s, s.ok),
    )


def cost_rows(results: BenchResults, price: float | None = None) -> tuple[list[str], list[list[str]], list[str]]:
    """Header, rows and notes of the cost table, shared by the console and the report."""
    price = price if price is not None else results.node_hourly_price_usd
    if price is None:
        return [], [], [f"cost: {NO_PRICE} (in the config for `bench run`, or pass --config to `bench report`)"]
    header = ["test case", "stop", "variant", "USD/h", "out tok/s", "USD per 1M out tok", "USD per request"]
    rows = [
        [
            c.test_case,
            c.stop,
            c.variant,
            f"{c.hourly_usd:.2f}",
            f"{c.output_tok_s:.1f}",
            _usd(c.per_million_usd),
            _usd(c.per_request_usd, ".6f"),
        ]
        for c in costs(results, price)
    ]
    unknown = [v.name for v in results.variants if variant_hourly_usd(v, price) is None]
    notes = [
        f"cost at {price:.2f} USD per node-hour, each variant paying for the share of the node's Neuron devices it "
        "claims, at the throughput measured under this run's load (not at saturation)"
    ]
    if unknown:
        notes.append(f"no cost for {', '.join(unknown)}: not a profile of the config, so its devices are unknown")
    return header, rows, notes


def _usd(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else f"{x:{spec}}"


def format_cost(results: BenchResults) -> str:
    header, rows, notes = cost_rows(results)
    if not rows:
        return "\n".join(notes)
    lines = table.text(header, rows)
    return "\n".join([*lines, *notes])
