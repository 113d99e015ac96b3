"""docs/architecture.md's package table, newcomer's tour and data-flow diagram say what the code is: the table's rows
are the layering allow-list's packages (tests/test_layers.py) with the same edges, every top-level folder is in the
tour, and the diagram names every stack, every construct each stack holds, and commands and prefixes that exist."""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from pathlib import Path

from config import bucket_layout
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


# The data-flow diagram names each stack's parts in words; each construct a stack holds at its top level is one of
# those words (a new construct fails until the diagram names it), and each word is a construct the app creates.
# {stack: {word in the diagram: patterns (fnmatch) of construct ids at the stack's top level}}; the first match counts
DIAGRAM_WORDS: dict[str, dict[str, tuple[str, ...]]] = {
    "Models": {"bucket": ("Models",)},
    "Cluster": {
        "VPC": ("Vpc", "Network"),
        "EKS": ("Cluster", "EksCluster"),
        "node groups": ("SystemNodes", "Trn2Nodes"),
        "add-ons": ("Addons",),
        "Neuron DRA": ("NeuronDra",),
        "Cluster Autoscaler": ("ClusterAutoscaler",),
        "KEDA": ("Keda",),
        "managed Prometheus + scraper": ("Metrics",),
        "Grafana": ("Grafana",),
    },
    "Workloads": {
        "stage Job": ("checkpoints-stage-identity",),
        "cdk8s charts": ("k8s-base", "k8s-shared-code"),
        "Pod Identity roles": ("*-identity",),
        "build Job": ("k8s-model-build*",),
        "vLLM Deployments": ("k8s-service-*",),
        "endpoint": ("k8s-endpoint",),
        "ScaledObjects": ("k8s-autoscaling",),
        "bench Job": ("k8s-bench*",),
    },
    "Observability": {
        "CloudWatch dashboard": ("Benchmark",),
        "alarms": ("Alarms",),
        "the workspace's alert rules": ("AlertRules",),
    },
}
# What CDK adds to every stack, and the Workloads stack's reference to the bucket (it creates nothing)
NOT_PARTS = ("BootstrapVersion", "CheckBootstrapVersion", "Exports", "KubectlLayer", "Custom::*", "BucketName")
NOT_PARTS_OF = {"Workloads": ("ModelsBucket",)}


def diagram() -> str:
    return section("Data flow").split("```", 2)[1]


def stack_parts_in_diagram() -> dict[str, str]:
    """{stack: the words after its name}: 'Models (bucket)' -> {'Models': 'bucket'}, from the stacks line."""
    stacks_text = diagram().split("-> stacks:", 1)[1].split("-> charts:", 1)[0]
    return {name: " ".join(words.split()) for name, words in re.findall(r"(\w+) \(([^)]*)\)", stacks_text)}


def _word_of(stack: str, construct_id: str) -> str | None:
    """The first word whose patterns (fnmatch) match the construct id."""
    return next(
        (w for w, pats in DIAGRAM_WORDS[stack].items() if any(fnmatchcase(construct_id, p) for p in pats)), None
    )


def test_the_data_flow_diagram_names_the_stacks_the_app_creates(default_config) -> None:
    expected = {name.split("-")[-1] for name in default_config.stack_names.values()}
    assert set(stack_parts_in_diagram()) == expected


def test_every_construct_of_a_stack_is_a_word_of_its_diagram_line(synth) -> None:
    tree = json.loads((synth.outdir / "tree.json").read_text())["tree"]["children"]
    described = stack_parts_in_diagram()
    charts_text = " ".join(diagram().split("-> charts:", 1)[1].split("-> metrics:", 1)[0].split())
    problems = []
    for stack_name, node in tree.items():
        if stack_name == "Tree":
            continue
        stack = stack_name.split("-")[-1]
        for construct_id in node.get("children", {}):
            if any(fnmatchcase(construct_id, p) for p in NOT_PARTS) or construct_id in NOT_PARTS_OF.get(stack, ()):
                continue
            word = _word_of(stack, construct_id)
            if word is None:
                problems.append(f"{stack_name}/{construct_id} is no word of the diagram: name it there and here")
    for stack, words in DIAGRAM_WORDS.items():
        text = described[stack] + (" " + charts_text if stack == "Workloads" else "")
        problems += [f"the diagram's {stack} line lacks {w!r}" for w in words if w not in text]
        present = [c for node in tree.values() for c in node.get("children", {})]
        problems += [
            f"{stack}: {w!r} stands for {prefixes}, which the app does not create"
            for w, prefixes in words.items()
            if not any(_word_of(stack, c) == w for c in present)
        ]
    assert not problems, "\n".join(problems)


def test_the_diagrams_commands_and_prefixes_exist() -> None:
    text = diagram()
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", (ROOT / "Makefile").read_text(), flags=re.M))
    made = set(re.findall(r"make ([a-z][a-z0-9-]*)", text))
    assert made and made <= targets, f"the diagram names make targets the Makefile lacks: {made - targets}"
    commands = {p.stem.replace("_", "-") for p in (ROOT / "bench" / "commands").glob("*.py")}
    local = text.split("local:", 1)[1].split("\n", 1)[0]
    named = set(re.findall(r"bench ([a-z-]+(?: / [a-z-]+)*)", local)[0].split(" / "))
    assert named <= commands, f"the diagram names bench commands that do not exist: {named - commands}"
    for prefix in (bucket_layout.CHECKPOINTS_PREFIX, bucket_layout.ARTIFACTS_PREFIX):
        assert f"s3://<bucket>/{prefix}" in text, f"the diagram's S3 prefixes are not {prefix}"
    assert text.count(f"({bucket_layout.MANIFEST_NAME} last)") == 2
