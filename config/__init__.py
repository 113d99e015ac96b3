"""Typed deployment config: the one source of truth (see config/schema.py)."""

from config.loader import DEFAULT_CONFIG, load_config, parse_config
from config.schema import ConfigError, DeploymentConfig, ServingProfile

__all__ = ["DEFAULT_CONFIG", "ConfigError", "DeploymentConfig", "ServingProfile", "load_config", "parse_config"]
