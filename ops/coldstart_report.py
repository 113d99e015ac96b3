"""`make coldstart-report`: where every serving pod's cold start went, from the cluster's own record.

    python -m ops.coldstart_report [--config ...] [--out coldstart] [--publish]

Reads the serving pods, the Trainium2 nodes and the namespace's events with kubectl, and each pod's init-check
and vLLM logs; prints a table of seconds per phase (ops/coldstart.py says where each boundary comes from), writes
it with a timeline PNG under --out, and with --publish sends the same numbers to CloudWatch (the observability
namespace: ColdStartPhaseSeconds by Variant and Phase, TimeToReadySeconds by Variant and Start), where the
autoscaler's scale-up period can be read from TimeToReadySeconds' maximum.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from bench.results import folder_problem
from charts.pod_security import VLLM_POD_LABELS
from config import ConfigError, load_config
from config.catalogue import NODE_ROLE_LABEL
from config.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CommandError
from ops.coldstart import (
    INIT_CONTAINER,
    PHASES,
    VLLM_CONTAINER,
    ColdStart,
    cold_start,
    metric_datums,
    node_scale_up_table,
    report_table,
)
from ops.kubectl import kubectl

LOG_LIMIT_BYTES = 4_000_000  # vLLM says its engine is ready within its first lines; a long-running log can be large


def _items(*args: str) -> list[dict]:
    return json.loads(kubectl(*args, "-o", "json").stdout).get("items", [])


def _log(namespace: str, pod: str, container: str) -> str:
    """The container's log with timestamps; empty when it has none yet (not started, or waiting to restart)."""
    found = kubectl(
        "-n", namespace, "logs", pod, "-c", container, "--timestamps", f"--limit-bytes={LOG_LIMIT_BYTES}", check=False
    )
    return found.stdout if found.returncode == 0 else ""


def collect(namespace: str) -> list[ColdStart]:
    """Every serving pod's cold start, read through kubectl from the cluster it points at."""
    selector = ",".join(f"{k}={v}" for k, v in VLLM_POD_LABELS.items())
    pods = _items("-n", namespace, "get", "pods", "-l", selector)
    nodes = {n["metadata"]["name"]: n for n in _items("get", "nodes", "-l", f"{NODE_ROLE_LABEL}=trn2")}
    events = _items("-n", namespace, "get", "events", "--field-selector", "involvedObject.kind=Pod")
    starts = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["creationTimestamp"]):
        name = pod["metadata"]["name"]
        node = nodes.get(pod.get("spec", {}).get("nodeName", ""))
        logs = (_log(namespace, name, INIT_CONTAINER), _log(namespace, name, VLLM_CONTAINER))
        starts.append(cold_start(pod, node, events, *logs))
    return starts


def timeline_png(starts: list[ColdStart], path: Path) -> None:
    """One bar per pod, one colour per phase, seconds from the earliest start."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    shown = [s for s in starts if s.phases]
    colours = dict(zip(PHASES, plt.get_cmap("tab10").colors, strict=False))
    origin = min((s.phases[0].start for s in shown), default=datetime.now(UTC))
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.5 * max(len(shown), 1)))
    for row, s in enumerate(shown):
        for p in s.phases:
            left = (p.start - origin).total_seconds()
            merged = " + " in p.name
            ax.barh(
                row,
                p.seconds,
                left=left,
                color=colours[p.name.split(" + ")[-1]],
                hatch="//" if merged else None,
                edgecolor="white",
            )
        end = (s.phases[-1].end - origin).total_seconds()
        ax.text(end, row, f"  {s.outcome[:40]}", va="center", fontsize=7)
    ax.set_yticks(range(len(shown)), [f"{s.pod} ({s.start_kind})" for s in shown], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the first pod's start (node Ready or pod created); hatched: boundaries merged")
    ax.legend(
        handles=[Patch(color=c, label=n) for n, c in colours.items()],
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1, 1),
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def publish(starts: list[ColdStart], *, namespace: str, region: str, now: datetime) -> int:
    """PutMetricData of every Ready pod's phases (bench.cloudwatch.put_datums); returns the number of values sent."""
    from bench.cloudwatch import MAX_AGE, put_datums

    datums = metric_datums(starts, now=now, max_age_s=MAX_AGE.total_seconds())
    if datums:
        put_datums(datums, namespace=namespace, region=region, again="run make coldstart-report again")
    return len(datums)


def write_report(starts: list[ColdStart], out: Path, now: datetime) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"coldstart-{now.strftime('%Y%m%d-%H%M%S')}"
    table = report_table(starts)
    notes = [f"- {s.pod}: {note}" for s in starts for note in s.notes]
    sizes = [
        f"- {s.pod}: image {s.image_bytes} bytes pulled"
        + (f", compile cache {s.copied_bytes} bytes copied" if s.copied_bytes else "")
        for s in starts
        if s.image_bytes
    ]
    nodes = node_scale_up_table(starts)
    node_section = ["", "Replicas that waited for a new node (docs/elastic-capacity.md):", "", nodes] if nodes else []
    stem.with_suffix(".md").write_text("\n".join([table, *node_section, "", *sizes, *notes, ""]))
    timeline_png(starts, stem.with_suffix(".png"))
    return stem.with_suffix(".md"), stem.with_suffix(".png")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.coldstart_report", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="deployment config (default: config/default.yaml)")
    parser.add_argument("--out", type=Path, default=Path("coldstart"), help="where the table and PNG go")
    parser.add_argument("--publish", action="store_true", help="also send the numbers to CloudWatch")
    args = parser.parse_args(argv)
    now = datetime.now(UTC)
    if problem := folder_problem(args.out):  # before any kubectl call: it used to fail after the whole collection
        print(f"--out {str(args.out)!r} {problem}; choose another --out folder", file=sys.stderr)
        return EXIT_USAGE
    try:
        config = load_config(args.config)
        starts = collect(config.namespace)
    except (ConfigError, CommandError) as err:
        print(err, file=sys.stderr)
        return EXIT_USAGE
    if not starts:
        print(f"no serving pods in namespace {config.namespace}: deploy first (make deploy)", file=sys.stderr)
        return EXIT_FAILED
    print(report_table(starts))
    if nodes := node_scale_up_table(starts):
        print(nodes)
    for s in starts:
        for note in s.notes:
            print(f"{s.pod}: {note}")
    table, png = write_report(starts, args.out, now)
    print(f"wrote {table} and {png}")
    if args.publish:
        try:
            sent = publish(starts, namespace=config.observability.metrics_namespace, region=config.region, now=now)
        except CommandError as err:
            print(f"the report is written, but the numbers did not reach CloudWatch: {err}", file=sys.stderr)
            return EXIT_FAILED
        print(f"sent {sent} values to CloudWatch namespace {config.observability.metrics_namespace}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
