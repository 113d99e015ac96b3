"""Offline report from one or more results files: a Markdown table and two PNG plots.

Why offline: the in-cluster Job writes results to S3 and CloudWatch; people compare runs (k sweeps, drafts,
SDK versions) later on a laptop, where a table and a picture beat raw JSON.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import cost, lossless, table
from bench.results import BenchResults, CaseRun, Speedup, load_results
from bench.runner import summary_rows
from config.prompt_kind import PROMPT_KINDS, PromptKind

COLOURS: dict[PromptKind, str] = {"structured": "#1f77b4", "open-ended": "#ff7f0e"}
VARIANT_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")


@dataclass(frozen=True)
class Source:
    label: str
    results: BenchResults


def load_many(paths: Sequence[str | Path]) -> list[Source]:
    if not paths:
        raise ValueError("give at least one results file written by `bench run`")
    sources = [Source(Path(p).stem, load_results(p)) for p in paths]
    labels = [s.label for s in sources]
    if len(set(labels)) != len(labels):  # same stem in two folders: number them
        sources = [Source(f"{i + 1}:{s.label}", s.results) for i, s in enumerate(sources)]
    return sources


def _name(source: Source, variant: str, many: bool) -> str:
    return f"{source.label}/{variant}" if many else variant


def _geomean(xs: Sequence[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _fmt(x: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "-" if x is None else f"{x:{spec}}{suffix}"


def markdown(sources: Sequence[Source], images: Sequence[str] = (), price: float | None = None) -> str:
    """`price`: USD per node-hour, overriding the one each results file recorded (None: keep theirs)."""
    out = ["# Speculative decoding benchmark", ""]
    for src in sources:
        r = src.results
        s = r.settings
        load = f"concurrency {s.concurrency}" if s.concurrency else f"Poisson rate {s.rate}/s"
        out += [
            f"## {src.label}",
            "",
            f"Run {r.created_at:%Y-%m-%d %H:%M} UTC; {s.api} API, {load}, {s.requests} requests "
            f"(+{s.warmup} warm-up) per test case, {s.max_tokens} output tokens, {s.mode} variants. "
            f"Latencies are p50/p90/p99 (p99 is close to the maximum below about 100 requests); ITL is token-weighted; speedups are `{r.baseline}` p50 / variant p50.",
            "",
            "Variants: " + ", ".join(f"`{v.name}` ({v.model} at {v.base_url})" for v in r.variants),
            "",
            *table.markdown(*summary_rows(r)),
            "",
        ]
        speedups = r.speedups()
        if speedups:
            out += ["### Speedup and acceptance by test case", ""]
            rows = []
            for sp in speedups:
                run = r.run(sp.variant, sp.test_case, sp.stop)
                spec = run.spec_decode if run else None
                rows.append(
                    [
                        sp.test_case,
                        sp.kind,
                        sp.stop,
                        sp.variant,
                        _fmt(sp.tpot, suffix="x"),
                        _fmt(sp.itl, suffix="x"),
                        _fmt(sp.e2e, suffix="x"),
                        _fmt(sp.throughput, suffix="x"),
                        _fmt(spec.acceptance_rate if spec else None),
                        _acceptance_length(run),
                    ]
                )
            header = [
                "test case",
                "kind",
                "stop",
                "variant",
                "x TPOT",
                "x ITL",
                "x E2E",
                "x tok/s",
                "accept",
                "accept len",
            ]
            out += [*table.markdown(header, rows), ""]
            out += [
                "accept: vLLM's accepted / drafted tokens. accept len: tokens per target step from /metrics, or "
                "(client) tokens per streamed chunk when the server exposes no acceptance (legacy fused path).",
                "",
            ]
            stops = list(dict.fromkeys(sp.stop for sp in speedups))
            for stop in stops:
                for kind in PROMPT_KINDS:
                    g = _geomean([sp.tpot for sp in speedups if sp.kind == kind and sp.stop == stop and sp.tpot])
                    label = kind if stops == ["fixed"] else f"{kind}, {stop} stop"
                    out.append(f"- {label}: geometric-mean TPOT speedup {_fmt(g, suffix='x')}")
            out.append("")
        out += _lossless_section(r)
        out += _cost_section(r, price)
        notes = _notes(r.runs)
        if notes:
            out += ["### Notes", "", *[f"- {n}" for n in notes], ""]
    out += [f"![{Path(i).stem}]({i})" for i in images]
    return "\n".join(out).rstrip() + "\n"


def _cost_section(results: BenchResults, price: float | None) -> list[str]:
    header, rows, notes = cost.cost_rows(results, price)
    lines = ["### Cost", ""]
    if rows:
        lines += [*table.markdown(header, rows), ""]
    return [*lines, *[f"- {n}" for n in notes], ""]


def _lossless_section(results: BenchResults) -> list[str]:
    checks = lossless.check(results)
    if not checks:
        return []
    lines = ["### Lossless check", ""]
    lines += [
        f"Each output at temperature 0 against `{results.baseline}`'s for the same prompt (token ids when the "
        "server sent them, else text). A divergence can be legitimate (bf16 numerics in another batch shape); "
        "read the rate, and run `bench run --lossless` (batch size 1) to separate it from batching.",
        "",
    ]
    lines += [*table.markdown(*lossless.rows(checks)), ""]
    for variant, (diverged, compared) in lossless.overall(checks).items():
        rate = f"{diverged / compared:.1%}" if compared else "-"
        lines.append(f"- `{variant}`: {diverged} of {compared} outputs diverge ({rate})")
    return [*lines, ""]


def _acceptance_length(run: CaseRun | None) -> str:
    """The server's mean acceptance length, else tokens per streamed chunk labelled as client-derived."""
    if run is None:
        return "-"
    if run.spec_decode.mean_acceptance_length is not None:
        return _fmt(run.spec_decode.mean_acceptance_length)
    per_step = run.tokens_per_step()
    return "-" if per_step is None else f"{per_step:.2f} (client)"


