"""The kill matrix: `python -m ops.build_artifact speculative --apply` as a real process against moto and the fake
kubectl (tests/ops/fake_cluster.py), stopped at each step by each way a client dies, then judged by what the fake
cluster holds afterwards. Shared by tests/ops/test_out_of_service.py and perf/kill_matrix.py (which also runs it
against an older checkout).

Ctrl-C and a closed terminal signal the whole foreground process group (the client starts in a group of its own
here, as a shell's job does); `kill` and the OOM killer signal the client alone. A held kubectl call (FAKE_HOLD)
waits before it does anything, as a slow API would, and is released only after the client has reacted, so a
kubectl the client left running does its write after the client is gone, as it would in a real cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.ops.fake_cluster import cluster_state, install_kubectl

PROFILE = "speculative"
PAUSED = "autoscaling.keda.sh/paused-replicas"
# Where the client is stopped: the fake kubectl's held steps, in the order a build meets them.
STEPS = {
    "lookup": "before the pause (its look for old pauses)",
    "pause": "during the annotate that pauses",
    "pods": "while waiting for the pods to go",
    "job": "while the Job runs",
    "give-back": "during the give-back",
}
KILLS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGKILL", "SIGINT x2")
GROUP = {"SIGINT", "SIGHUP", "SIGINT x2"}  # the terminal's signals reach the whole foreground group


def build_command(root: Path, poll_s: float) -> list[str]:
    return [sys.executable, "-m", "ops.build_artifact", PROFILE, "--apply", "--poll-seconds", str(poll_s)]


@dataclass
class Run:
    """One run of the client: its exit, its words, and the kubectl processes it started."""

    code: int | None
    output: str
    seconds: float
    outlived: list[int] = field(default_factory=list)  # kubectl pids still running once the client had ended


@dataclass
class Cell:
    step: str
    kill: str
    reached: bool  # the client reached the step (an older client may make no call there)
    run: Run
    paused_after: bool  # the fake cluster's ScaledObject still paused once every kubectl had ended
    pause_landed: bool  # some kubectl set the pause during the run
    next_run: Run | None = None  # the next `make build`, when the kill left the profile paused
    paused_at_end: bool = False
    client: Client | None = None

    @property
    def said_paused(self) -> bool:
        """The client's own words name the pause it leaves and the command that gives it back."""
        return "could not give the service back" in self.run.output and f"{PAUSED}-" in self.run.output

    @property
    def next_found(self) -> bool:
        return self.next_run is not None and f"{PROFILE}: out of service since make build" in self.next_run.output

    def outcome(self) -> str:
        """A few words for the table: what the profile was left in, and how the client ended."""
        if self.paused_after and self.said_paused:
            left = "paused, said"
        elif self.paused_after and self.next_run is None:
            left = "PAUSED, silent"
        elif self.paused_after:
            left = f"next: {'found' if self.next_found else 'NOT FOUND'}, {'PAUSED' if self.paused_at_end else 'back'}"
        elif not self.pause_landed:
            left = "never paused"
        else:
            left = "given back" if "resumed" in self.run.output else "back UNSAID"
        code = self.run.code
        end = "hung" if code is None else str(code) if code >= 0 else signal.Signals(-code).name
        if "Traceback" in self.run.output:
            end += " +tb"
        if self.run.outlived:
            end += f" +{len(self.run.outlived)}kubectl"
        return f"{left} / {end}"


