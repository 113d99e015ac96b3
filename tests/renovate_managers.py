"""Renovate's regex custom managers (renovate.json `customManagers`) applied with Python's re: what Renovate extracts
from the repository's files, for the test that every pin is managed (tests/config/test_versions_renovate.py).

Renovate writes JavaScript regexes, named groups `(?<name>...)`, compiled with the g flag only; here they become
Python's `(?P<name>...)`. The three matchStringsStrategy values run as Renovate's
lib/modules/manager/custom/regex/strategies.ts runs them: `any`, one dependency per match of each regex;
`combination`, the groups of every match merged into one dependency; `recursive`, each regex applied inside every
match of the one before, the groups merged on the way down. A field comes from its `<field>Template` when the manager
has one, else from the group of its name (regex/utils.ts createDependency); packageName defaults to depName.
Templates may use `{{name}}` and `{{{name}}}` only: anything else fails here, so the port is extended rather than
guessed. File patterns may be `/regex/` only (Renovate's other form, a glob, fails here the same way).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Renovate's validMatchFields (lib/modules/manager/custom/utils.ts)
FIELDS = (
    "depName",
    "packageName",
    "currentValue",
    "currentDigest",
    "datasource",
    "versioning",
    "extractVersion",
    "registryUrl",
    "depType",
    "indentation",
)


class PortError(Exception):
    """renovate.json uses something this port does not model; extend it."""


@dataclass
class Dependency:
    """One dependency a manager extracted: the fields Renovate fills, the regex groups they came from."""

    file: str
    manager: str
    fields: dict[str, str]
    groups: dict[str, str] = field(default_factory=dict)

    @property
    def package(self) -> str:
        return self.fields.get("packageName") or self.fields.get("depName", "")

    @property
    def datasource(self) -> str:
        return self.fields.get("datasource", "")

    @property
    def value(self) -> str:
        return self.fields.get("currentValue", "")


def python_regex(js: str) -> re.Pattern[str]:
    """A JavaScript regex as Renovate compiles it (flag g only: `^`/`$` anchor the whole text, `.` stops at a
    newline) in Python's syntax."""
    return re.compile(re.sub(r"\(\?<([A-Za-z][A-Za-z0-9]*)>", r"(?P<\1>", js))


def file_pattern(pattern: str) -> re.Pattern[str]:
    """A managerFilePatterns entry of the `/regex/` form, matched against the repository-relative path."""
    match = re.fullmatch(r"/(.*)/([a-z]*)", pattern, flags=re.S)
    if not match:
        raise PortError(f"managerFilePatterns entry {pattern!r} is a glob; this port reads only the /regex/ form")
    return re.compile(match[1], re.I if "i" in match[2] else 0)


def render(template: str, groups: Mapping[str, str]) -> str:
    """A Handlebars template that only substitutes groups ({{name}} or {{{name}}}; a missing group is empty)."""
    rendered = re.sub(r"\{\{\{?\s*([A-Za-z][A-Za-z0-9]*)\s*\}?\}\}", lambda m: groups.get(m[1], ""), template)
    if "{{" in rendered:
        raise PortError(f"template {template!r} uses more than {{{{{{name}}}}}} substitution; extend the port")
    return rendered


def _dependency(manager: Mapping[str, Any], groups: Mapping[str, str], file: str) -> Dependency | None:
    fields: dict[str, str] = {}
    for name in FIELDS:
        template = manager.get(f"{name}Template")
        if template is not None:
            fields[name] = render(template, groups)
        elif groups.get(name):
            fields[name] = groups[name]
    if not fields.get("packageName") and fields.get("depName"):
        fields["packageName"] = fields["depName"]
    valid = fields.get("packageName") and (fields.get("currentValue") or fields.get("currentDigest"))
    if not (valid and fields.get("datasource")):
        return None  # Renovate discards it too (isValidDependency)
    return Dependency(file=file, manager=manager.get("description", "?"), fields=fields, groups=dict(groups))


def _groups(match: re.Match[str]) -> dict[str, str]:
    return {k: v for k, v in match.groupdict().items() if v is not None}


def extract(manager: Mapping[str, Any], file: str, text: str) -> list[Dependency]:
    """What one regex custom manager extracts from one file's text."""
    if manager.get("customType") != "regex":
        raise PortError(f"customType {manager.get('customType')!r}: only regex managers are ported")
    regexes = [python_regex(s) for s in manager["matchStrings"]]
    strategy = manager.get("matchStringsStrategy", "any")
    found: list[Dependency | None] = []
    if strategy == "any":
        found = [_dependency(manager, _groups(m), file) for r in regexes for m in r.finditer(text)]
    elif strategy == "combination":
        merged: dict[str, str] = {}
        matches = [m for r in regexes for m in r.finditer(text)]
        for m in matches:
            merged |= _groups(m)
        found = [_dependency(manager, merged, file)] if matches else []
    elif strategy == "recursive":

        def descend(content: str, level: int, groups: dict[str, str]) -> None:
            if level == len(regexes):
                found.append(_dependency(manager, groups, file))
                return
            for m in regexes[level].finditer(content):
                descend(m[0], level + 1, groups | _groups(m))

        descend(text, 0, {})
    else:
        raise PortError(f"matchStringsStrategy {strategy!r} is not one of Renovate's any/combination/recursive")
    return [d for d in found if d is not None]


def repository_files(root: Path) -> list[str]:
    """The files Renovate would see: tracked, or new and not ignored (a fresh clone has exactly the tracked ones)."""
    done = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return sorted({p for p in done.stdout.split("\0") if p and (root / p).is_file()})


def extract_all(config: Mapping[str, Any], files: Iterable[str], read: Any) -> list[Dependency]:
    """Every dependency every custom manager of `config` extracts from `files` (`read(path) -> text`)."""
    deps: list[Dependency] = []
    for manager in config.get("customManagers", []):
        patterns = [file_pattern(p) for p in manager["managerFilePatterns"]]
        for path in files:
            if any(p.search(path) for p in patterns):
                deps += extract(manager, path, read(path))
    return deps
