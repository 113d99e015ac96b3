"""Typed deployment config: the one source of truth (see config/schema.py).

The exports load on first use, so importing a leaf module (config.bucket_layout) loads nothing else: serving's
init check ships this file and that leaf alone and runs them with the standard library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from config.loader import DEFAULT_CONFIG, load_config, parse_config
    from config.profiles import ServingProfile
    from config.schema import ConfigError, DeploymentConfig

_EXPORTS = {
    "DEFAULT_CONFIG": "config.loader",
    "load_config": "config.loader",
    "parse_config": "config.loader",
    "ConfigError": "config.schema",
    "DeploymentConfig": "config.schema",
    "ServingProfile": "config.profiles",
}
__all__ = ["DEFAULT_CONFIG", "ConfigError", "DeploymentConfig", "ServingProfile", "load_config", "parse_config"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'config' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
