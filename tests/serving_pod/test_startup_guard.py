"""The start-up guard: vLLM that loads its cache serves; vLLM that compiles is stopped with a sentence.

The guard runs as the pod runs it (`python3 startup_guard.py ... -- <command>`, here without site-packages), around
a stand-in vLLM that is a real process serving real HTTP on loopback: one that only serves (a cache hit), one that writes a new file into the
compile cache first (a miss storing its NEFF), one that starts a `neuronx-cc` process (a compile under way), either
directly or three processes down, as vLLM's engine core and its compile workers do.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.ports import free_port
from tests.vllm_health import HEALTH_SERVER

GUARD = ROOT / "serving_pod" / "startup_guard.py"

STAND_IN = (
    HEALTH_SERVER
    + """
import os, pathlib, subprocess, sys, time
mode, port, cache, compiler = sys.argv[1], int(sys.argv[2]), pathlib.Path(sys.argv[3]), sys.argv[4]
pathlib.Path(cache.parent / "pid").write_text(str(os.getpid()))
if mode == "writes-cache":
    (cache / "9f8e7d6c").mkdir()
    (cache / "9f8e7d6c" / "model.neff").write_bytes(b"neff")
if mode == "runs-compiler":
    subprocess.Popen([compiler, "compile", "graph.hlo"])
if mode == "runs-compiler-deep":
    # As vLLM does: the API server starts an engine-core process, whose compile worker runs the compiler.
    worker = "import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); time.sleep(60)"
    engine = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {worker!r}, *sys.argv[1:]]); time.sleep(60)"
    subprocess.Popen([sys.executable, "-c", engine, compiler, "compile", "graph.hlo"])
if mode != "hit":
    time.sleep(60)  # a compile takes long: the guard must stop it before it would serve
import signal
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
health_server(port).serve_forever()
"""
)

# A compiler stand-in named like the real one: a Python console script, as neuronx-cc is.
COMPILER = "#!{python}\nimport time\ntime.sleep(60)\n"


def start(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[str], Path]:
    cache = tmp_path / "vllm-cache" / "neuron" / "compile_cache"
    (cache / "0123abcd").mkdir(parents=True)
    (cache / "0123abcd" / "model.neff").write_bytes(b"copied by the init step")
    compiler = tmp_path / "bin" / "neuronx-cc"
    compiler.parent.mkdir()
    compiler.write_text(COMPILER.format(python=sys.executable))
    compiler.chmod(compiler.stat().st_mode | stat.S_IXUSR)
    server = tmp_path / "vllm_stand_in.py"
    server.write_text(STAND_IN)
    port = free_port()
    argv = [sys.executable, "-S", str(GUARD), "--watch", str(cache), "--port", str(port), "--profile", "eagle3"]
    argv += ["--compiler-process", "neuronx-cc", "--poll-seconds", "0.1", "--"]
    argv += [sys.executable, str(server), mode, str(port), str(cache), str(compiler)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), cache.parent


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_server_that_loads_its_cache_serves_and_stops_with_the_pod(tmp_path):
    guard, _ = start(tmp_path, "hit")
    deadline = time.monotonic() + 30
    line = ""
    while "OK" not in line and time.monotonic() < deadline:
        line = guard.stdout.readline()
    assert "OK: vLLM serves and compiled nothing" in line
    assert guard.poll() is None  # it keeps vLLM running
    guard.send_signal(signal.SIGTERM)  # the kubelet stopping the pod
    assert guard.wait(timeout=30) == 0


@pytest.mark.parametrize(
    ("mode", "seen"),
    [
        ("writes-cache", "vLLM wrote 1 new files to the compile cache"),
        ("runs-compiler", "(neuronx-cc) runs under vLLM"),
        ("runs-compiler-deep", "(neuronx-cc) runs under vLLM"),  # a great-grandchild of vLLM's first process
    ],
)
def test_a_server_that_compiles_during_start_up_is_stopped_with_a_sentence(tmp_path, mode, seen):
    guard, root = start(tmp_path, mode)
    try:
        _, err = guard.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        guard.terminate()  # it forwards SIGTERM to vLLM's process group: nothing is left running
        guard.communicate(timeout=60)
        pytest.fail("the guard did not stop a server that compiles")
    assert guard.returncode == 1
    assert "FAIL: profile eagle3 started to compile instead of loading the published cache" in err
    assert seen in err
    assert "make build PROFILE=eagle3" in err
    assert not alive(int((root / "pid").read_text()))  # vLLM and its compiler are stopped, not left compiling


def test_the_guard_refuses_a_command_line_without_vllm(tmp_path):
    result = subprocess.run(
        [sys.executable, "-S", str(GUARD), "--watch", str(tmp_path), "--port", "1", "--profile", "p"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "give vLLM's command line after --" in result.stderr
