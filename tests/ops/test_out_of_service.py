"""Taking a profile out of service survives every way its client can die: the kill matrix (real signals to a real
`python -m ops.build_artifact` against moto and the fake cluster, tests/ops/kill_matrix.py), and the pause a
SIGKILL leaves behind found, named and given back by the next ops command (`make build`, `make stage`,
`make bench`) where the profile's artifact is in place."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from config import load_config
from config.exit_codes import EXIT_INTERRUPTED
from ops import run_benchmark as run_benchmark_module
from ops.artifact_check import published
from ops.build_artifact import run_build
from ops.interrupts import Interrupted
from ops.kubectl import run_or_print
from ops.out_of_service import PAUSED_BY, PAUSED_REPLICAS, Target, give_back_left_pauses, paused_by
from ops.stage_checkpoints import run_stage
from tests.conftest import MOTO_ACCOUNT
from tests.ops import kill_matrix
from tests.ops.fake_cluster import models_bucket, publish_artifact_of

ROOT = Path(__file__).resolve().parents[2]
STAGED = ["qwen3-32b", "qwen3-1-7b"]


@pytest.mark.timeout(600)
def test_no_kill_at_any_step_leaves_the_profile_paused_without_a_word(aws_env, tmp_path, capsys):
    """SIGINT, SIGTERM, SIGHUP, SIGKILL and a second SIGINT at each of the build's five steps: every handled kill
    gives the service back itself and ends with one sentence and 130; a SIGKILL leaves at most a pause the next
    `make build` names and gives back; no kubectl runs on after its client."""
    models_bucket(staged=STAGED)
    env = dict(os.environ)
    results = kill_matrix.matrix(
        ROOT, tmp_path, env, poll_s=0.05, publish=lambda: publish_artifact_of(tmp_path / "a", "speculative"), workers=3
    )
    with capsys.disabled():
        print("\n" + kill_matrix.table(results))
    assert len(results) == 25 and all(c.reached for c in results), kill_matrix.table(results)
    for cell in results:
        where = f"{cell.kill} {kill_matrix.STEPS[cell.step]}:\n{cell.run.output}"
        assert not cell.run.outlived, where
        assert "Traceback" not in cell.run.output, where
        if cell.kill == "SIGKILL":
            assert cell.run.code == -9, where
            assert not cell.paused_at_end and (cell.next_found or not cell.paused_after), where
            continue
        assert cell.run.code == EXIT_INTERRUPTED, where
        assert f"interrupted ({cell.kill.split()[0]}): a build Job already started goes on" in cell.run.output, where
        assert not cell.paused_after, where
        assert "scaledobject/speculative resumed" in cell.run.output or not cell.pause_landed, where


def _paused(state_path: Path, profile: str, by: str | None) -> None:
    """The fake cluster with `profile` paused at 0, by `by` (None: by hand)."""
    state = json.loads(state_path.read_text())
    state["scaledobjects"][profile]["annotations"] = {PAUSED_REPLICAS: "0"} | ({PAUSED_BY: by} if by else {})
    state["replicas"][profile] = state["seen"][profile] = state["pods"][profile] = 0
    state_path.write_text(json.dumps(state))


def _dead_pid() -> int:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(ended.stdout)


def _by(pid: int, host: str | None = None) -> str:
    return f"make build PROFILE=speculative at 2026-11-28T07:00:00Z, pid {pid} on {host or socket.gethostname()}"


@pytest.fixture
def left(fake_cluster, tmp_path, monkeypatch):
    """The default config's two profiles, speculative left paused by `by`; returns the state reader."""

    def make(by: str | None) -> None:
        fake_cluster(["baseline", "speculative"], scaled=True)
        _paused(tmp_path / "cluster.json", "speculative", by)
        monkeypatch.setenv("FAKE_JOB_RESULT", "Complete")

    make.state = fake_cluster.state  # type: ignore[attr-defined]
    return make


def _resumes(calls: list[list[str]]) -> list[int]:
    return [i for i, c in enumerate(calls) if c[2] == "annotate" and f"{PAUSED_REPLICAS}-" in c]


