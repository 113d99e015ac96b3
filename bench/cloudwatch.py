"""Publish benchmark results to CloudWatch as raw values, so CloudWatch itself computes p50/p90/p99.

Why raw values: a median pushed as one number (the reference's way) cannot be re-aggregated or turned into
other percentiles; `Values`/`Counts` arrays can. Token-weighted ITL maps onto this directly: each chunk's
per-token latency is a value whose count is the number of tokens the chunk carried.

Limits, from the CloudWatch API reference for PutMetricData
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricData.html; the same text ships
in botocore 1.44.8's cloudwatch/2010-08-01 service model):
- "up to 150 unique values" in a MetricDatum's Values array, each listed once, with Counts alongside;
- "no more than 1000 different metrics" per request;
- "limited to 1 MB in size for HTTP POST requests" (gzip allowed; we bound the uncompressed size);
- time stamps from two weeks before now to 2 hours after; StorageResolution 1 (high resolution) or 60.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from bench.results import BenchResults
from config.metrics import (
    ACCEPTANCE_RATE,
    COUNT,
    E2E,
    ITL,
    MEAN_ACCEPTANCE_LENGTH,
    OUTPUT_THROUGHPUT,
    PER_SECOND,
    REQUEST_ERRORS,
    RUN_THROUGHPUT,
    TEST_CASE,
    TPOT,
    TTFT,
    VARIANT,
)
from config.metrics import MILLISECONDS as MS

MAX_VALUES_PER_DATUM = 150
MAX_DATUMS_PER_CALL = 1000
MAX_REQUEST_BYTES = 1_000_000  # 1 MB read as 10^6 bytes, below 2^20 either way
_REQUEST_OVERHEAD = 200  # Action, Version, Namespace= and framing, on top of the namespace itself
MAX_AGE = timedelta(days=14)


@dataclass(frozen=True)
class Series:
    """Every value of one metric for one (variant, test case) run: value -> how many times it occurred."""

    name: str
    unit: str
    variant: str
    test_case: str
    timestamp: datetime
    values: dict[float, float]


_Metrics = dict[tuple[str, str], dict[float, float]]


def _put(metrics: _Metrics, name: str, unit: str, value: float | None, count: float = 1.0) -> None:
    if value is not None:
        values = metrics.setdefault((name, unit), {})
        key = round(value, 3)
        values[key] = values.get(key, 0.0) + count


def series_from_results(results: BenchResults) -> list[Series]:
    """Metric names and units the dashboard reads, per (Variant, TestCase). Latencies in ms, rounded to 1 us.
    Natural-stop runs go under TestCase `<case>/natural` (no case name has a slash), beside the fixed-length
    ones the dashboard shows."""
    out: list[Series] = []
    for run in results.runs:
        m: _Metrics = {}
        for r in (r for r in run.records if r.ok):
            _put(m, TTFT, MS, r.ttft_s * 1000 if r.ttft_s is not None else None)
            _put(m, TPOT, MS, r.tpot_s * 1000 if r.tpot_s is not None else None)
            _put(m, E2E, MS, r.e2e_s * 1000 if r.e2e_s is not None else None)
            _put(m, OUTPUT_THROUGHPUT, PER_SECOND, r.output_tok_s)
            for value, tokens in zip(*r.itl(), strict=True):
                _put(m, ITL, MS, value * 1000, tokens)
        _put(m, RUN_THROUGHPUT, PER_SECOND, run.summary.output_tok_s)
        _put(m, REQUEST_ERRORS, COUNT, float(run.summary.errors))
        _put(m, ACCEPTANCE_RATE, "None", run.spec_decode.acceptance_rate)
        _put(m, MEAN_ACCEPTANCE_LENGTH, COUNT, run.spec_decode.mean_acceptance_length)
        for (name, unit), values in m.items():
            case = run.case_label
            out.append(Series(name, unit, run.variant, case, run.started_at, values))
    return out


def build_datums(series: Iterable[Series]) -> list[dict[str, Any]]:
    """One MetricDatum per at most 150 unique values of a series, high resolution, dimensions Variant/TestCase."""
    datums: list[dict[str, Any]] = []
    for s in series:
        items = sorted(s.values.items())
        for start in range(0, len(items), MAX_VALUES_PER_DATUM):
            part = items[start : start + MAX_VALUES_PER_DATUM]
            datums.append(
                {
                    "MetricName": s.name,
                    "Dimensions": [{"Name": VARIANT, "Value": s.variant}, {"Name": TEST_CASE, "Value": s.test_case}],
                    "Timestamp": s.timestamp,
                    "Unit": s.unit,
                    "StorageResolution": 1,
                    "Values": [v for v, _ in part],
                    "Counts": [c for _, c in part],
                }
            )
    return datums


def datum_size(datum: dict[str, Any]) -> int:
    """An upper bound of the datum's bytes on the wire: its form-encoding in the Query protocol (the most
    verbose one boto3 may use; JSON and CBOR are smaller), with the largest member index (1000)."""
    return sum(len(f"MetricData.member.{MAX_DATUMS_PER_CALL}.{k}={v}&") for k, v in _flatten(datum))


def _flatten(value: Any, prefix: str = "") -> Iterable[tuple[str, str]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flatten(v, f"{prefix}{k}" if not prefix else f"{prefix}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value, start=1):
            yield from _flatten(v, f"{prefix}.member.{i}")
    elif isinstance(value, datetime):
        yield prefix, quote(value.isoformat(timespec="microseconds"), safe="")
    else:
        yield prefix, quote(repr(value), safe="")


def batch_datums(datums: Sequence[dict[str, Any]], namespace: str) -> list[list[dict[str, Any]]]:
    """Greedy packing into PutMetricData calls within the datum-count and payload limits."""
    budget = MAX_REQUEST_BYTES - _REQUEST_OVERHEAD - 3 * len(namespace)
    batches: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for datum in datums:
        n = datum_size(datum)
        if n > budget:
            raise ValueError(f"one metric datum ({datum['MetricName']}) needs {n} bytes, over the request limit")
        if current and (len(current) >= MAX_DATUMS_PER_CALL or size + n > budget):
            batches.append(current)
            current, size = [], 0
        current.append(datum)
        size += n
    if current:
        batches.append(current)
    return batches


@dataclass(frozen=True)
class PublishReport:
    calls: int
    datums: int
    values: int


def publish(
    results: BenchResults,
    *,
    namespace: str,
    region: str | None = None,
    client: Any = None,
    now: datetime | None = None,
) -> PublishReport:
    """PutMetricData every series of the results. Refuses results CloudWatch would reject as too old; a failed
    call is a config.exit_codes.CommandError sentence."""
    return publish_series(series_from_results(results), namespace=namespace, region=region, client=client, now=now)


def publish_series(
    series: Sequence[Series],
    *,
    namespace: str,
    region: str | None = None,
    client: Any = None,
    now: datetime | None = None,
    again: str = "publish the results file again with `python -m bench publish`",
) -> PublishReport:
    """PutMetricData the series, within the call limits. Refuses series CloudWatch would reject as too old; a
    failed call is a config.exit_codes.CommandError sentence ending with `again`, how to send them again."""
    now = now or datetime.now(UTC)
    too_old = sorted({s.test_case for s in series if now - s.timestamp > MAX_AGE})
    if too_old:
        raise ValueError(
            f"runs {', '.join(too_old)} are older than 14 days, which CloudWatch does not accept; "
            "publish fresh results, or keep these in S3 and use `bench report`"
        )
    return put_datums(build_datums(series), namespace=namespace, region=region, client=client, again=again)


def put_datums(
    datums: list[dict[str, Any]], *, namespace: str, region: str | None, again: str, client: Any = None
) -> PublishReport:
    """PutMetricData in batches within the call limits, through a bounded client (a silent endpoint fails each
    call within aws.SILENT_BOUND_S, each attempt shown); a failed call is a CommandError sentence."""
    from cloud import aws

    if client is None:
        client = aws.client("cloudwatch", region)
    batches = batch_datums(datums, namespace)
    for number, batch in enumerate(batches, start=1):
        try:
            client.put_metric_data(Namespace=namespace, MetricData=batch)
        except aws.errors() as err:
            raise aws.failure(
                f"PutMetricData call {number} of {len(batches)} to {namespace}",
                err,
                f"{again} ({number - 1} earlier call(s) went through: their values would be counted twice)",
            ) from None
    return PublishReport(calls=len(batches), datums=len(datums), values=sum(len(d["Values"]) for d in datums))
