"""CloudWatch publishing: batching within PutMetricData limits, and a real PutMetricData to moto on loopback."""

from __future__ import annotations

import random
import urllib.parse
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.serialize import create_serializer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.cloudwatch import (
    MAX_DATUMS_PER_CALL,
    MAX_REQUEST_BYTES,
    MAX_VALUES_PER_DATUM,
    Series,
    batch_datums,
    build_datums,
    datum_size,
    publish,
    series_from_results,
)
from bench.results import BenchResults
from config import DeploymentConfig
from tests.bench.conftest import CASES

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _series(sizes: list[int], singles: int, seed: int) -> list[Series]:
    rng = random.Random(seed)
    out = []
    for i, n in enumerate([*sizes, *([1] * singles)]):
        values: dict[float, float] = {}
        for _ in range(n):  # repeated values must merge into counts
            v = round(rng.choice([rng.uniform(0, 100), float(rng.randint(0, 5))]), 3)
            values[v] = values.get(v, 0.0) + rng.randint(1, 7)
        out.append(Series(f"M{i % 7}", "Milliseconds", f"v{i % 3}", f"case-{i}", NOW, values))
    return out


def _key(d: dict[str, Any]) -> tuple[str, ...]:
    return (d["MetricName"], *(x["Value"] for x in d["Dimensions"]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(1, 700), min_size=1, max_size=30),
    singles=st.integers(0, 1300),
    seed=st.integers(0, 2**32),
)
def test_batches_publish_every_value_once_within_limits(sizes: list[int], singles: int, seed: int) -> None:
    series = _series(sizes, singles, seed)
    namespace = "TrnSpecdec/Bench"
    batches = batch_datums(build_datums(series), namespace)
    published: Counter[tuple[Any, ...]] = Counter()
    for batch in batches:
        assert 1 <= len(batch) <= MAX_DATUMS_PER_CALL
        assert sum(datum_size(d) for d in batch) + 3 * len(namespace) + 200 <= MAX_REQUEST_BYTES
        for d in batch:
            assert len(d["Values"]) == len(d["Counts"]) <= MAX_VALUES_PER_DATUM
            assert len(set(d["Values"])) == len(d["Values"])  # each unique value listed once
            assert d["StorageResolution"] == 1
            for v, c in zip(d["Values"], d["Counts"], strict=True):
                published[(*_key(d), v)] += c
    expected: Counter[tuple[Any, ...]] = Counter()
    for s in series:
        for v, c in s.values.items():
            expected[(s.name, s.variant, s.test_case, v)] += c
    assert published == expected


def test_both_call_limits_bind() -> None:
    many = batch_datums(build_datums(_series([], 2500, seed=2)), "ns")
    assert [len(b) for b in many] == [1000, 1000, 500]  # datum count binds
    big = batch_datums(build_datums(_series([700] * 30, 0, seed=3)), "ns")
    assert len(big) > 1 and all(len(b) < MAX_DATUMS_PER_CALL for b in big)  # payload size binds
    assert all(sum(datum_size(d) for d in b) > MAX_REQUEST_BYTES / 2 for b in big[:-1])


def test_size_estimate_bounds_every_wire_protocol() -> None:
    """boto3 may send Query, JSON or CBOR; the estimate must be an upper bound of each serialized body."""
    op = botocore.session.get_session().get_service_model("cloudwatch").operation_model("PutMetricData")
    batches = batch_datums(build_datums(_series([150, 150, 37, 1], 40, seed=1)), "TrnSpecdec/Bench")
    for batch in batches:
        estimate = sum(datum_size(d) for d in batch)
        for protocol in ("query", "json", "smithy-rpc-v2-cbor"):
            request = create_serializer(protocol, include_validation=True).serialize_to_request(
                {"Namespace": "TrnSpecdec/Bench", "MetricData": batch}, op
            )
            body = request["body"]
            size = len(urllib.parse.urlencode(body).encode() if isinstance(body, dict) else body)
            assert size <= estimate, protocol


