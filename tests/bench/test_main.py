"""The `python -m bench` command line, end to end against loopback servers and moto."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest
import yaml

from bench.__main__ import main
from bench.cost import costs
from bench.results import BenchResults, load_results, save_results
from bench.runner import format_table
from bench.standin.server import Script
from config import parse_config
from tests.bench.builders import sweep_settings
from tests.bench.conftest import ROOT, Serve, usage_error
from tests.conftest import default_config_dict


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
    assert "cannot be read (No such file or directory); pass `default` or a YAML/JSON file" in capsys.readouterr().err
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


def _wait_for_cases(path: Path, proc: subprocess.Popen[str], cases: int) -> None:
    """Block until `path` holds `cases` finished test cases (the run rewrites it after each case)."""
    while proc.poll() is None:
        if path.exists() and len({r.test_case for r in load_results(path).runs}) >= cases:
            return
        time.sleep(0.05)
    raise AssertionError(f"bench run exited early: {proc.communicate()}")


@pytest.fixture(scope="module")
def slow_suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    suite = tmp_path_factory.mktemp("suite") / "suite.yaml"
    suite.write_text("\n".join(f"- {{name: case{i}, prompt: 'prompt {i}', kind: structured}}" for i in range(4)))
    return suite


def _run_cmd(url: str, suite: Path, out: Path, *extra: str) -> list[str]:
    cmd = [sys.executable, "-m", "bench", "run", "--suite", str(suite), "--requests", "2", "--warmup", "0"]
    return [*cmd, "--max-tokens", "20", "--out", str(out), f"--endpoint=solo={url}", *extra]


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_a_killed_run_keeps_every_finished_case_and_resumes(
    serve: Serve, slow_suite: Path, tmp_path: Path, how: signal.Signals
) -> None:
    url = serve(Script(ttft_s=0.02, step_s=0.05))  # about 1 s per case
    out = tmp_path / "r.json"
    proc = subprocess.Popen(_run_cmd(url, slow_suite, out), cwd=ROOT, text=True, stderr=subprocess.PIPE)
    try:
        _wait_for_cases(out, proc, 1)
        proc.send_signal(how)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == (-9 if how == signal.SIGKILL else 130)
    if how == signal.SIGINT:
        assert "every finished test case is in" in err and "--resume" in err
    kept = load_results(out)
    assert main(["report", str(out), "--out", str(tmp_path / "rep")]) == 0
    assert (tmp_path / "rep" / "report.md").read_text().count("| case") >= 1
    done = subprocess.run(
        _run_cmd(url, slow_suite, out, "--resume"), cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "already in the results file; skipped" in done.stderr
    resumed = load_results(out)
    assert [r.test_case for r in resumed.runs] == [f"case{i}" for i in range(4)]
    assert resumed.runs[: len(kept.runs)] == kept.runs  # finished cases kept as they were, not re-run


def test_resume_refuses_a_file_from_different_settings(
    serve: Serve, slow_suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = serve(Script(ttft_s=0.01, step_s=0.001))
    out = tmp_path / "r.json"
    assert main(_run_cmd(url, slow_suite, out)[3:]) == 0
    assert main([*_run_cmd(url, slow_suite, out, "--resume")[3:], "--max-tokens", "5"]) == 1
    assert "--resume: the results file was run with" in capsys.readouterr().err


def test_run_fails_when_a_variant_never_succeeds_and_says_why(
    serve: Serve, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = serve(Script(ttft_s=0.01, step_s=0.001))
    bad = serve(Script(ttft_s=0.01, step_s=0.001, fail_every=1))
    suite = tmp_path / "s.yaml"
    suite.write_text("- {name: one, prompt: 'x', kind: structured}\n")
    args = ["run", "--suite", str(suite), "--requests", "2", "--warmup", "0", "--max-tokens", "3"]
    args += ["--out", str(tmp_path / "r.json"), f"--endpoint=baseline={good}", f"--endpoint=broken={bad}"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "error: variant 'broken'" in err and "had no successful request: 2x HTTP 503" in err
    assert "baseline'" not in err


def one_case_run(tmp_path: Path, data: dict, config_name: str = "config.yaml") -> tuple[list[str], Path]:
    """`bench run` arguments for one open-ended case, 2 requests of 8 tokens, with `data` as the config file
    `config_name`; the caller adds the endpoints. Returns (arguments, results path)."""
    (tmp_path / config_name).write_text(yaml.safe_dump(data))
    suite = tmp_path / "s.yaml"
    suite.write_text("- {name: one, prompt: 'Shall I compare', kind: open-ended}\n")
    out = tmp_path / "r.json"
    args = ["run", "--suite", str(suite), "--requests", "2", "--warmup", "0", "--max-tokens", "8", "--out", str(out)]
    return [*args, "--config", str(tmp_path / config_name)], out


def test_the_baseline_comes_from_the_config_and_is_recorded_in_the_results(
    two_servers: dict[str, str], tmp_path: Path
) -> None:
    """[plain (none), baseline (fused-draft)]: the profile named `baseline` speculates, so it is not the baseline;
    report and tune read the recorded choice, not the names."""
    data = default_config_dict()
    data["profiles"][0]["name"] = "plain"
    args, out = one_case_run(tmp_path, data)
    args += ["--api", "completions"]
    args += [f"--endpoint=baseline={two_servers['speculative']}", f"--endpoint=plain={two_servers['baseline']}"]
    assert main(args) == 0
    results = load_results(out)
    assert results.baseline_variant == "plain" == results.baseline
    assert [s.variant for s in results.speedups()] == ["baseline"]
    assert "speedups are against `plain`" in format_table(results)
    assert main([*args, "--baseline", "nobody"]) == 2


@pytest.mark.parametrize(("config_file", "spec"), [(None, "speculative"), ("vllm-neuron.yaml", "eagle3")])
def test_acceptance_is_read_with_each_profiles_own_stacks_counters(
    two_servers: dict[str, str], tmp_path: Path, config_file: str | None, spec: str
) -> None:
    """Against the same server (it serves vLLM 0.29.0's counters): a legacy-v0 profile's result says why its stack has
    no acceptance (its vLLM never sets the series on Neuron); a vllm-neuron profile's reads the counters."""
    data = default_config_dict() if config_file is None else yaml.safe_load((ROOT / "config" / config_file).read_text())
    args, out = one_case_run(tmp_path, data)
    args += ["--api", "completions"]
    args += [f"--endpoint=baseline={two_servers['baseline']}", f"--endpoint={spec}={two_servers['speculative']}"]
    assert main(args) == 0
    (run,) = [r for r in load_results(out).runs if r.variant == spec]
    metrics = parse_config(data).profile(spec).live_metrics
    if metrics.acceptance is None:
        assert not run.spec_decode.exposed and run.spec_decode.note == f"not exposed: {metrics.no_acceptance}"
    else:
        assert run.spec_decode.exposed and run.spec_decode.acceptance_rate is not None


def test_lossless_mode_runs_at_batch_size_one_in_both_stop_modes_and_prints_the_comparison(
    two_servers: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text("- {name: json, prompt: 'Output valid JSON with fixed keys', kind: structured}\n")
    out = tmp_path / "r.json"
    args = ["run", "--lossless", "--suite", str(suite), "--max-tokens", "12", "--out", str(out)]
    args += [f"--endpoint={name}={url}" for name, url in two_servers.items()]
    assert main(args) == 0
    s = load_results(out).settings
    assert (s.concurrency, s.requests, s.warmup, s.stops) == (1, 8, 0, ["fixed", "natural"])
    text = capsys.readouterr().out
    assert "lossless check at temperature 0" in text
    assert "speculative: 16 of 16 outputs diverge from baseline (100.0%)" in text
    assert "request 0, token 9: baseline ' beta' vs ' zeta' (text)" in text


def test_cost_comes_from_the_configured_price_and_each_profiles_share_of_the_node(
    two_servers: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two 8-device profiles on a 16-device trn2.48xlarge at 40 USD/h: each pays 20 USD/h; the report of a run
    without a price says how to get one, and `report --config` prices it afterwards."""
    data = default_config_dict()
    data["trn2_nodes"]["hourly_price_usd"] = 40.0
    args, out = one_case_run(tmp_path, data, "priced.yaml")
    args += [f"--endpoint={name}={url}" for name, url in two_servers.items()]
    assert main(args) == 0
    assert "USD per 1M out tok" in capsys.readouterr().out
    results = load_results(out)
    assert results.node_hourly_price_usd == 40.0
    assert [(v.devices, v.devices_per_node) for v in results.variants] == [(8, 16), (8, 16)]
    for c, run in zip(costs(results), results.runs, strict=True):
        assert c.hourly_usd == 20.0
        assert c.per_million_usd == pytest.approx(20.0 / 3600 / run.summary.output_tok_s * 1e6)
        assert c.per_request_usd == pytest.approx(20.0 * run.duration_s / 3600 / 2)

    unpriced = results.model_copy(update={"node_hourly_price_usd": None})
    save_results(unpriced, out)
    assert main(["report", str(out), "--out", str(tmp_path / "rep")]) == 0
    assert "set trn2_nodes.hourly_price_usd to see cost" in (tmp_path / "rep" / "report.md").read_text()
    assert main(["report", str(out), "--out", str(tmp_path / "rep"), "--config", str(tmp_path / "priced.yaml")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| one | fixed | speculative | 20.00 |" in md and "cost at 40.00 USD per node-hour" in md


@pytest.mark.parametrize(
    ("command", "flag", "value", "words"),
    [
        ("run", "--request-timeout", "0", "0 must be greater than 0"),
        ("run", "--request-timeout", "-1", "-1 must be greater than 0"),
        ("run", "--request-timeout", "nan", "'nan' is not a finite number"),
        ("run", "--request-timeout", "inf", "'inf' is not a finite number"),
        ("run", "--max-duration", "nan", "'nan' is not a finite number"),
        ("run", "--concurrency", "-1", "-1 is below 1"),
        ("run", "--concurrency", "0", "0 is below 1"),
        ("run", "--rate", "0", "0 must be greater than 0"),
        ("run", "--rate", "nan", "'nan' is not a finite number"),
        ("run", "--requests", "abc", "'abc' is not a whole number"),
        ("run", "--requests", "0", "0 is below 1"),
        ("run", "--warmup", "-1", "-1 is below 0"),
        ("run", "--max-tokens", "0", "0 is below 1"),
        ("sweep", "--rates", "nan", "'nan' holds nan; every value must be a finite number above 0"),
        ("sweep", "--rates", "1,inf", "'1,inf' holds inf"),
        ("sweep", "--concurrency", "abc", "'abc' is not a comma-separated list of whole numbers"),
        ("sweep", "--concurrency", "0", "'0' holds 0"),
        ("sweep", "--concurrency", "2000", "'2000' holds 2000, above 1024 (4x the largest batch"),
        ("sweep", "--max-num-seqs", "100000", "100000 is above 256 (the largest batch a profile compiles"),
        ("sweep", "--requests", "0", "0 is below 1"),
        ("sweep", "--repeats", "0", "0 is below 1"),
        ("sweep", "--request-timeout", "nan", "'nan' is not a finite number"),
        ("sweep", "--max-duration", "inf", "'inf' is not a finite number"),
    ],
)
def test_numbers_are_refused_at_parse_time_with_the_flag_and_the_range(
    command: str, flag: str, value: str, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: 0/-1/nan timeouts disabled the timeout, --concurrency -1 ran 31 s then said "cannot reach"; a sweep's
    value that fails in its grid would fail hours into the sweep."""
    err = usage_error(main, [command, "--endpoint", REFUSING, flag, value], capsys)
    assert f"argument {flag}: {words}" in err and "Traceback" not in err


def test_tune_refuses_a_cost_ratio_that_is_not_a_finite_number(capsys: pytest.CaptureFixture[str]) -> None:
    assert "not a finite number" in usage_error(main, ["tune", "r.json", "--cost-ratio", "nan"], capsys)


@pytest.mark.parametrize("command", [["run"], ["sweep", "--concurrency", "1"]])
@pytest.mark.parametrize("where", ["directory", "under a file"])
def test_an_unwritable_out_is_refused_before_any_request(
    command: list[str], where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a traceback after the first test case. Port 9 refuses: reaching it would be exit 1, not 2."""
    (tmp_path / "file").write_text("")
    out = tmp_path if where == "directory" else tmp_path / "file" / "r.json"
    assert main([*command, "--endpoint", "a=http://127.0.0.1:9", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--out {str(out)!r}" in err and "choose another path" in err and "cannot reach" not in err


def test_a_results_file_that_becomes_unwritable_mid_run_is_a_sentence(
    serve: Serve, slow_suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    import bench.commands.run as run_command

    def full_disk(results: object, path: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(run_command, "save_results", full_disk)
    url = serve(Script(ttft_s=0.01, step_s=0.001))
    assert main(_run_cmd(url, slow_suite, tmp_path / "r.json")[3:]) == 1
    err = capsys.readouterr().err
    assert "cannot write the results to" in err and "No space left on device" in err


@pytest.mark.parametrize("change", ["another endpoint", "another URL"])
def test_resume_refuses_a_different_endpoint_list(
    change: str, serve: Serve, slow_suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One results file must not mix two runs' variants."""
    url = serve(Script(ttft_s=0.01, step_s=0.001))
    other = serve(Script(ttft_s=0.02, step_s=0.001))
    assert other != url
    out = tmp_path / "r.json"
    assert main(_run_cmd(url, slow_suite, out)[3:]) == 0
    before = out.read_bytes()
    cmd = _run_cmd(url if change == "another endpoint" else other, slow_suite, out, "--resume")[3:]
    if change == "another endpoint":
        cmd.append(f"--endpoint=second={other}")
    assert main(cmd) == 1
    assert "pass the same --endpoint list, or a new --out" in capsys.readouterr().err
    assert out.read_bytes() == before


# --- bad input: each ends with one sentence before anything runs (issue 31 item 3) ---------------------------

REFUSING = "a=http://127.0.0.1:9"  # port 9 refuses: reaching it would be exit 1, not 2


def ends_within(seconds: float, call):  # type: ignore[no-untyped-def]
    """call() in a thread: a FIFO or device that the code opened would block it, and the test must not hang."""
    import threading

    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(call()), daemon=True)
    worker.start()
    worker.join(timeout=seconds)
    assert not worker.is_alive(), f"still running after {seconds} s"
    return result[0]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["sweep", "--cases", "nope"], "--cases nope not in the suite; use some of counting"),
        (["sweep", "--cases", ","], "--cases ',' names no test case"),
        (["sweep", "--baseline", "nope"], "--baseline 'nope' is not one of the --endpoint names (a)"),
        (["run", "--baseline", "nope"], "--baseline 'nope' is not one of the --endpoint names (a)"),
    ],
)
def test_names_that_match_nothing_are_refused_before_any_request(
    args: list[str], words: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main([*args, "--endpoint", REFUSING, "--out", str(tmp_path / "o.json")]) == 2
    assert words in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize(
    ("command", "url", "words"),
    [
        ("run", "s3://bucket-only", "--upload 's3://bucket-only' is not s3://BUCKET/KEY"),
        ("sweep", "s3:///results/", "--upload 's3:///results/' names no bucket; write s3://BUCKET/PREFIX/"),
    ],
)
def test_an_upload_url_without_a_bucket_or_key_is_refused_before_any_request(
    command: str, url: str, words: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Before: `run` raised a traceback after the whole run, `sweep` said so after the whole sweep."""
    args = [command, "--endpoint", REFUSING, "--concurrency", "1", "--out", str(tmp_path / "o.json"), "--upload", url]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert words in err and "cannot reach" not in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["run", "--endpoint", REFUSING, "--upload", "bucket/key"], "--upload 'bucket/key' is not s3://BUCKET/KEY"),
        (["sweep", "--endpoint", REFUSING, "--upload", "s3:///r/"], "--upload 's3:///r/' names no bucket"),
        (
            ["sweep", "--endpoint", REFUSING, "--grid", "full", "--budget-minutes", "30"],
            "--budget-minutes 30 caps the adaptive sweep; --grid full runs every point (drop one of the two)",
        ),
        *(
            ([command, "--endpoint", REFUSING, "--endpoint", "a=http://127.0.0.1:10"], "--endpoint name 'a' is given")
            for command in ("run", "sweep")
        ),
        (["tune", "r.json", "--tolerance", "1"], "--tolerance=1.0 must be a fraction below 1"),
        (["tune"], "tune needs a results file (or --propose)"),
        (["tune", "r.json", "--baseline-tpot", "1=45"], "--baseline-tpot '1=45' needs the baseline's p50 TPOT at two"),
    ],
)
def test_what_the_flags_alone_refuse_is_refused_by_the_parse_step_here_and_in_the_pod(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One check per command (Command.problem): parse_args runs it, as ops.run_benchmark does on BENCH_ARGS before
    the Job is applied, and main runs it before any work, as the Job's pod does. Before, the budget with the full
    grid, --upload's form and tune's flags were refused only once the command ran (in the pod, for the Job)."""
    from bench.__main__ import parse_args

    monkeypatch.chdir(tmp_path)  # r.json does not exist: a refusal that read it would say so instead
    assert words in usage_error(parse_args, argv, capsys)
    assert main([*argv, "--out", "o.json"] if argv[0] != "tune" else argv) == 2
    err = capsys.readouterr().err
    assert words in err and "cannot reach" not in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_an_existing_out_is_never_replaced_without_resume_or_overwrite(
    command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "earlier.json"
    out.write_text('{"hours": "of trn2"}')
    args = [command, "--endpoint", REFUSING, "--out", str(out), "--concurrency", "1"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"--out {str(out)!r} already exists" in err and "--resume" in err and "--overwrite" in err
    assert main([*args, "--overwrite"]) == 1  # allowed: it reaches the (refusing) endpoint
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main([*args, "--overwrite", "--resume"])
    assert "not allowed with argument" in capsys.readouterr().err


def _odd(kind: str, tmp_path: Path) -> Path:
    import os

    path = tmp_path / f"odd-{kind}.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    elif kind == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    return path


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_an_odd_out_or_report_dir_is_a_sentence_before_the_sweep_starts(
    kind: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    odd = _odd(kind, tmp_path)
    base = ["sweep", "--endpoint", REFUSING, "--concurrency", "1"]
    assert ends_within(5, lambda: main([*base, "--resume", "--out", str(odd)])) == 2
    assert f"--out {str(odd)!r} is" in capsys.readouterr().err
    if kind != "directory":
        out = tmp_path / "s.json"
        assert ends_within(5, lambda: main([*base, "--out", str(out), "--report-dir", str(odd)])) == 2
        assert f"--report-dir {str(odd)!r} is not a directory" in capsys.readouterr().err
        assert not out.exists()


def test_an_unwritable_report_dir_is_a_sentence_before_the_sweep_starts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("")
    folder = tmp_path / "file" / "report"
    out = tmp_path / "s.json"
    assert main(["sweep", "--endpoint", REFUSING, "--concurrency", "1", "--out", str(out), "--report-dir", str(folder)])
    assert f"--report-dir {str(folder)!r} cannot be written" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["fifo", "device", "binary"])
@pytest.mark.parametrize("command", ["run", "sweep"])
def test_an_odd_suite_is_a_sentence(
    kind: str, command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    odd = _odd(kind, tmp_path)
    args = [command, "--endpoint", REFUSING, "--suite", str(odd), "--out", str(tmp_path / "o.json")]
    assert ends_within(5, lambda: main(args)) == 2
    err = capsys.readouterr().err
    assert f"suite {str(odd)!r}" in err and "Traceback" not in err


@pytest.mark.parametrize("kind", ["fifo", "device", "binary", "directory"])
def test_sweep_report_on_an_odd_input_is_a_sentence(
    kind: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    odd = _odd(kind, tmp_path)
    assert ends_within(5, lambda: main(["sweep-report", str(odd), "--out", str(tmp_path / "r")])) == 2
    err = capsys.readouterr().err
    assert f"sweep file {str(odd)!r}" in err and "pass a file written by `bench sweep`" in err


def test_sweep_report_to_an_unwritable_out_is_a_sentence(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from bench.sweep.run import SweepResults, save_sweep

    settings = sweep_settings()
    source = save_sweep(
        SweepResults(created_at="2026-11-26T00:00:00Z", settings=settings, points=[]), tmp_path / "s.json"
    )
    (tmp_path / "file").write_text("")
    assert main(["sweep-report", str(source), "--out", str(tmp_path / "file")]) == 2
    assert f"--out {str(tmp_path / 'file')!r} is not a directory" in capsys.readouterr().err


FAILING = Script(ttft_s=0.01, step_s=0.002, fail_every=1)  # HTTP 503 to every request
ANSWERING = Script(ttft_s=0.01, step_s=0.002)


def _small_sweep(urls: dict[str, str], out: Path, *extra: str) -> list[str]:
    args = ["sweep", "--concurrency", "1", "--requests", "2", "--max-tokens", "4", "--repeats", "1", "--no-plots"]
    args += ["--cases", "counting", "--out", str(out), *extra]
    return args + [f"--endpoint={name}={url}" for name, url in urls.items()]


def test_a_variant_that_never_answers_fails_the_sweep_and_uploads_nothing(
    serve: Serve, aws_env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s3 = boto3.client("s3", region_name="us-east-2")
    s3.create_bucket(Bucket="sweep-bucket", CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
    urls = {"baseline": serve(ANSWERING), "speculative": serve(FAILING)}
    out = tmp_path / "sweep.json"
    assert main(_small_sweep(urls, out, "--rates", "none", "--upload", "s3://sweep-bucket/results/x/")) == 1
    err = capsys.readouterr().err
    assert "speculative answered no request in the whole sweep" in err and "scripted failure" in err
    assert s3.list_objects_v2(Bucket="sweep-bucket").get("KeyCount") == 0
    assert out.exists() and not (tmp_path / "sweep").joinpath("crossover.json").exists()


def test_a_baseline_that_never_answers_stops_before_a_rate_grid_of_zeros(
    serve: Serve, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    urls = {"baseline": serve(FAILING), "speculative": serve(ANSWERING)}
    out = tmp_path / "sweep.json"
    assert main(_small_sweep(urls, out, "--max-num-seqs", "1")) == 1
    err = capsys.readouterr().err
    assert "the baseline 'baseline' answered no request at concurrency 1" in err and "pass --rates" in err
    assert "rate" not in {p["point"]["kind"] for p in json.loads(out.read_text())["points"]}


@pytest.mark.parametrize(
    ("configured", "flag", "used"), [(None, "44.7", 44.7), (40.0, "44.7", 40.0), (None, None, None)]
)
def test_the_price_make_bench_read_from_aws_prices_a_run_whose_config_sets_none(
    two_servers: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str], configured, flag, used
) -> None:
    """--node-hourly-price-usd (what make bench passes when the config's price is null) gives the report its cost per
    1M tokens; the config's own price wins over it."""
    data = default_config_dict()
    data["trn2_nodes"]["hourly_price_usd"] = configured
    args, out = one_case_run(tmp_path, data)
    args += [f"--endpoint={name}={url}" for name, url in two_servers.items()]
    args += ["--node-hourly-price-usd", flag] if flag else []
    assert main(args) == 0
    assert load_results(out).node_hourly_price_usd == used
    assert main(["report", str(out), "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert (f"cost at {used:.2f} USD per node-hour" in md) if used else ("set trn2_nodes.hourly_price_usd" in md)
