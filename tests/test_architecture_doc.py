"""docs/architecture.md's package table and newcomer's tour say what the code is: the table's rows are the layering
allow-list's packages (tests/test_layers.py) with the same edges, and every top-level folder is in the tour."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_layers import ALLOWED_EDGES

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text()
NOT_PACKAGES = {"tools"}  # repository tooling: listed in the allow-list (imports nothing of ours), not in the table
NOT_CODE = {"docs", "tests", "dist", "cdk.out", "node_modules"}  # documentation, tests and generated output


def section(title: str) -> str:
    return DOC.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def table_edges() -> dict[str, set[str]]:
    """{package: the packages its 'may import' column names}, from the table's rows."""
    rows = [line for line in section("Packages and what they may import").splitlines() if line.startswith("| `")]
    out: dict[str, set[str]] = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        name = cells[0].strip("`").removesuffix("/").removesuffix(".py")
        edges = re.sub(r"\([^)]*\)", "", cells[-1])  # "(its leaf `bucket_layout` only)" remarks on an edge
        out[name] = set(re.findall(r"`([a-z_]+)`", edges))
    return out


def test_the_package_table_lists_the_allow_lists_packages_with_their_edges() -> None:
    expected = {pkg: edges for pkg, edges in ALLOWED_EDGES.items() if pkg not in NOT_PACKAGES}
    assert table_edges() == expected


def test_the_newcomers_tour_names_every_top_level_folder() -> None:
    bullets = [line for line in section("A newcomer's tour").splitlines() if line.startswith("- `")]
    named = {name for line in bullets for name in re.findall(r"`([a-z_]+)/`:", line)}  # "`bench/`: its one job"
    folders = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")} - NOT_CODE
    folders = {name for name in folders if any((ROOT / name).glob("*.py"))}  # code folders only
    missing = sorted(folders - named)
    assert not missing, f"docs/architecture.md's tour does not name {missing}"
