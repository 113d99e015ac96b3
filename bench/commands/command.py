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
    and what it refuses before anything runs (a sentence, or None)."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    execute: Callable[[argparse.Namespace], int]
    problem: Callable[[argparse.Namespace], str | None] = _no_problem


def execute_and_report(command: Command, args: argparse.Namespace) -> int:
    """Runs `command` on parsed `args`: a problem with the flags, an unreadable results file or config are one
    `error:` line and EXIT_USAGE, before or instead of the work; a CommandError a command raises is its sentence and
    its code (EXIT_USAGE unless it says otherwise)."""
    try:
        if problem := command.problem(args):
            raise CommandError(problem)
        return command.execute(args)
    except (ResultsError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except CommandError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.code


T = TypeVar("T")


def run_to_file(work: Coroutine[Any, Any, T], out: Path, *, writes: str, finished: str) -> T | int:
    """Runs a run or a sweep that saves to `out` as it goes; a failure or Ctrl-C is a sentence and its exit code,
    the same for every command that measures (what finished stays in `out`, for --resume)."""
    try:
        return asyncio.run(work)
    except (ConnectionError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as err:
        print(f"error: cannot write {writes} to {str(out)!r} ({err.strerror}); choose another --out", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"\ninterrupted: every finished {finished} is in {out}; add --resume to continue", file=sys.stderr)
        return EXIT_INTERRUPTED
