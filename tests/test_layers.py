"""The layering the code relies on: rendering (charts, stacks) runs nothing and calls no AWS API, and no
layer below ops/ reaches up into the deploy-time drivers. Imports are read from the source (also the lazy
ones inside functions), so a module that only imports boto3 on some path is caught too."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RENDERING = ("charts", "stacks")
BELOW_OPS = ("config", "serving_stacks", "charts", "stacks", "model_build", "bench")
RUNS_OR_CALLS_AWS = {"subprocess", "boto3", "botocore"}


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def modules(*packages: str) -> list[Path]:
    return sorted(p for pkg in packages for p in (ROOT / pkg).rglob("*.py"))


@pytest.mark.parametrize("path", modules(*RENDERING), ids=lambda p: str(p.relative_to(ROOT)))
def test_rendering_modules_run_no_process_and_call_no_aws(path):
    found = imported_roots(path) & RUNS_OR_CALLS_AWS
    assert not found, f"{path.relative_to(ROOT)} imports {sorted(found)}; move what runs at deploy time to ops/"


@pytest.mark.parametrize("path", modules(*RENDERING), ids=lambda p: str(p.relative_to(ROOT)))
def test_rendering_modules_import_nothing_from_the_benchmark(path):
    assert "bench" not in imported_roots(path), (
        f"{path.relative_to(ROOT)} imports bench/; read the names it needs from a leaf module in config/ "
        "(config/metrics.py, config/prompt_suite.py)"
    )


@pytest.mark.parametrize("path", modules(*BELOW_OPS), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_layer_below_ops_imports_ops(path):
    assert "ops" not in imported_roots(path), f"{path.relative_to(ROOT)} imports ops/, the layer above it"


LEAVES = (
    "api_key",
    "bucket_layout",
    "cost",
    "exit_codes",
    "kubernetes",
    "metrics",
    "prompt_suite",
    "speculation",
    "tags",
)
OURS = {"app", "bench", "charts", "config", "model_build", "ops", "serving_stacks", "stacks"}


@pytest.mark.parametrize("leaf", LEAVES)
def test_leaf_vocabulary_modules_import_nothing_of_ours(leaf):
    found = imported_roots(ROOT / "config" / f"{leaf}.py") & OURS
    assert not found, f"config/{leaf}.py imports {sorted(found)}; every layer reads it, so it must stand alone"


@pytest.mark.parametrize("path", modules("serving_stacks"), ids=lambda p: str(p.relative_to(ROOT)))
def test_serving_stack_modules_import_nothing_of_ours_outside_their_package(path):
    found = imported_roots(path) & (OURS - {"serving_stacks"})
    assert not found, (
        f"{path.relative_to(ROOT)} imports {sorted(found)}; the config schema reads it, so it stands alone"
    )


def test_importing_the_stacks_loads_no_benchmark_runtime_and_no_aws_sdk():
    """Synth reads only names the benchmark also uses (metric names and test cases live in config/); aiohttp,
    boto3 and bench/ would cost synth time and tie rendering to runtime code. A fresh interpreter, since tests
    import both."""
    probe = "import sys, stacks; print(' '.join(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'boto3', 'bench')))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