def _notes(runs: Sequence[CaseRun]) -> list[str]:
    notes: set[str] = set()
    for run in runs:
        s = run.summary
        if run.spec_decode.note:
            notes.add(f"`{run.variant}` acceptance: {run.spec_decode.note}")
        if s.errors:
            notes.add(f"`{run.variant}` / {run.test_case}: {s.errors} failed request(s)")
        if s.usage_missing:
            notes.add(
                f"`{run.variant}` / {run.test_case}: {s.usage_missing} response(s) without usage or token_ids: counted for TTFT and E2E only, excluded from TPOT, ITL and throughput"
            )
        if s.short_outputs:
            notes.add(f"`{run.variant}` / {run.test_case}: {s.short_outputs} response(s) shorter than max_tokens")
    return sorted(notes)


def _distribution(run: CaseRun, metric: str) -> list[float]:
    """Milliseconds; ITL expanded by token weight so the box shows the token-weighted distribution."""
    ok = [r for r in run.records if r.ok]
    if metric == "itl":
        values: list[float] = []
        for r in ok:
            for v, w in zip(*r.itl(), strict=True):
                values += [v * 1000] * w
        return values
    if metric == "ttft":
        return [r.ttft_s * 1000 for r in ok if r.ttft_s is not None]
    if metric == "tpot":
        return [t * 1000 for r in ok if (t := r.tpot_s) is not None]
    return [r.e2e_s for r in ok if r.e2e_s is not None]


_PANELS = (
    ("ttft", "Time to first token (ms)"),
    ("tpot", "Time per output token (ms)"),
    ("itl", "Inter-token latency, token-weighted (ms)"),
    ("e2e", "End-to-end latency (s)"),
)


def _case_label(case: str, stop: str) -> str:
    return case if stop == "fixed" else f"{case} (natural stop)"


