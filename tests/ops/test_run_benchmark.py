"""`python -m ops.run_benchmark` without --apply: the Job it would run, benchmark or lossless check."""

from __future__ import annotations

import shlex

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
