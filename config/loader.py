"""Load and validate the deployment config; turn pydantic's errors into sentences."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from config.schema import ConfigError, DeploymentConfig

DEFAULT_CONFIG = Path(__file__).with_name("default.yaml")


def load_config(path: str | Path | None = None) -> DeploymentConfig:
    """Read a YAML config file (default: config/default.yaml) and validate it."""
    file = Path(path) if path else DEFAULT_CONFIG
    try:
        text = file.read_text()
    except OSError as err:
        raise ConfigError(
            [f"config file {str(file)!r} cannot be read ({err.strerror}); pass -c config=<path>"]
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError([f"config file {str(file)!r} is not valid YAML: {err}"]) from None
    if not isinstance(data, dict):
        raise ConfigError([f"config file {str(file)!r} must hold a mapping at the top level"])
    return parse_config(data)


def parse_config(data: Any) -> DeploymentConfig:
    """Validate a config mapping; every failure becomes one ConfigError naming field, value and fix."""
    try:
        return DeploymentConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError([line for e in err.errors() for line in _sentences(e)]) from None


def _sentences(error: Any) -> list[str]:
    """The cross-field validator reports several problems at once, one per line; others are one sentence."""
    if error["type"] == "value_error" and not _loc(error):
        return error["msg"].removeprefix("Value error, ").split("\n")
    return [_sentence(error)]


def _loc(error: Any) -> str:
    parts = [p for p in error["loc"] if not (isinstance(p, str) and p in _UNION_TAGS)]
    return ".".join(str(p) if str(p).isprintable() and "." not in str(p) else repr(p) for p in parts)


def _sentence(error: Any) -> str:
    loc = _loc(error)
    msg: str = error["msg"].removeprefix("Value error, ")
    kind = error["type"]
    value = error.get("input")
    shown = _short(value)
    if kind == "missing":
        return f"{loc} is missing; add it (see config/default.yaml for an example)"
    if kind == "extra_forbidden":
        return f"{loc} is not a known field (value {shown}); remove it or fix its spelling"
    if kind == "string_pattern_mismatch":
        pattern = error.get("ctx", {}).get("pattern", "")
        return f"{loc}={shown} is malformed; it must match {pattern}"
    if kind == "union_tag_invalid":
        tag = _short(value.get("method")) if isinstance(value, dict) else shown
        return f"{loc}.method={tag} is unknown; use one of none, fused-draft, eagle"
    if kind == "union_tag_not_found":
        return f"{loc}.method is missing; use one of none, fused-draft, eagle"
    if kind == "value_error":
        return f"{loc}: {msg}"
    return f"{loc}={shown}: {msg}; fix the value (see config/default.yaml)"


_UNION_TAGS = {"none", "fused-draft", "eagle", "NoSpeculation", "DraftSpeculation"}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