def plot_latency(sources: Sequence[Source], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    many = len(sources) > 1
    series = [(src, v.name) for src in sources for v in src.results.variants]
    cases = list(dict.fromkeys((r.test_case, r.stop) for src in sources for r in src.results.runs))
    height = max(4.0, 0.42 * len(cases) * max(1, len(series)) / 1.6 + 1.5)
    fig, axes = plt.subplots(2, 2, figsize=(15, 2 * height), constrained_layout=True)
    width = 0.8 / len(series)
    for ax, (metric, title) in zip(axes.flat, _PANELS, strict=True):
        for j, (src, variant) in enumerate(series):
            data, positions = [], []
            for i, (case, stop) in enumerate(cases):
                run = src.results.run(variant, case, stop)
                values = _distribution(run, metric) if run else []
                if values:
                    data.append(values)
                    positions.append(i - 0.4 + width * (j + 0.5))
            if not data:
                continue
            colour = VARIANT_COLOURS[j % len(VARIANT_COLOURS)]
            ax.boxplot(
                data,
                positions=positions,
                widths=width * 0.85,
                orientation="horizontal",
                patch_artist=True,
                showfliers=False,
                whis=(5, 95),
                medianprops={"color": "black"},
                boxprops={"facecolor": colour, "alpha": 0.85},
            )
            # a dot at each median keeps the variant's colour visible when a box is only a line wide
            medians = [statistics.median(d) for d in data]
            ax.scatter(medians, positions, color=colour, edgecolors="black", linewidths=0.5, s=22, zorder=3)
        ax.set_yticks(range(len(cases)), [_case_label(case, stop) for case, stop in cases])
        ax.invert_yaxis()
        ax.set_title(title)
        ax.grid(axis="x", alpha=0.3)
        ax.set_xlim(left=0)
    handles = [
        Patch(color=VARIANT_COLOURS[j % len(VARIANT_COLOURS)], label=_name(src, v, many))
        for j, (src, v) in enumerate(series)
    ]
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=min(len(handles), 6),
        frameon=False,
        title="box: p25-p75, line: median, whiskers: p5-p95",
    )
    fig.suptitle("Latency per test case and variant", fontsize="x-large")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_speedup(sources: Sequence[Source], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    many = len(sources) > 1
    groups: list[tuple[str, list[Speedup]]] = []
    for src in sources:
        speedups = src.results.speedups()
        for variant in dict.fromkeys(sp.variant for sp in speedups):
            rows = [sp for sp in speedups if sp.variant == variant and sp.tpot is not None]
            label = f"{_name(src, variant, many)} vs {src.results.baseline}"
            groups.append((label, sorted(rows, key=lambda sp: (sp.kind != "structured", -(sp.tpot or 0)))))
    groups = [g for g in groups if g[1]]
    rows_total = sum(max(1, len(g[1])) for g in groups)
    fig, axes = plt.subplots(
        max(1, len(groups)),
        1,
        figsize=(10, 1.6 + 0.45 * rows_total + 0.6 * len(groups)),
        constrained_layout=True,
        squeeze=False,
    )
    axes_list = list(axes.flat)
    if not groups:
        axes_list[0].text(0.5, 0.5, "no speedups: a single variant, or no successful runs", ha="center")
        axes_list[0].set_axis_off()
    for ax, (label, rows) in zip(axes_list, groups, strict=False):
        ys = range(len(rows))
        values = [sp.tpot or 0.0 for sp in rows]
        ax.barh(ys, values, color=[COLOURS[sp.kind] for sp in rows])
        ax.set_yticks(ys, [_case_label(sp.test_case, sp.stop) for sp in rows])
        ax.invert_yaxis()
        ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
        for y, v in zip(ys, values, strict=True):
            ax.text(v, y, f" {v:.2f}x", va="center")
        ax.set_xlim(0, max([*values, 1.0]) * 1.18)
        ax.set_title(f"Decode speedup (p50 TPOT): {label}")
        ax.set_xlabel("speedup (x); dashed line: no gain")
        ax.grid(axis="x", alpha=0.3)
    handles = [Patch(color=c, label=k) for k, c in COLOURS.items()]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(paths: Sequence[str | Path], out_dir: str | Path, price: float | None = None) -> list[Path]:
    """report.md, latency.png and speedup.png in out_dir; `price` as in `markdown`."""
    sources = load_many(paths)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    latency = plot_latency(sources, out / "latency.png")
    speedup = plot_speedup(sources, out / "speedup.png")
    md = out / "report.md"
    md.write_text(markdown(sources, images=[speedup.name, latency.name], price=price))
    return [md, latency, speedup]
