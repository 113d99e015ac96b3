"""The endpoint's Envoy configuration is plain data: built from the config alone, apart from the objects that deploy it.

Envoy's own validation of the rendered bootstrap and its behaviour on loopback are in test_endpoint.py and
test_endpoint_router.py; this checks the split issue 27 asked for (item 4): the generator reads no files and makes
no Kubernetes objects, so the tests and `perf/` run it without cdk8s.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONSTRUCT_LIBRARIES = {"cdk8s", "cdk8s_plus_34", "constructs", "aws_cdk"}
FILE_READS = {"open", "read_text", "read_bytes", "read_crossover_file", "load_config"}


def module_tree() -> ast.Module:
    return ast.parse((ROOT / "charts" / "envoy_bootstrap.py").read_text())


def test_the_bootstrap_generator_imports_no_construct_library() -> None:
    imported: set[str] = set()
    for node in ast.walk(module_tree()):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & CONSTRUCT_LIBRARIES, sorted(imported & CONSTRUCT_LIBRARIES)


def test_the_bootstrap_generator_reads_no_files() -> None:
    calls = {
        node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        for node in ast.walk(module_tree())
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)
    }
    assert not calls & FILE_READS, sorted(calls & FILE_READS)
