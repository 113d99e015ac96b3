"""model_build's name for the one error base of every command (config.exit_codes.CommandError), and the command
that builds a profile."""

from __future__ import annotations

from config.exit_codes import CommandError

BuildError = CommandError  # one class: a sentence saying what is wrong, where, and what to do; `code` is the exit code


def build_command(profile: str) -> str:
    """The one command that compiles and publishes a profile's artifact in the cluster."""
    return f"make build PROFILE={profile}"
