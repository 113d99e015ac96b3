from __future__ import annotations

import pytest

from bench.selfcheck import main


@pytest.mark.timing
def test_selfcheck_reports_accuracy_and_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    # 1% is the claim on a machine with CPU to spare (benchmarks/client_accuracy.py); here a wide margin, so a
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
