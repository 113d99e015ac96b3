"""Run vLLM, and stop it with a sentence when it compiles during start-up instead of reading the copied cache.

    python3 startup_guard.py --watch /cache/vllm-cache/neuron/compile_cache --port 8000 --profile eagle3 \\
        [--compiler-process neuronx-cc ...] -- vllm serve ...

Why: on the plugin's native route no switch that makes a compile-cache miss fatal could be read at the pinned
version (docs/serving-stacks.md), and a miss there means an hour of compiling on a node that bills by the hour.
Until vLLM answers /health, every --poll-seconds the guard looks for two signs of a compile: a file in the compile
cache that was not there when vLLM started (the init step copied exactly what the manifest lists; a miss stores
its NEFF there: compilation_cache.md), and a running process named like the compiler (--compiler-process). On
either it stops vLLM's process group and exits 1 with what it saw, so the pod restarts into CrashLoopBackOff with
the sentence in `kubectl logs --previous`, never a silent compile. Once vLLM serves it says so, forwards SIGTERM and
SIGINT to vLLM, and exits with vLLM's code.

Standard library only: it runs with the serving image's own python3 from the init step's ConfigMap.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

EXIT_FAILED, EXIT_USAGE = 1, 2  # config/exit_codes.py's values (this script runs alone in the serving image)
STOP_GRACE_SECONDS = 30
SHOWN = 5  # new cache files named in the sentence


def cache_files(root: Path) -> set[str]:
    """Every file below root, relative; an absent root has none."""
    if not root.is_dir():
        return set()
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _children(pid: int) -> list[int]:
    """Direct children of pid, read from /proc (Linux)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended while we looked
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def descendants(pid: int) -> list[int]:
    todo, seen = [pid], []
    while todo:
        for child in _children(todo.pop()):
            seen.append(child)
            todo.append(child)
    return seen


def process_names(pid: int) -> set[str]:
    """What a process is called: its comm, and the base names of its first two argv entries (a Python console
    script such as neuronx-cc runs as `python3 /path/neuronx-cc ...`)."""
    names: set[str] = set()
    try:
        names.add(Path(f"/proc/{pid}/comm").read_text().strip())
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2]
    except OSError:
        return names
    names.update(os.path.basename(a.decode(errors="replace")) for a in argv if a)
    return names


def compiling(pid: int, compilers: set[str]) -> str | None:
    """The first descendant of pid named like a compiler, as a sentence part, or None."""
    for child in descendants(pid):
        hit = process_names(child) & compilers
        if hit:
            return f"process {child} ({', '.join(sorted(hit))}) runs under vLLM"
    return None


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # vLLM already ended
        os.killpg(proc.pid, sig)


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> int:
    """Signal vLLM's whole process group (its workers and any compiler), wait, then kill."""
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode


def guard(
    argv: list[str], *, watch: Path, port: int, profile: str, compilers: set[str], poll_s: float, timeout_s: float
) -> int:
    baseline = cache_files(watch)
    print(f"startup-guard: {len(baseline)} files in {watch} before vLLM starts; any new one is a compile", flush=True)
    proc = subprocess.Popen(argv, start_new_session=True)
    # Forward only (the main flow waits): a handler that waited would race the wait it interrupts.
    forward = {
        s: signal.signal(s, lambda sig, _frame: _signal_group(proc, sig)) for s in (signal.SIGTERM, signal.SIGINT)
    }
    started = time.monotonic()
    while not healthy(port):
        seen = None
        new = sorted(cache_files(watch) - baseline)
        if new:
            shown = ", ".join(new[:SHOWN]) + (f" and {len(new) - SHOWN} more" if len(new) > SHOWN else "")
            seen = f"vLLM wrote {len(new)} new files to the compile cache {watch} ({shown})"
        seen = seen or compiling(proc.pid, compilers)
        if seen:
            stop(proc)
            print(
                f"FAIL: profile {profile} started to compile instead of loading the published cache: {seen}. "
                "The cache the build published does not hold the graphs this command line needs (another image, "
                "route, flag or SDK). Stopped vLLM so that the node does not compile for hours.\n"
                f"fix: build and publish the cache this profile needs (make build PROFILE={profile}), then restart "
                "the Deployment; python -m model_build plan shows the inputs",
                file=sys.stderr,
                flush=True,
            )
            return EXIT_FAILED
        if proc.poll() is not None:
            print(f"startup-guard: vLLM exited with code {proc.returncode} before serving", file=sys.stderr, flush=True)
            return proc.returncode or EXIT_FAILED
        if time.monotonic() - started > timeout_s:
            stop(proc)
            print(f"FAIL: profile {profile}: vLLM did not serve within {timeout_s:.0f} s", file=sys.stderr, flush=True)
            return EXIT_FAILED
        time.sleep(poll_s)
    print(f"startup-guard: OK: vLLM serves and compiled nothing ({watch} unchanged, no compiler ran)", flush=True)
    code = proc.wait()
    for sig, handler in forward.items():
        signal.signal(sig, handler)
    return 128 - code if code < 0 else code  # killed by a signal: the shell's 128 + N


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if "--" not in args_in:
        print("startup-guard: give vLLM's command line after --", file=sys.stderr)
        return EXIT_USAGE
    split = args_in.index("--")
    parser = argparse.ArgumentParser(prog="startup_guard.py", description=__doc__.split("\n")[0])
    parser.add_argument("--watch", required=True, type=Path, help="the compile cache directory the init step filled")
    parser.add_argument("--port", required=True, type=int, help="vLLM's port (/health on 127.0.0.1)")
    parser.add_argument("--profile", required=True, help="the serving profile, for the sentence")
    parser.add_argument("--compiler-process", action="append", default=[], help="a compiler's process name")
    parser.add_argument("--poll-seconds", type=float, default=5.0)
    parser.add_argument("--timeout-seconds", type=float, default=24 * 3600.0, help="the startup probe ends it first")
    args = parser.parse_args(args_in[:split])
    command = args_in[split + 1 :]
    if not command:
        print("startup-guard: give vLLM's command line after --", file=sys.stderr)
        return EXIT_USAGE
    return guard(
        command,
        watch=args.watch,
        port=args.port,
        profile=args.profile,
        compilers=set(args.compiler_process),
        poll_s=args.poll_seconds,
        timeout_s=args.timeout_seconds,
    )


if __name__ == "__main__":
    sys.exit(main())
