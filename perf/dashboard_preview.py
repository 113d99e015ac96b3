"""A screenshot-equivalent of the live dashboard: series recorded here, drawn like its panels.

    .venv/bin/python perf/dashboard_preview.py [--out docs/dashboard-preview.png] [--phase-s 20]

No Grafana and no Prometheus run here, so this records the series themselves: the pinned Envoy on the rendered
bootstrap (every session to `speculative`, spill threshold 4) in front of two loopback vLLM stand-ins, driven by
bench's client at 2, then 10, then 3 concurrent streams. Every second it reads Envoy's /stats/prometheus and the
stand-ins' /metrics (the vllm-neuron stack's names, whose acceptance panel has data), then draws four of the
dashboard's panels with the dashboard's own formulas: requests/s per arm, the share spilled to the baseline, the draft
acceptance rate and requests running. Rates are over 10 s here (the dashboard's 2 m at a 30 s scrape), because the run
is one minute. The TTFT/ITL and speedup panels are not drawn. Prints the numbers it plots.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.client import Target, run_load  # noqa: E402
from charts.envoy_bootstrap import Upstream  # noqa: E402
from charts.live_dashboard import ENVOY_REQUESTS  # noqa: E402
from config import parse_config  # noqa: E402
from config.endpoint import CAPPED_SUFFIX, METRICS_PATH, SPILL_METRICS  # noqa: E402
from config.live_metrics import STACK_NAMES, VOCABULARIES, total  # noqa: E402
from tests.conftest import default_config_dict  # noqa: E402
from tests.router_harness import envoy_router, stand_in  # noqa: E402

WINDOW_S = 10
PHASES = (2, 10, 3)
# The stand-ins speak the series of the first stack whose vLLM reports acceptance, so the acceptance panel has data.
STACK, LIVE = next((n, m) for n, m in zip(STACK_NAMES, VOCABULARIES, strict=True) if m.acceptance is not None)
TOKENS = 24


def scrape(url: str) -> dict[tuple[str, str], float]:
    """(metric name, envoy_cluster_name or '') -> value, from one Prometheus text exposition."""
    with urllib.request.urlopen(url, timeout=5) as resp:  # loopback only
        text = resp.read().decode()
    out: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? ([0-9.eE+-]+)", line)
        if m:
            cluster = re.search(r'envoy_cluster_name="([^"]*)"', m.group(2) or "")
            key = (m.group(1), cluster.group(1) if cluster else "")
            out[key] = out.get(key, 0.0) + float(m.group(3))
    return out


class Recorder(threading.Thread):
    """Samples every second until stopped: (t, envoy, {profile: stand-in metrics})."""

    def __init__(self, envoy_url: str, stand_ins: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.envoy_url, self.stand_ins = envoy_url, stand_ins
        self.samples: list[tuple[float, dict, dict]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stop.is_set():
            envoy = scrape(self.envoy_url)
            vllm = {p: scrape(u) for p, u in self.stand_ins.items()}
            self.samples.append((time.monotonic() - t0, envoy, vllm))
            self.stop.wait(1.0)


def rate(samples: list, i: int, get) -> float:
    """Per-second increase over the last WINDOW_S samples (Prometheus' rate, without extrapolation)."""
    j = max(0, i - WINDOW_S)
    dt = samples[i][0] - samples[j][0]
    return (get(samples[i]) - get(samples[j])) / dt if dt > 0 else 0.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard-preview.png")
    parser.add_argument("--phase-s", type=float, default=20.0)
    args = parser.parse_args(argv)
    spec_args = ("--stack", STACK, "--pattern", "3,2,4,1", "--k", "4", "--step-per-seq-ms", "12")
    base_args = ("--stack", STACK, "--pattern", "1", "--step-per-seq-ms", "1")
    data = default_config_dict()
    data["endpoint"] = {"weights": {"speculative": 100}, "spill_threshold": {"speculative": 4}}
    config = parse_config(data)
    with (
        stand_in("speculative", ttft_ms=50, step_ms=20, lifetime_s=600, extra=spec_args) as s,
        stand_in("baseline", ttft_ms=50, step_ms=25, lifetime_s=600, extra=base_args) as b,
        tempfile.TemporaryDirectory() as tmp,
    ):
        upstreams = {"speculative": Upstream("127.0.0.1", s.port), "baseline": Upstream("127.0.0.1", b.port)}
        with envoy_router(config, upstreams, Path(tmp)) as router:
            rec = Recorder(
                router.metrics_url + METRICS_PATH,
                {"speculative": s.url + "/metrics", "baseline": b.url + "/metrics"},
            )
            rec.start()
            for streams in PHASES:
                deadline = time.monotonic() + args.phase_s
                while time.monotonic() < deadline:
                    target = Target(router.url, "loopback-model", "completions")
                    asyncio.run(run_load(target, "hi", requests=streams * 2, max_tokens=TOKENS, concurrency=streams))
            time.sleep(2)
            rec.stop.set()
            rec.join()
    draw(rec.samples, args.out)


def draw(samples: list, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [x[0] for x in samples]
    idx = range(len(samples))

    def envoy(name: str, cluster: str):
        return lambda s: s[1].get((name, cluster), 0.0)

    served = {
        p: [
            rate(samples, i, envoy(ENVOY_REQUESTS, p)) + rate(samples, i, envoy(ENVOY_REQUESTS, p + CAPPED_SUFFIX))
            for i in idx
        ]
        for p in ("baseline", "speculative")
    }
    capped = "speculative" + CAPPED_SUFFIX
    spilled = [sum(rate(samples, i, envoy(m, capped)) for m in SPILL_METRICS) for i in idx]
    sent = [rate(samples, i, envoy(ENVOY_REQUESTS, capped)) for i in idx]
    share = [sp / (sp + se) if sp + se > 0 else 0.0 for sp, se in zip(spilled, sent, strict=True)]

    def vllm(profile: str, name: str):
        return lambda s: s[2][profile].get((name, ""), 0.0)

    counters = LIVE.acceptance
    assert counters is not None
    acc = [rate(samples, i, vllm("speculative", total(counters.accepted_tokens))) for i in idx]
    drafts = [rate(samples, i, vllm("speculative", total(counters.draft_tokens))) for i in idx]
    acceptance = [a / d if d > 0 else float("nan") for a, d in zip(acc, drafts, strict=True)]
    running = {p: [vllm(p, LIVE.requests_running)(x) for x in samples] for p in ("baseline", "speculative")}

    fig, axes = plt.subplots(2, 2, figsize=(12, 6.5), constrained_layout=True)
    fig.suptitle("trn-specdec: live serving (recorded on loopback: pinned Envoy + vLLM stand-ins; not Grafana)")
    ax = axes[0][0]
    for p, ys in served.items():
        ax.plot(t, ys, label=p)
    ax.set_title("endpoint: requests/s per arm")
    ax = axes[0][1]
    ax.plot(t, share, color="tab:orange", label="speculative")
    ax.axhline(0.25, ls="--", color="grey", lw=1, label="SpillAboveShare (25%)")
    ax.set_title("endpoint: spilled to the baseline (share of the arm's requests)")
    ax.set_ylim(0, 1)
    ax = axes[1][0]
    ax.plot(t, acceptance, color="tab:green", label="accepted / proposed")
    ax.set_title("speculative: draft acceptance rate")
    ax.set_ylim(0, 1)
    ax = axes[1][1]
    for p, ys in running.items():
        ax.plot(t, ys, label=p)
    ax.set_title("requests running")
    for ax in (a for row in axes for a in row):
        ax.set_xlabel("seconds")
        ax.legend(loc="upper left", fontsize=8)
        ax.grid(alpha=0.3)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    peak = max(range(len(share)), key=share.__getitem__)
    print(f"{len(samples)} samples over {t[-1]:.0f} s; wrote {out}")
    print(
        f"peak spill share {share[peak]:.2f} at {t[peak]:.0f} s; served/s at the end: "
        + ", ".join(f"{p} {ys[-1]:.1f}" for p, ys in served.items())
    )
    print(f"mean acceptance {sum(a for a in acceptance if a == a) / max(1, sum(1 for a in acceptance if a == a)):.3f}")


if __name__ == "__main__":
    main()
