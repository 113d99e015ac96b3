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
RUNS_OR_CALLS_AWS = {"subprocess", "boto3", "botocore"}

# Which top-level packages each may import: the layering, from the top (the CDK app, the deploy-time drivers) to
# the ground floor (serving_stacks, which imports nothing of ours). An edge not listed here fails
# test_imports_follow_the_allowed_edges; add one only if it points down (test_the_allowed_edges_have_no_cycle).
ALLOWED_EDGES: dict[str, set[str]] = {
    "app": {"stacks", "charts", "config"},
    "ops": {"charts", "model_build", "bench", "cloud", "serving_stacks", "config"},
    "stacks": {"charts", "model_build", "serving_stacks", "config"},
    "charts": {"model_build", "serving_stacks", "config"},
    "bench": {"cloud", "config"},
    "model_build": {"cloud", "serving_pod", "serving_stacks", "config"},
    "cloud": {"config"},
    "serving_pod": {"config"},  # its leaf bucket_layout only: tests/serving_pod/test_check_mounted.py
    "config": {"serving_stacks"},
    "serving_stacks": set(),
    "tools": set(),
    # scripts that measure our own code (not a package: nothing imports them); they drive the tests' harnesses
    "perf": {"bench", "charts", "model_build", "config", "tests"},
}
# The tests are ours too, but only perf/ may import them: no product package leans on test equipment.
OURS = set(ALLOWED_EDGES) | {"tests"}


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def modules(*packages: str) -> list[Path]:
    return sorted(p for pkg in packages for p in ([ROOT / "app.py"] if pkg == "app" else (ROOT / pkg).rglob("*.py")))


def package_of(path: Path) -> str:
    return path.relative_to(ROOT).parts[0].removesuffix(".py")


def unlisted_edges(path: Path) -> set[str]:
    pkg = package_of(path)
    return (imported_roots(path) & OURS) - {pkg} - ALLOWED_EDGES[pkg]


@pytest.mark.parametrize("path", modules(*ALLOWED_EDGES), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_allowed_edges(path):
    found = unlisted_edges(path)
    assert not found, (
        f"{path.relative_to(ROOT)} imports {sorted(found)}, an edge {package_of(path)} -> {sorted(found)} that "
        f"tests/test_layers.py ALLOWED_EDGES does not list ({package_of(path)} may import "
        f"{sorted(ALLOWED_EDGES[package_of(path)]) or 'nothing of ours'}); move the name it needs down, into a "
        "leaf module of config/, or into the package that owns it"
    )


def test_an_upward_import_is_an_unlisted_edge(tmp_path, monkeypatch):
    """The check itself: serving_stacks importing the config (a layer above it) is caught."""
    fake_root = tmp_path
    (fake_root / "serving_stacks").mkdir()
    module = fake_root / "serving_stacks" / "upward.py"
    module.write_text("from config.profiles import ServingProfile\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", fake_root)
    assert unlisted_edges(module) == {"config"}


def test_the_allowed_edges_have_no_cycle():
    """Layers: following allowed edges never leads back, so each edge points down."""

    def reaches(start: str, goal: str, seen: frozenset[str] = frozenset()) -> bool:
        edges = ALLOWED_EDGES.get(start, set())  # the tests have no row: what they import is not layered
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in edges)

    cycles = [pkg for pkg in ALLOWED_EDGES if reaches(pkg, pkg)]
    assert not cycles, f"ALLOWED_EDGES lets {cycles} import themselves through other packages; remove the upward edge"


def test_every_top_level_folder_of_python_has_its_edges_listed():
    """A package or a folder of scripts (perf/ has no __init__.py and was once outside this test)."""
    folders = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".") and any(p.glob("*.py"))}
    listed = set(ALLOWED_EDGES)
    found = folders - {"tests"} | {"app"}
    assert found == listed, f"list {sorted(found ^ listed)} in ALLOWED_EDGES (tests/test_layers.py)"


@pytest.mark.parametrize("path", modules(*RENDERING), ids=lambda p: str(p.relative_to(ROOT)))
def test_rendering_modules_run_no_process_and_call_no_aws(path):
    found = imported_roots(path) & RUNS_OR_CALLS_AWS
    assert not found, f"{path.relative_to(ROOT)} imports {sorted(found)}; move what runs at deploy time to ops/"


LEAVES = (
    "api_key",
    "bounded_file",
    "bucket_layout",
    "catalogue",
    "cost",
    "cron",
    "crossover",
    "endpoint",
    "exit_codes",
    "kubernetes",
    "labels",
    "metrics",
    "node_scaling",
    "ports",
    "prompt_kind",
    "prompt_suite",
    "pydantic_errors",
    "speculation",
    "tags",
    "versions",
)