def test_a_build_whose_artifact_was_published_meanwhile_gives_back_the_pause_a_killed_build_left(
    aws_env, left, fake_kubectl, tmp_path, capsys
):
    """The case that exited 0 and left the profile paused: a build SIGKILLed while its Job ran, the Job published."""
    models_bucket(staged=STAGED)
    publish_artifact_of(tmp_path, "speculative")
    left(_by(_dead_pid()))
    assert run_build(None, "speculative", poll_s=0) == 0
    out, err = capsys.readouterr()
    assert f"speculative: out of service since {_by(0)[: -len(socket.gethostname()) - 7]}" in err
    assert "which is no longer running; its artifact is published and verified, so it is given back now" in err
    assert "scaledobject/speculative resumed" in out and "already published and verified; nothing to build" in out
    assert left.state()["scaledobjects"]["speculative"]["annotations"] == {}
    assert len(_resumes(fake_kubectl())) == 1


def test_a_build_whose_artifact_is_missing_takes_a_left_pause_over_and_gives_it_back(
    aws_env, left, fake_kubectl, capsys
):
    models_bucket(staged=STAGED)
    left(_by(_dead_pid()))
    assert run_build(None, "speculative", poll_s=0) == 0
    err = capsys.readouterr().err
    assert "its artifact is not published: this command takes the pause over and gives the service back" in err
    calls = fake_kubectl()
    assert [c[2] for c in calls].index("apply") < _resumes(calls)[0]  # given back after the Job, not before
    assert left.state()["scaledobjects"]["speculative"]["annotations"] == {}


def test_stage_gives_back_a_left_pause_whose_artifact_is_in_place(aws_env, left, fake_kubectl, tmp_path, capsys):
    models_bucket(staged=STAGED)
    publish_artifact_of(tmp_path, "speculative")
    left(_by(_dead_pid(), host="another-host"))  # nobody can tell whether it runs: the artifact decides
    assert run_stage(None, poll_s=0) == 0
    out, err = capsys.readouterr()
    assert f"speculative: out of service since {_by(1, 'another-host')[:-24]}" in err and "given back now" in err
    assert "no longer running" not in err and "scaledobject/speculative resumed" in out
    assert left.state()["scaledobjects"]["speculative"]["annotations"] == {}


def test_bench_gives_back_a_left_pause_before_it_applies_its_job(
    aws_env, left, fake_kubectl, tmp_path, monkeypatch, capsys
):
    models_bucket(staged=STAGED)
    publish_artifact_of(tmp_path, "speculative")
    left(_by(_dead_pid()))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Exception, match="reading s3://"):  # the fake Job uploads no results: what follows is moot
        run_benchmark_module.run_bench(None, [], poll_s=0)
    calls = fake_kubectl()
    assert _resumes(calls)[0] < [c[2] for c in calls].index("apply")
    assert "given back now" in capsys.readouterr().err


def test_a_left_pause_whose_artifact_is_missing_is_named_with_both_ways_back(aws_env, left, fake_kubectl, capsys):
    models_bucket(staged=STAGED)
    left(_by(_dead_pid()))
    assert run_stage(None, poll_s=0) == 0
    err = capsys.readouterr().err
    assert "its artifact is not published, so it stays out until `make build PROFILE=speculative` builds it" in err
    assert (
        "(`kubectl -n trn-specdec annotate scaledobject/speculative autoscaling.keda.sh/paused-replicas- "
        "trn-specdec/paused-by-` gives it back as it is)" in err
    )
    assert (
        not _resumes(fake_kubectl()) and PAUSED_REPLICAS in left.state()["scaledobjects"]["speculative"]["annotations"]
    )


@pytest.mark.timeout(60)
def test_a_left_pause_whose_artifact_s3_did_not_answer_about_stays_with_the_reason_and_the_command(
    silent_aws, left, fake_kubectl, capsys
):
    """S3 never answers here: nothing is given back on a guess."""
    left(_by(_dead_pid()))
    config = load_config()
    give_back_left_pauses(config, published(config, config.models_bucket_name(MOTO_ACCOUNT)))
    err = capsys.readouterr().err
    assert "which is no longer running; could not check its published artifact: " in err and "timeout" in err
    assert ", so it stays out: `kubectl -n trn-specdec annotate scaledobject/speculative" in err
    assert not _resumes(fake_kubectl())