def test_series_from_results_are_token_weighted(bench_results: BenchResults) -> None:
    series = {(s.name, s.variant, s.test_case): s for s in series_from_results(bench_results)}
    run = bench_results.run("speculative", "counting")
    assert run is not None
    ok = [r for r in run.records if r.ok]
    assert sum(series[("TTFT", "speculative", "counting")].values.values()) == len(ok)
    itl = series[("ITL", "speculative", "counting")]
    assert sum(itl.values.values()) == sum(sum(r.chunk_tokens[1:]) for r in ok)  # counts are tokens
    assert ("AcceptanceRate", "speculative", "counting") in series
    assert ("AcceptanceRate", "baseline", "counting") not in series  # not exposed: nothing invented
    assert series[("RequestErrors", "baseline", "counting")].values == {0.0: 1.0}


def test_natural_stop_runs_publish_beside_the_fixed_length_ones(bench_results: BenchResults) -> None:
    both = bench_results.model_copy(deep=True)
    both.runs += [r.model_copy(update={"stop": "natural"}) for r in bench_results.runs]
    cases = {s.test_case for s in series_from_results(both) if s.name == "TTFT" and s.variant == "baseline"}
    assert cases == {c for name in CASES for c in (name, f"{name}/natural")}


def test_publish_to_moto_with_the_configured_namespace(
    aws_env: str, bench_results: BenchResults, default_config: DeploymentConfig
) -> None:
    namespace = default_config.observability.metrics_namespace
    report = publish(bench_results, namespace=namespace, region=default_config.region)
    expected = series_from_results(bench_results)
    assert report.calls >= 1 and report.datums >= len(expected)

    cw = boto3.client("cloudwatch", region_name=default_config.region)
    start = min(r.started_at for r in bench_results.runs) - timedelta(minutes=5)
    for s in expected:
        dims = [{"Name": "Variant", "Value": s.variant}, {"Name": "TestCase", "Value": s.test_case}]
        points = cw.get_metric_statistics(
            Namespace=namespace,
            MetricName=s.name,
            Dimensions=dims,
            StartTime=start,
            EndTime=datetime.now(UTC) + timedelta(minutes=5),
            Period=3600,
            Statistics=["SampleCount", "Sum"],
        )["Datapoints"]
        assert sum(p["SampleCount"] for p in points) == sum(s.values.values()), s.name
        assert sum(p["Sum"] for p in points) == pytest.approx(sum(v * c for v, c in s.values.items())), s.name
    names = {m["MetricName"] for m in cw.list_metrics(Namespace=namespace)["Metrics"]}
    assert {"TTFT", "TPOT", "ITL", "E2ELatency", "AcceptanceRate", "MeanAcceptanceLength"} <= names


def test_refuses_results_older_than_cloudwatch_accepts(bench_results: BenchResults) -> None:
    later = max(r.started_at for r in bench_results.runs) + timedelta(days=15)
    with pytest.raises(ValueError, match="older than 14 days"):
        publish(bench_results, namespace="x", client=object(), now=later)


def test_the_dashboard_reads_only_metrics_a_real_run_publishes(synth, bench_results):
    """Every metric the synthesized dashboard graphs in the bench namespace is one that series_from_results
    writes for a run (the other series come from Container Insights)."""
    from tests.stacks.test_observability_stack import _body, _metrics

    namespace = synth.config.observability.metrics_namespace
    read = {m[1] for m in _metrics(_body(synth)) if m[0] == namespace}
    written = {s.name for s in series_from_results(bench_results)}
    assert read and read <= written


def test_publish_to_a_silent_endpoint_fails_with_each_attempt_shown(silent_aws, bench_results, capsys):
    from config.exit_codes import CommandError
    from tests.silent_endpoint import SHOWN, attempts_shown

    with pytest.raises(CommandError, match=r"PutMetricData call 1 of 1 to Ns: AWS did not answer .*3 attempts"):
        publish(bench_results, namespace="Ns", region="us-east-2")
    assert attempts_shown(capsys.readouterr().err) == SHOWN
