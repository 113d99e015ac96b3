"""The shape every `python -m bench` command has, and the one wrapper that runs it: the checks that take two flags
together, then the work, with the errors a person can fix (a bad results file, a bad config) as one sentence and
exit code 2 rather than a traceback; and, for the commands that measure, the same for a failure or Ctrl-C midway."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from bench.results import ResultsError
from config import ConfigError
from config.exit_codes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, CommandError


def _no_problem(args: argparse.Namespace) -> str | None:
    return None


@dataclass(frozen=True)
class Command:
    """One subcommand: its name and help line, the arguments it adds to its parser, what it runs (an exit code),
    and what it refuses before anything runs (a sentence, or None): every refusal the flags alone decide lives in
    `problem`, not in `execute`, so `bench.__main__.parse_args` (which ops.run_benchmark runs on BENCH_ARGS before
    it applies a Job) and `execute_and_report` (what runs in the pod) refuse the same flags."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    execute: Callable[[argparse.Namespace], int]
    problem: Callable[[argparse.Namespace], str | None] = _no_problem


class Interrupted(Exception):
    """Ctrl-C while a command measured: said without `error:`, exit EXIT_INTERRUPTED (what finished is kept)."""


def execute_and_report(command: Command, args: argparse.Namespace) -> int:
    """Runs `command` on parsed `args`: a problem with the flags, an unreadable results file or config are one
    `error:` line and EXIT_USAGE, before or instead of the work; a CommandError a command raises is its sentence and
    its code (EXIT_USAGE unless it says otherwise); Ctrl-C while measuring says where the finished work is."""
    try:
        if problem := command.problem(args):
            raise CommandError(problem)
        return command.execute(args)
    except (ResultsError, ConfigError) as err:
        return _said(f"error: {err}", EXIT_USAGE)
    except CommandError as err:
        return _said(f"error: {err}", err.code)
    except Interrupted as err:
        return _said(f"\ninterrupted: {err}", EXIT_INTERRUPTED)


def _said(sentence: str, code: int) -> int:
    print(sentence, file=sys.stderr)
    return code


T = TypeVar("T")


def run_to_file(work: Coroutine[Any, Any, T], out: Path, *, writes: str, finished: str) -> T:
    """Runs a run or a sweep that saves to `out` as it goes; a failure is a CommandError (exit 1) and Ctrl-C an
    Interrupted, the same for every command that measures (what finished stays in `out`, for --resume)."""
    try:
        return asyncio.run(work)
    except (ConnectionError, ValueError) as err:
        raise CommandError(str(err), EXIT_FAILED) from None
    except OSError as err:
        why = f"cannot write {writes} to {str(out)!r} ({err.strerror}); choose another --out"
        raise CommandError(why, EXIT_FAILED) from None
    except KeyboardInterrupt:
        raise Interrupted(f"every finished {finished} is in {out}; add --resume to continue") from None
