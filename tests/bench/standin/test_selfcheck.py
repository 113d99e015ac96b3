from __future__ import annotations

import pytest

from bench.standin.selfcheck import main
from tests.bench.conftest import usage_error


@pytest.mark.timing
def test_selfcheck_reports_accuracy_and_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    # 1% is the claim on a machine with CPU to spare (perf/client_accuracy.py); here a wide margin, so a
    # busy machine does not fail the CLI test
    args = ["--streams", "16", "--tokens-per-s", "50", "--seconds", "1", "--ttft-ms", "300", "--pattern", "1,3"]
    code = main([*args, "--tolerance-pct", "10"])
    out = capsys.readouterr().out
    assert "16/16 ok" in out and "client CPU (getrusage, this process)" in out
    for metric in ("TTFT ms", "TPOT ms", "ITL ms", "E2E ms"):
        assert metric in out
    assert code == 0 and "PASS: client means within 10.0%" in out


def test_selfcheck_bounds_its_arguments() -> None:
    with pytest.raises(SystemExit):
        main(["--seconds", "1000"])


@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("--tolerance-pct", "nan", "not a finite number"),  # was PASS: nothing compares greater than nan
        ("--tolerance-pct", "-1", "at least 0"),
        ("--tokens-per-s", "nan", "not a finite number"),
        ("--tokens-per-s", "0", "greater than 0"),
        ("--pattern", "1,x", "not comma-separated whole numbers"),
        ("--pattern", "0", "below 1 token"),
        ("--streams", "0", "below 1"),
        ("--ttft-ms", "inf", "not a finite number"),
    ],
)
def test_selfcheck_refuses_bad_numbers_at_parse_time(
    flag: str, value: str, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = usage_error(main, [flag, value], capsys)
    assert f"argument {flag}" in err and words in err and "Traceback" not in err