def test_a_pause_by_hand_is_named_and_left_as_it_is(aws_env, left, fake_kubectl, tmp_path, capsys):
    """docs/verify-on-aws.md pauses a profile by hand on purpose: no ops command undoes that."""
    models_bucket(staged=STAGED)
    publish_artifact_of(tmp_path, "speculative")
    left(None)
    assert run_stage(None, poll_s=0) == 0
    err = capsys.readouterr().err
    assert (
        "speculative: scaledobject/speculative is paused at 0 replicas (autoscaling.keda.sh/paused-replicas) by hand"
        in err
    )
    assert "left as it is: `kubectl -n trn-specdec annotate scaledobject/speculative" in err
    assert not _resumes(fake_kubectl())


def test_a_pause_whose_command_still_runs_here_is_left_to_it(aws_env, left, fake_kubectl, tmp_path, capsys):
    models_bucket(staged=STAGED)
    publish_artifact_of(tmp_path, "speculative")
    left(_by(os.getpid()))
    assert run_stage(None, poll_s=0) == 0
    assert "which still runs here and gives it back when it ends" in capsys.readouterr().err
    assert not _resumes(fake_kubectl())


def test_without_scaling_a_deployment_an_ops_command_scaled_to_zero_is_found_and_scaled_back(
    aws_env, fake_cluster, fake_kubectl, tmp_path, unscaled_config, capsys
):
    models_bucket(staged=STAGED)
    publish_artifact_of(tmp_path, "speculative")
    fake_cluster(["baseline", "speculative"], scaled=False)
    state = fake_cluster.state()
    state["replicas"]["speculative"] = 0
    state["deployment_annotations"] = {"speculative": {PAUSED_BY: _by(_dead_pid())}}
    (tmp_path / "cluster.json").write_text(json.dumps(state))
    assert run_stage(str(unscaled_config), poll_s=0) == 0
    assert "deploy/speculative scaled back to 1" in capsys.readouterr().out
    after = fake_cluster.state()
    assert after["replicas"]["speculative"] == 1 and after["deployment_annotations"]["speculative"] == {}


def test_a_cluster_that_cannot_be_asked_is_one_sentence_and_the_command_goes_on(
    aws_env, fake_kubectl, monkeypatch, capsys
):
    models_bucket(staged=STAGED)
    monkeypatch.setenv("FAKE_SCALE_FAILS", "scaledobjects")
    assert run_stage(None, poll_s=0) == 0
    err = capsys.readouterr().err
    assert "could not look for profiles left out of service: `kubectl -n trn-specdec get scaledobjects" in err


@pytest.mark.parametrize("scaled", [True, False])
def test_the_real_kubectl_reads_the_pause_and_its_author_from_our_arguments_and_removes_both(scaled, tmp_path):
    """Our take and give-back arguments through the pinned kubectl's own parser (`--local`: no cluster)."""
    config = load_config()
    if not scaled:
        config = config.model_copy(update={"scaling": config.scaling.model_copy(update={"enabled": False})})
    target = Target.of(config, config.profile("speculative"))
    kind = "ScaledObject" if scaled else "Deployment"
    obj = {"apiVersion": "keda.sh/v1alpha1" if scaled else "apps/v1", "kind": kind,
           "metadata": {"name": "speculative", "namespace": "trn-specdec"}}  # fmt: skip
    if not scaled:
        obj["spec"] = {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
                       "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}  # fmt: skip
    by = paused_by("make build PROFILE=speculative")

    def local(command: tuple[str, ...], source: dict) -> dict:
        verb, rest = command[2], command[4:]
        (tmp_path / "obj.json").write_text(json.dumps(source))
        done = subprocess.run(["kubectl", verb, "-f", str(tmp_path / "obj.json"), "--local", "-o", "json", *rest],
                              capture_output=True, text=True, check=True)  # fmt: skip
        return json.loads(done.stdout)

    taken = local(target.take_command(by), obj)
    assert taken["metadata"]["annotations"][PAUSED_BY] == by
    if scaled:
        assert taken["metadata"]["annotations"][PAUSED_REPLICAS] == "0"
    else:
        assert taken["spec"]["replicas"] == 0
    given = local(target.give_back_command(), taken)
    assert not given["metadata"].get("annotations") and (scaled or given["spec"]["replicas"] == 1)


def test_an_interrupt_of_any_driver_is_one_sentence_and_130(capsys):
    def stopped() -> int:
        raise Interrupted(1)  # SIGHUP: the terminal closed

    assert run_or_print(True, stopped, list, resume="run it again") == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "interrupted (SIGHUP): run it again\n"
