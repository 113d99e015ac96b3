"""What each pinned vLLM really serves on /metrics, read from its installed source in `.venv-vllm-<version>` (built by
the Makefile), not from our constants: the metric constructors in a stack's LiveMetrics.sources, and whether the
engine that stack runs on Neuron ever sets the speculative-decoding series. Also that environment's prometheus_client,
whose parser checks the stand-in's exposition. The environments are required, as for the engine checks: a missing one
fails with how to build it (tests/engine/command_lines.py)."""

from __future__ import annotations

import functools
import json
import re
import subprocess
from pathlib import Path

from serving_stacks.contract import HISTOGRAM_SUFFIXES, LiveMetrics, total
from tests.conftest import ROOT

SPEC_DECODE_PREFIX = "vllm:spec_decode_"
V0_ENGINE_METRICS = "vllm/engine/metrics.py"


def venv(version: str) -> Path:
    path = ROOT / f".venv-vllm-{version}"
    assert (path / "bin" / "python").exists(), f"{path.name} is missing; `make test` builds it (vLLM {version})"
    return path


def package(version: str) -> Path:
    """The installed vllm package of that environment."""
    (found,) = sorted(venv(version).glob("lib/python3*/site-packages/vllm"))
    return found


def source(version: str, relative: str) -> str:
    """A file of the pinned vLLM, `relative` to site-packages (e.g. vllm/engine/metrics.py)."""
    return (package(version).parent / relative).read_text()


# A metric constructor: `self._gauge_cls(name="vllm:...")` in V0 and V1, or the spec-decode counters of V1 declared as
# (name, documentation) pairs and built with _counter_cls (vllm/v1/spec_decode/metrics.py).
_CONSTRUCTOR = re.compile(r"_(gauge|counter|histogram)_cls\(\s*name=\"(vllm:[a-z0-9_]+)\"")
_COUNTER_PAIR = re.compile(r"\(\"(vllm:spec_decode_[a-z0-9_]+)\",\s*\"")


@functools.cache
def declared(version: str, sources: tuple[str, ...]) -> dict[str, str]:
    """Base name -> kind (gauge, counter, histogram) of every series those files construct. A counter's base name has
    no `_total`: prometheus_client strips one the source wrote and adds it back when it serves the counter."""
    kinds: dict[str, str] = {}
    for relative in sources:
        text = source(version, relative)
        found = _CONSTRUCTOR.findall(text) + [("counter", n) for n in _COUNTER_PAIR.findall(text)]
        for kind, name in found:
            kinds[name.removesuffix("_total") if kind == "counter" else name] = kind
    return kinds


@functools.cache
def neuron_sets_spec_decode_series(version: str, sources: tuple[str, ...]) -> bool:
    """Whether the engine of these sources sets its vllm:spec_decode_* series when it serves on Neuron.

    V0 (vllm/engine/metrics.py): only from the worker's `spec_decode_worker_metrics`, which only vllm/spec_decode/
    assigns, while vllm/platforms/neuron.py makes every worker a NeuronWorker. V1: from the scheduler's own counts
    (`spec_decoding_stats`, vllm/v1/core/sched/scheduler.py), whatever the platform."""
    pkg = package(version)
    if V0_ENGINE_METRICS not in sources:
        return "spec_decoding_stats" in (pkg / "v1" / "core" / "sched" / "scheduler.py").read_text()
    assigners = {
        str(p.relative_to(pkg.parent))
        for p in pkg.rglob("*.py")
        if re.search(r"\.spec_decode_worker_metrics\s*=", p.read_text(errors="replace"))
    }
    neuron_worker = re.search(r'worker_cls\s*=\s*\\?\s*"vllm\.worker\.neuron_worker\.NeuronWorker"', _platform(pkg))
    return not (neuron_worker and all(a.startswith("vllm/spec_decode/") for a in assigners))


def _platform(pkg: Path) -> str:
    return (pkg / "platforms" / "neuron.py").read_text()


def served(metrics: LiveMetrics) -> dict[str, str]:
    """Base name -> kind of what the stack's vLLM serves with a value on Neuron: what its sources construct, less the
    speculative-decoding series where its engine never sets them there."""
    kinds = declared(metrics.vllm_version, metrics.sources)
    if neuron_sets_spec_decode_series(metrics.vllm_version, metrics.sources):
        return dict(kinds)
    return {n: k for n, k in kinds.items() if not n.startswith(SPEC_DECODE_PREFIX)}


def exposed(metrics: LiveMetrics) -> set[str]:
    """The series names of `served` as prometheus_client writes them (counters _total, histograms
    _bucket/_sum/_count, gauges as they are)."""
    out: set[str] = set()
    for name, kind in served(metrics).items():
        if kind == "counter":
            out.add(total(name))
        elif kind == "histogram":
            out |= {name + s for s in HISTOGRAM_SUFFIXES}
        else:
            out.add(name)
    return out


PARSE = """
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for family in text_string_to_metric_families(sys.stdin.read()):
    out += [[family.name, family.type, s.name, s.labels, s.value] for s in family.samples]
print(json.dumps(out))
"""


def parse_with_prometheus_client(
    text: str, version: str = "0.29.0"
) -> list[tuple[str, str, str, dict[str, str], float]]:
    """The exposition parsed by prometheus_client's own text parser (the one in that vLLM's environment): raises on
    anything it refuses. Each sample as (family, type, sample name, labels, value)."""
    python = venv(version) / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", PARSE], input=text, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"prometheus_client refused the exposition: {done.stderr.strip().splitlines()[-1:]}"
    return [(f, t, n, labels, v) for f, t, n, labels, v in json.loads(done.stdout)]
