"""The endpoint's Envoy configuration is plain data: built from the config alone, apart from the objects that deploy it.

Envoy's own validation of the rendered bootstrap and its behaviour on loopback are in test_endpoint.py and
test_endpoint_router.py; this checks the split issue 27 asked for (item 4): the generator reads no files and makes
no Kubernetes objects, so the tests and `perf/` run it without cdk8s; and what the tests' routers override (the
capped cluster's DNS refresh), checked on the deployed rendering.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from charts import render_serving
from config import parse_config
from config.endpoint import CAPPED_SUFFIX
from tests.charts.conftest import TEST_BUCKET, of_kind
from tests.conftest import default_config_dict

ROOT = Path(__file__).resolve().parents[2]
# CoreDNS answers a Service's records with a 5 s TTL (plugin/kubernetes README, `ttl`: "The default is 5 seconds";
# EKS's Corefile sets none): a capped cluster that re-resolves less often keeps sending to a replica that is gone.
COREDNS_TTL_SECONDS = 5
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


def _values_of(key: str, tree: Any) -> Iterator[Any]:
    """Every value of `key` anywhere in a nested config (wherever Envoy's schema puts the field)."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            if k == key:
                yield v
            yield from _values_of(key, v)
    elif isinstance(tree, list):
        for item in tree:
            yield from _values_of(key, item)


def test_the_deployed_capped_cluster_rereads_its_replicas_within_coredns_ttl() -> None:
    """The default config with a spilling arm, rendered as the endpoint's ConfigMap (no test resolver, no overridden
    refresh): each capped cluster's DNS refresh is at most CoreDNS's TTL, so a replica KEDA adds takes load and one it
    removes stops getting it within seconds."""
    data = default_config_dict()
    data["endpoint"] = {**data.get("endpoint", {}), "weights": {"baseline": 50, "speculative": 50}}
    objects = render_serving(parse_config(data), TEST_BUCKET)
    envoy = yaml.safe_load(of_kind(objects, "ConfigMap")["endpoint-envoy"]["data"]["envoy.yaml"])
    capped = [c for c in envoy["static_resources"]["clusters"] if c["name"].endswith(CAPPED_SUFFIX)]
    assert capped, "a spilling arm renders a capped cluster"
    for cluster in capped:
        (rate,) = _values_of("dns_refresh_rate", cluster)
        seconds = re.fullmatch(r"(\d+(?:\.\d+)?)s", rate)
        assert seconds, f"{cluster['name']}: dns_refresh_rate {rate!r} is not a duration in seconds"
        assert float(seconds[1]) <= COREDNS_TTL_SECONDS, f"{cluster['name']} re-resolves every {rate}"