# The one kind of import a leaf may make: a name another leaf owns (the prompt kinds, which test cases are labelled
# with and crossover.json's entries are per). Each such edge is listed here and points at a leaf that itself imports
# nothing of ours, so the leaves stay at the bottom.
LEAF_EDGES: dict[str, set[str]] = {"crossover": {"prompt_kind"}, "prompt_suite": {"prompt_kind"}}


def imported_modules(path: Path) -> set[str]:
    """The modules of ours a file imports, by name: `from config import x` counts config.x."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in OURS:
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return {name for name in found if name.split(".")[0] in OURS}


@pytest.mark.parametrize("leaf", LEAVES)
def test_leaf_vocabulary_modules_import_nothing_of_ours_but_a_listed_leaf(leaf):
    allowed = {f"config.{other}" for other in LEAF_EDGES.get(leaf, set())}
    found = imported_modules(ROOT / "config" / f"{leaf}.py") - allowed
    assert not found, f"config/{leaf}.py imports {sorted(found)}; every layer reads it, so it must stand alone"


@pytest.mark.parametrize("leaf", sorted(set().union(*LEAF_EDGES.values())))
def test_a_leaf_another_leaf_imports_is_a_leaf_that_imports_nothing_of_ours(leaf):
    assert leaf in LEAVES, f"config/{leaf}.py is in LEAF_EDGES but not in LEAVES"
    found = imported_modules(ROOT / "config" / f"{leaf}.py")
    assert not found, f"config/{leaf}.py imports {sorted(found)}; a leaf that other leaves read must stand alone"


def test_importing_the_stacks_loads_no_benchmark_runtime_and_no_aws_sdk():
    """Synth reads only names the benchmark also uses (metric names and test cases live in config/); aiohttp,
    boto3, bench/, cloud/ and the checkpoint uploader would cost synth time and tie rendering to runtime code. A fresh
    interpreter, since tests import them all."""
    probe = (
        "import sys, stacks; print(' '.join(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'boto3', 'bench', 'cloud') "
        "or m in ('model_build.checkpoints', 'model_build.uploader', 'model_build.store')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_blocks(tree: ast.AST) -> set[int]:
    """ids of the nodes under `if TYPE_CHECKING:`: imports there never run, so they make no circle."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skipped


def runtime_imports(path: Path, ours: set[str]) -> set[str]:
    """The modules of ours a module imports when it runs, at the top or inside a function (a lazy import closes a
    circle as surely): `from pkg import name` counts pkg.name where that is a module, else pkg."""
    tree = ast.parse(path.read_text(), str(path))
    skipped = _type_checking_blocks(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in ours}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & ours
            found |= submodules or ({node.module} & ours)
    return found


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each module that imports itself through others, with one such path."""
    circles: list[list[str]] = []
    for start in sorted(graph):
        paths, seen = [[start]], {start}
        while paths:
            path = paths.pop()
            for nxt in sorted(graph[path[-1]]):
                if nxt == start:
                    circles.append([*path, start])
                    break
                if nxt not in seen:
                    seen.add(nxt)
                    paths.append([*path, nxt])
            else:
                continue
            break
    return circles


def test_no_module_imports_itself_through_others():
    """No circle in the house (issue 27: config/schema.py <-> config/rules.py was one): each module's own
    imports, lazy ones included, never lead back to it, so every module can be read after the ones it imports."""
    paths = modules(*ALLOWED_EDGES)
    names = {_module_name(p, ROOT): p for p in paths}
    graph = {name: runtime_imports(path, set(names)) - {name} for name, path in names.items()}
    circles = import_circles(graph)
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def test_a_lazy_import_back_is_a_circle(tmp_path):
    """The check itself, on the shape the config had: the schema imports the rules at the top, the rules import the
    schema inside a function; an import under TYPE_CHECKING is no circle."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "schema.py").write_text("from pkg.rules import problems\n")
    (tmp_path / "pkg" / "rules.py").write_text("def problems():\n    from pkg.schema import Model\n")
    (tmp_path / "pkg" / "plan.py").write_text("from pkg.build import run\n")
    (tmp_path / "pkg" / "build.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.plan import Plan\n"
    )
    names = {_module_name(p, tmp_path): p for p in (tmp_path / "pkg").glob("*.py")}
    graph = {name: runtime_imports(path, set(names)) for name, path in names.items()}
    assert import_circles(graph) == [
        ["pkg.rules", "pkg.schema", "pkg.rules"],
        ["pkg.schema", "pkg.rules", "pkg.schema"],
    ]
