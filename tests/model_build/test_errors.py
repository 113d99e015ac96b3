"""BuildError is model_build's own name for the one command error (config.exit_codes.CommandError): every other
package raises and catches the shared class under its shared name, so ops/ does not lean on model_build for it."""

from __future__ import annotations

import ast
from pathlib import Path

from config.exit_codes import CommandError
from model_build.errors import BuildError
from tests.test_layers import OURS, modules

ROOT = Path(__file__).resolve().parents[2]
OWNERS = (ROOT / "model_build", ROOT / "tests" / "model_build")


def names_build_error(path: Path) -> bool:
    """Whether the module imports BuildError from model_build.errors (directly or as the module's attribute)."""
    return any(
        (
            isinstance(node, ast.ImportFrom)
            and node.module == "model_build.errors"
            and any(alias.name == "BuildError" for alias in node.names)
        )
        or (isinstance(node, ast.Attribute) and node.attr == "BuildError")
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
    )


def ours() -> list[Path]:
    """Every Python file of ours (the layering test's packages, and the tests), but model_build's."""
    files = modules(*OURS)
    return [p for p in files if not any(p.is_relative_to(owner) for owner in OWNERS)]


def test_build_error_is_the_shared_command_error():
    assert BuildError is CommandError


def test_only_model_build_names_its_build_error():
    found = sorted(str(p.relative_to(ROOT)) for p in ours() if names_build_error(p))
    assert not found, (
        f"{found} import model_build's BuildError; outside model_build/ raise and catch "
        "config.exit_codes.CommandError, the one error of every command"
    )
