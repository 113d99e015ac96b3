"""`python -m ops.run_benchmark` without --apply: the Job it would run, benchmark or lossless check."""

from __future__ import annotations

import shlex
import socket

import pytest
import yaml

from ops.run_benchmark import main


@pytest.mark.parametrize(
    ("flags", "name", "mode"), [([], "bench-2", "--cloudwatch"), (["--lossless"], "bench-lossless-2", "--lossless")]
)
def test_render_prints_the_job_of_the_chosen_mode(
    flags: list[str], name: str, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--account", "000000000000", *flags, "--", "--requests", "4"]) == 0
    (job,) = yaml.safe_load_all(capsys.readouterr().out)
    assert job["metadata"]["name"].startswith(name)
    run = shlex.split(job["spec"]["template"]["spec"]["containers"][0]["command"][2].splitlines()[-1])
    assert mode in run and run[-2:] == ["--requests", "4"]


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--requests", "abc"], "argument --requests: 'abc' is not a whole number"),
        (["--concurrency", "-1"], "argument --concurrency: -1 is below 1"),
        (["--request-timeout", "nan"], "not a finite number"),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["--out", "/tmp/x.json"], "sets --out, which the Job sets itself"),
        (["--endpoint", "x=http://x:1"], "sets --endpoint, which the Job sets itself"),
        (["--up", "s3://b/k"], "sets --upload, which the Job sets itself"),  # an abbreviation argparse accepts
    ],
)
def test_bench_args_are_refused_before_the_job_is_rendered_or_applied(
    extra: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make bench BENCH_ARGS=...` reached the Job unvalidated: `--requests abc` failed in the pod."""
    for mode in (["--account", "000000000000"], ["--apply"]):  # --apply stops before any AWS or kubectl call
        assert main([*mode, "--", *extra]) == 2
        captured = capsys.readouterr()
        assert "BENCH_ARGS" in captured.err and words in captured.err and "Traceback" not in captured.err
        assert captured.out == ""


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--concurrency", "abc"], "argument --concurrency: 'abc' is not a comma-separated list of whole numbers"),
        (["--concurrency", "0"], "argument --concurrency: '0' holds 0; every value must be a finite number above 0"),
        (["--rates", "nan"], "argument --rates: 'nan' holds nan; every value must be a finite number above 0"),
        (["--cases", "nope"], "--cases nope not in the suite; use some of"),
        (["--baseline", "nope"], "--baseline 'nope' is not one of the --endpoint names (baseline, speculative)"),
        (["--max-num-seqs", "100000"], "argument --max-num-seqs: 100000 is above 256 (the largest batch"),
        (["--overwrite"], "sets --overwrite, which the Job sets itself"),
        (["--grid", "full", "--budget-minutes", "30"], "--budget-minutes 30 caps the adaptive sweep; --grid full"),
    ],
)
def test_sweep_args_that_would_fail_in_the_pod_are_refused_here(
    extra: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make bench-sweep BENCH_ARGS=...` passed these to the Job, which failed after it was scheduled."""
    assert main(["--account", "000000000000", "--sweep", "--", *extra]) == 2
    captured = capsys.readouterr()
    assert "BENCH_ARGS" in captured.err and words in captured.err and "Traceback" not in captured.err
    assert captured.out == ""


def test_a_budget_with_the_full_grid_stops_make_bench_sweep_before_any_kubectl_or_aws_call(
    request: pytest.FixtureRequest, fast_aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make bench-sweep BENCH_ARGS="--grid full --budget-minutes 30"` passed the check here and was refused only in
    the pod, after the Job was applied. AWS_ENDPOINT_URL is a listener that must see no connection."""
    kubectl_calls = request.getfixturevalue("fake_kubectl")
    with socket.socket() as aws:
        aws.bind(("127.0.0.1", 0))
        aws.listen(8)
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{aws.getsockname()[1]}")
        code = main(["--apply", "--sweep", "--", "--grid", "full", "--budget-minutes", "30"])
        aws.setblocking(False)
        with pytest.raises(BlockingIOError):
            aws.accept()  # nobody connected: no STS, no S3
    assert kubectl_calls() == []
    assert code == 2
    err = capsys.readouterr().err
    assert (
        "BENCH_ARGS '--grid full --budget-minutes 30': --budget-minutes 30 caps the adaptive sweep; --grid full runs "
        "every point (drop one of the two); see python -m bench sweep --help"
    ) in err


def _stubbed_pricing(monkeypatch, answer):
    """cloud.aws's bounded clients, the pricing one answering through botocore's Stubber (request and answer
    validated against botocore's model)."""
    from botocore.stub import Stubber

    from cloud import aws

    real = aws.client

    def client(service, region, **kwargs):
        made = real(service, region, **kwargs)
        if service == "pricing":
            stubber = Stubber(made)
            answer(stubber)
            stubber.activate()
        return made

    monkeypatch.setattr(aws, "client", client)


def test_make_bench_passes_the_price_it_read_from_aws_when_the_config_sets_none(monkeypatch, capsys):
    import json

    from config import parse_config
    from ops.price import on_demand_filters
    from ops.run_benchmark import bench_args_problem, price_args
    from tests.conftest import default_config_dict

    product = {
        "terms": {"OnDemand": {"T": {"priceDimensions": {"D": {"unit": "Hrs", "pricePerUnit": {"USD": "44.7"}}}}}}
    }
    _stubbed_pricing(
        monkeypatch,
        lambda s: s.add_response(
            "get_products",
            {"FormatVersion": "aws_v1", "PriceList": [json.dumps(product)]},
            {
                "ServiceCode": "AmazonEC2",
                "Filters": on_demand_filters("trn2.48xlarge", "us-east-2"),
                "FormatVersion": "aws_v1",
            },
        ),
    )
    config = parse_config(default_config_dict())
    args = price_args(config, [])
    assert args == ["--node-hourly-price-usd", "44.7"]
    assert "node price $44.70 per hour (on demand in us-east-2, AWS Price List API)" in capsys.readouterr().out
    from charts.jobs.bench import RUN

    assert bench_args_problem(config, args, mode=RUN) is None  # the Job's bench parses it
    assert price_args(config, ["--node-hourly-price-usd", "30"]) == []  # BENCH_ARGS' own price stays
    assert price_args(config, ["--node-hourly", "30"]) == []  # also abbreviated, as argparse takes it

    data = default_config_dict()
    data["trn2_nodes"]["hourly_price_usd"] = 40.0
    assert price_args(parse_config(data), []) == []  # the config's price wins: nothing asked of AWS


def test_no_price_from_aws_is_said_and_the_benchmark_goes_on(monkeypatch, capsys):
    from config import parse_config
    from ops.run_benchmark import price_args
    from tests.conftest import default_config_dict

    _stubbed_pricing(
        monkeypatch, lambda s: s.add_client_error("get_products", "AccessDeniedException", http_status_code=400)
    )
    assert price_args(parse_config(default_config_dict()), []) == []
    said = capsys.readouterr().err
    assert "no node price for cost per token: AWS did not give the node's price (AccessDeniedException)" in said
