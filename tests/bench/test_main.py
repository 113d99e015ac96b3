"""The `python -m bench` command line, end to end against loopback servers and moto."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from bench.__main__ import main
from bench.results import BenchResults, load_results, save_results
from tests.bench.conftest import ROOT


def test_run_with_a_suite_file_as_a_module(two_servers: dict[str, str], tmp_path: Path) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text("- {name: sql, prompt: 'SELECT 1;', kind: structured}\n")
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "bench", "run", "--suite", str(suite), "--requests", "2", "--warmup", "0"]
    cmd += ["--max-tokens", "6", "--out", str(out), "--api", "completions"]
    cmd += [f"--endpoint={name}={url}" for name, url in two_servers.items()]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "sql" in done.stdout and "speedups are against `baseline`" in done.stdout
    results = load_results(out)
    assert results.settings.concurrency == 4 and results.settings.api == "completions"
    assert [r.test_case for r in results.runs] == ["sql", "sql"]
    assert json.loads(out.read_text())["schema_version"] == 1


def test_run_refuses_bad_arguments_with_a_sentence(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["run", "--endpoint", "http://127.0.0.1:1"]) == 2
    assert "NAME=URL" in capsys.readouterr().err
    assert main(["run", "--endpoint", "a=http://127.0.0.1:1", "--suite", str(tmp_path / "none.yaml")]) == 2
    assert "neither `default` nor a readable file" in capsys.readouterr().err
    assert main(["run", "--endpoint", "a=http://127.0.0.1:1", "--upload", "bucket/key"]) == 2
    assert "not s3://BUCKET/KEY" in capsys.readouterr().err
    assert main(["run", "--endpoint", "a=http://127.0.0.1:9", "--requests", "1"]) == 1
    assert "cannot reach http://127.0.0.1:9/v1/models" in capsys.readouterr().err


def test_run_with_rate_publishes_to_cloudwatch_and_uploads(
    aws_env: str, two_servers: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    suite = tmp_path / "s.json"
    suite.write_text(json.dumps([{"name": "poem", "prompt": "Shall I compare", "kind": "open-ended"}]))
    args = ["run", "--suite", str(suite), "--rate", "20", "--requests", "2", "--warmup", "0", "--max-tokens", "5"]
    args += ["--out", str(out), "--cloudwatch", "--upload", "s3://bench-bucket/results/run1.json"]
    args += [f"--endpoint={n}={u}" for n, u in two_servers.items()]
    s3 = boto3.client("s3", region_name="us-east-2")
    s3.create_bucket(Bucket="bench-bucket", CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "CloudWatch TrnSpecdec/Bench:" in printed and "uploaded: s3://bench-bucket/results/run1.json" in printed
    assert load_results(out).settings.rate == 20.0
    stored = s3.get_object(Bucket="bench-bucket", Key="results/run1.json")
    assert stored["ContentType"] == "application/json" and stored["Body"].read() == out.read_bytes()


def test_report_and_publish_commands(
    aws_env: str, bench_results: BenchResults, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = save_results(bench_results, tmp_path / "r.json")
    assert main(["report", str(results), "--out", str(tmp_path / "rep")]) == 0
    assert {p.name for p in (tmp_path / "rep").iterdir()} == {"report.md", "latency.png", "speedup.png"}
    assert main(["publish", str(results)]) == 0
    assert "metric datums" in capsys.readouterr().out
    data = json.loads(results.read_text())
    for run in data["runs"]:
        run["started_at"] = "2000-01-01T00:00:00Z"
    (tmp_path / "old.json").write_text(json.dumps(data))
    assert main(["publish", str(tmp_path / "old.json")]) == 1
    assert "older than 14 days" in capsys.readouterr().err
    (tmp_path / "v0.json").write_text('{"schema_version": 0}')
    assert main(["report", str(tmp_path / "v0.json")]) == 2
    assert "schema_version=0" in capsys.readouterr().err


def test_run_with_a_missing_config_is_one_sentence(tmp_path, capsys):
    assert main(["run", "--endpoint", "a=http://127.0.0.1:9", "--config", str(tmp_path / "none.yaml")]) == 2
    err = capsys.readouterr().err
    assert "none.yaml" in err and "cannot be read" in err
