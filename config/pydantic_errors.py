"""How a pydantic validation error becomes a sentence for the person at the keyboard: where (the field's path),
the value, pydantic's message, and a fix chosen by the error's type. The config loader, the prompt-suite files
and the results files of bench all phrase their errors through it.

Leaf module: imports nothing of ours (and nothing of pydantic: it reads the error dicts `ValidationError.errors()`
returns).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any


def location(error: Mapping[str, Any], *, skip: Collection[str] = ()) -> str:
    """The field's path, like profiles[1].decoding.draft; `skip` drops parts such as a tagged union's tag."""
    path = ""
    for part in error["loc"]:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part not in skip:
            text = str(part) if str(part).isprintable() and "." not in str(part) else repr(part)
            path += f".{text}" if path else text
    return path


def message(error: Mapping[str, Any]) -> str:
    """pydantic's message without the "Value error, " it puts before a validator's own sentence."""
    return str(error["msg"]).removeprefix("Value error, ")


def sentence(
    error: Mapping[str, Any],
    *,
    fixes: Mapping[str, str],
    default: str,
    where: str = "top level",
    skip: Collection[str] = (),
    show: Callable[[Any], str] = repr,
) -> str:
    """The template for the error's type (else `default`), filled with {loc}, {value}, {msg} and the error's
    context (e.g. {pattern}); `show` renders the value, `where` stands in for an empty path."""
    fields = {key: str(value) for key, value in (error.get("ctx") or {}).items()}
    fields |= {"loc": location(error, skip=skip) or where, "value": show(error.get("input")), "msg": message(error)}
    return fixes.get(error["type"], default).format_map(fields)
