"""Loading config files: unreadable or malformed files fail with a sentence naming the file."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from config import ConfigError, load_config
from tests.conftest import ROOT


def test_missing_file_names_the_path_and_the_fix(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "nope.yaml")
    assert "nope.yaml" in str(err.value) and "-c config=" in str(err.value)


def test_malformed_yaml_is_reported_as_yaml(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_top_level_must_be_a_mapping(tmp_path):
    bad = tmp_path / "list.yaml"
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping at the top level"):
        load_config(bad)


def _run_app(*context: str) -> subprocess.CompletedProcess[str]:
    """Run app.py as the CDK CLI does: `-c key=value` arrives through CDK_CONTEXT_JSON."""
    env = {
        "CDK_CONTEXT_JSON": json.dumps(dict(c.split("=", 1) for c in context)),
        "PATH": os.environ["PATH"],  # the user's Node.js
    }
    return subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_app_rejects_a_bad_config_file_before_creating_any_construct(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        (ROOT / "config/default.yaml").read_text().replace("num_speculative_tokens: 7", "num_speculative_tokens: 42")
    )
    result = _run_app(f"config={bad}")
    assert result.returncode == 2
    assert "num_speculative_tokens=42 is outside 1..15" in result.stderr
    assert "Traceback" not in result.stderr


def test_app_refuses_to_deploy_with_the_placeholder_admin():
    result = _run_app("deploy=true")
    assert result.returncode == 2
    assert "admin_principal_arn" in result.stderr and "placeholder" in result.stderr
    assert "Traceback" not in result.stderr
