"""The ServingStack contract, checked by mypy: every stack module has every member with its type (strict), and the
config's ServingProfile is a ProfileView where the stacks are called. A module that drifts from the contract fails
here, not at synth or on a node."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

# Where code outside serving_stacks/ hands a ServingProfile to a stack (mypy checks the call against ProfileView).
CALLERS = [
    "charts/vllm_args.py",
    "model_build/digest.py",
    "model_build/artifact_plan.py",
    "model_build/artifact.py",
    "config/profiles.py",
    "config/rules.py",
]


def mypy(cache: str, *args: str) -> subprocess.CompletedProcess[str]:
    """mypy with its incremental cache kept across runs (.mypy_cache/ is gitignored): mypy re-checks what changed,
    keyed by each file's content and the options, so a warm run is as strict as a cold one. One cache per
    invocation: the two calls differ in options, and a shared cache would be rebuilt by each in turn."""
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache" / cache), "--no-error-summary", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_stack_module_implements_the_contract_under_strict_mypy():
    result = mypy("tests-contract", "--strict", "serving_stacks/")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_config_profile_is_what_stacks_read():
    """And what config/scaling.py reads of it, typed there as the ServingProfile itself."""
    result = mypy("tests-profile-view", "--follow-imports=silent", *CALLERS, "config/scaling.py")
    assert result.returncode == 0, result.stdout + result.stderr
