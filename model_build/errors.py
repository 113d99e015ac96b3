"""One exception type for every failure the person at the keyboard must act on, with its exit code."""

from __future__ import annotations

from config.exit_codes import EXIT_USAGE


class BuildError(Exception):
    """A sentence saying what is wrong, where, and what to do; `code` becomes the exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def build_command(profile: str) -> str:
    """The one command that compiles and publishes a profile's artifact in the cluster."""
    return f"make build PROFILE={profile}"