def alive(pid: int) -> bool:
    """A fake kubectl process that has not ended (a zombie has ended: nobody may have reaped an orphan yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z" and b"kubectl" in cmdline


def _wait(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


class Client:
    """The client process with the fake kubectl: one directory, one cluster state, its holds."""

    def __init__(self, root: Path, work: Path, env: dict[str, str], command: list[str]) -> None:
        self.root, self.work, self.command = root, work, command
        self.holds = work / "holds"
        self.holds.mkdir(parents=True, exist_ok=True)
        self.cluster = work / "cluster.json"
        self.pids = work / "kubectl.pids"
        self.env = env | {
            "PATH": f"{install_kubectl(work / 'bin').parent}{os.pathsep}{env['PATH']}",
            "FAKE_CLUSTER": str(self.cluster),
            "FAKE_KUBECTL_PIDS": str(self.pids),
            "FAKE_HOLD_DIR": str(self.holds),
            "FAKE_JOB_RESULT": "Complete",
            "FAKE_JOB_NEEDS": PROFILE,
            "PYTHONPATH": str(root),
        }

    def state(self) -> dict:
        return json.loads(self.cluster.read_text())

    def paused(self) -> bool:
        return PAUSED in self.state()["scaledobjects"][PROFILE]["annotations"]

    def kubectl_pids(self) -> list[int]:
        return [int(p) for p in self.pids.read_text().split()] if self.pids.exists() else []

    def held(self, step: str) -> bool:
        return (self.holds / f"{step}.held").exists()

    def release(self, step: str) -> None:
        (self.holds / f"{step}.release").touch()

    def start(self, name: str, hold: list[str]) -> subprocess.Popen[bytes]:
        self.log = self.work / f"{name}.out"
        env = self.env | {"FAKE_KUBECTL_LOG": str(self.work / f"{name}.kubectl.log"), "FAKE_HOLD": ",".join(hold)}
        self.started = time.monotonic()
        with self.log.open("wb") as out:
            return subprocess.Popen(
                self.command, cwd=self.root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def finish(self, process: subprocess.Popen[bytes], before: set[int], *, limit_s: float = 60.0) -> Run:
        try:
            process.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code: int | None = None
        else:
            code = process.returncode
        seconds = time.monotonic() - self.started
        mine = [p for p in self.kubectl_pids() if p not in before]
        _wait(lambda: not any(alive(p) for p in mine), 2.0)  # a kubectl the kernel is killing with its parent
        outlived = [p for p in mine if alive(p)]
        return Run(code, self.log.read_text(errors="replace"), seconds, outlived)


def send(process: subprocess.Popen[bytes], kill: str) -> None:
    sig = signal.Signals[kill.split()[0]]
    with contextlib.suppress(ProcessLookupError):  # it ended already (a second Ctrl-C after the first ended it)
        if kill in GROUP:
            os.killpg(process.pid, sig)
        else:
            os.kill(process.pid, sig)


def run_cell(root: Path, work: Path, env: dict[str, str], step: str, kill: str, *, poll_s: float) -> Cell:
    """Stop a build at `step` with `kill` and wait until every kubectl it started has ended."""
    client = Client(root, work, env, build_command(root, poll_s))
    client.cluster.write_text(json.dumps(cluster_state(["baseline", PROFILE], scaled=True)))
    hold = [step] + (["give-back"] if kill == "SIGINT x2" and step != "give-back" else [])
    process = client.start("run", hold)
    reached = _wait(lambda: client.held(step) or process.poll() is not None, 60) and client.held(step)
    if reached:
        send(process, kill)
        if kill == "SIGINT x2":
            if step != "give-back":
                client.release(step)  # the first one ends the step; the second comes during the give-back
                _wait(lambda: client.held("give-back") or process.poll() is not None, 30)
            time.sleep(0.05)
            send(process, kill)
    _wait(lambda: process.poll() is not None, 1.0)  # time to react before the held call answers
    if process.poll() is not None:
        run = client.finish(process, set())
    for s in STEPS:
        client.release(s)
    if process.returncode is None:
        run = client.finish(process, set())
    _wait(lambda: not any(alive(p) for p in client.kubectl_pids()), 10)  # an orphan finishes its write
    landed = any(f"{PAUSED}=0" in h["args"] for h in client.state().get("history", []))
    cell = Cell(step, kill, reached, run, client.paused(), landed)
    cell.client = client
    cell.paused_at_end = cell.paused_after
    return cell


def follow_up(cell: Cell) -> None:
    """The next `make build`, when the kill left the profile paused without a word."""
    client = cell.client
    if client is not None and cell.paused_after and not cell.said_paused:
        before = set(client.kubectl_pids())
        cell.next_run = client.finish(client.start("next", []), before)
        cell.paused_at_end = client.paused()


def matrix(
    root: Path, work: Path, env: dict[str, str], *, poll_s: float, publish: Callable[[], object], workers: int
) -> list[Cell]:
    """Every step x kill, `workers` at a time; then the next `make build` where a kill left a silent pause: first
    where the Job had not started, then, with the artifact published (a Job goes on in the cluster after its client
    died, and publishes), where it had."""
    grid = [(s, k) for s in STEPS for k in KILLS]

    def one(c: tuple[str, str]) -> Cell:
        return run_cell(root, work / f"{c[0]}-{c[1]}".replace(" ", ""), env, *c, poll_s=poll_s)

    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(one, grid))
        started = [c for c in results if c.step in ("job", "give-back")]
        list(pool.map(follow_up, [c for c in results if c not in started]))
        publish()
        list(pool.map(follow_up, started))
    return results


def table(results: list[Cell]) -> str:
    """Steps down, kills across: the outcome and the client's exit."""
    by = {(c.step, c.kill): c for c in results}
    lines = [f"{'kill at':<44}" + "".join(f"{k:<43}" for k in KILLS)]
    for step, what in STEPS.items():
        row = [by[(step, k)] for k in KILLS if (step, k) in by]
        lines.append(f"{what:<44}" + "".join(f"{c.outcome() if c.reached else 'step not reached':<43}" for c in row))
    lines.append(
        "(next: the next make build, after the Job published if it had started; +tb: a traceback; "
        "+Nkubectl: kubectl still running after its client)"
    )
    return "\n".join(lines)
