"""Exit codes of every command this project ships (make targets, `python -m model_build`, `python -m ops.*`,
`python -m bench`, the serving init check), so a script or a pod's status reads the same way everywhere.

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1  # the work ran and failed, or the artifact disagrees with the profile: read the message, rebuild
EXIT_USAGE = 2  # bad arguments, config, missing tools, credentials or bucket: fix the environment
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it): re-run the same command to resume


class CommandError(Exception):
    """The one error base of every command: a sentence saying what is wrong, where, and what to do; `code` becomes
    the exit code. model_build calls it BuildError (model_build/errors.py)."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code
