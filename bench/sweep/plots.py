"""The sweep's three plots: TPOT speedup vs concurrency per prompt kind, tokens/s per user vs per device (Pareto),
goodput vs Poisson rate. Its own module because it needs matplotlib, which the in-cluster Job does not install.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.report import VARIANT_COLOURS
from bench.sweep.analysis import PointStats, Slo, kind_speedups
from bench.sweep.run import SweepResults


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_speedup(sweep: SweepResults, floor: float, path: Path) -> Path:
    """TPOT speedup vs concurrency, one panel per prompt kind, a line per speculative variant with its range."""
    plt = _pyplot()
    speedups = [k for k in kind_speedups(sweep) if k.point.kind == "concurrency"]
    kinds = list(dict.fromkeys(k.kind for k in speedups)) or ["structured"]
    fig, axes = plt.subplots(1, len(kinds), figsize=(6 * len(kinds), 4.5), constrained_layout=True, squeeze=False)
    for ax, kind in zip(axes.flat, kinds, strict=True):
        names = list(dict.fromkeys(k.variant for k in speedups if k.kind == kind))
        for j, variant in enumerate(names):
            rows = sorted((k for k in speedups if k.kind == kind and k.variant == variant), key=lambda k: k.point.value)
            xs = [k.point.value for k in rows]
            ys = [k.median for k in rows]
            err = [[k.median - k.low for k in rows], [k.high - k.median for k in rows]]
            colour = VARIANT_COLOURS[j % len(VARIANT_COLOURS)]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, color=colour, label=variant)
            sat = [k for k in rows if k.saturated]
            if sat:
                ax.scatter([k.point.value for k in sat], [k.median for k in sat], s=120, facecolors="none",
                           edgecolors="red", label="saturated")  # fmt: skip
        ax.axhline(floor, color="black", linestyle="--", linewidth=1, label=f"floor {floor:.2f}x")
        if sweep.settings.max_num_seqs:
            ax.axvline(sweep.settings.max_num_seqs, color="grey", linestyle=":", label="max_num_seqs")
        ax.set_xscale("log", base=2)
        grid = sorted({k.point.value for k in speedups})
        ax.set_xticks(grid, [f"{v:g}" for v in grid])
        ax.set_title(f"{kind} prompts")
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_ylabel(f"p50 TPOT speedup vs {sweep.baseline} (x)")
        ax.grid(alpha=0.3)
        ax.legend(frameon=False)
    fig.suptitle("Speculative speedup vs load")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_pareto(stats: Sequence[PointStats], path: Path) -> Path:
    """Tokens/s per user vs tokens/s per device (per service when devices are unknown), per variant, over the
    concurrency points: up and to the right is better; the frontier says what each load buys."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 5), constrained_layout=True)
    rows = [s for s in stats if s.point.kind == "concurrency"]
    per_device = all(s.devices for s in rows)
    for j, variant in enumerate(dict.fromkeys(s.variant for s in rows)):
        mine = sorted((s for s in rows if s.variant == variant), key=lambda s: s.point.value)
        xs = [(s.per_device_tok_s if per_device else s.output_tok_s) or 0.0 for s in mine]
        ys = [s.per_user_tok_s or 0.0 for s in mine]
        colour = VARIANT_COLOURS[j % len(VARIANT_COLOURS)]
        ax.plot(xs, ys, marker="o", color=colour, label=variant)
        for s, x, y in zip(mine, xs, ys, strict=True):
            ax.annotate(f"c={s.point.value:g}" + (" (sat.)" if s.saturated else ""), (x, y), fontsize=7,
                        textcoords="offset points", xytext=(4, 4))  # fmt: skip
    ax.set_xlabel("output tokens/s per Neuron device" if per_device else "output tokens/s per service")
    ax.set_ylabel("output tokens/s per user (p50 request)")
    ax.set_title("Throughput per user vs per device (concurrency sweep)")
    ax.grid(alpha=0.3)
    ax.legend(frameon=False)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_goodput(stats: Sequence[PointStats], slo: Slo, path: Path) -> Path:
    """Goodput (solid) and request throughput (dashed) vs offered Poisson rate, per variant."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 5), constrained_layout=True)
    rows = [s for s in stats if s.point.kind == "rate"]
    for j, variant in enumerate(dict.fromkeys(s.variant for s in rows)):
        mine = sorted((s for s in rows if s.variant == variant), key=lambda s: s.point.value)
        colour = VARIANT_COLOURS[j % len(VARIANT_COLOURS)]
        xs = [s.point.value for s in mine]
        ax.plot(xs, [s.goodput_rps for s in mine], marker="o", color=colour, label=f"{variant} goodput")
        ax.plot(xs, [s.request_rps for s in mine], linestyle="--", color=colour, alpha=0.6, label=f"{variant} req/s")
        sat = [s for s in mine if s.saturated]
        if sat:
            ax.scatter([s.point.value for s in sat], [s.goodput_rps for s in sat], s=120, facecolors="none",
                       edgecolors="red")  # fmt: skip
    if rows:
        ax.legend(frameon=False)
    else:
        ax.text(0.5, 0.5, "no rate points in this sweep", ha="center", transform=ax.transAxes)
    ax.set_xlabel("offered load (Poisson requests/s)")
    ax.set_ylabel("requests/s")
    ax.set_title(f"Goodput at TTFT <= {slo.ttft_s * 1000:g} ms, TPOT <= {slo.tpot_s * 1000:g} ms (red: saturated)")
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
