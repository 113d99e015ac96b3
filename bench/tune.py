"""Predict the best k (tokens drafted per step) from a benchmark run, with Leviathan et al.'s model.

Per (speculative variant, test case), alpha is the per-token acceptance rate of the model, derived from the
mean acceptance length L (tokens per target step) by solving (1 - a^(k+1)) / (1 - a) = L: from the server's
metrics when vLLM exposes them, else from tokens per streamed chunk (client-derived). vLLM's accepted/drafted
ratio is not alpha and is never used for it. c, the draft/target step cost, comes from the measured step times
(time between chunks, speculative vs baseline): c = (step_spec / step_base - 1) / k.

A second, independent path fits alpha to the measured TPOT speedup with that c; the two agree when the model
describes the run, and the table shows both. The model S(a, k, c) = (1 - a^(k+1)) / ((1 - a)(k c + 1)) then
predicts every k in 1..15. It ignores batching and the fused kernel's own overheads, so treat the answer as
where to look next: add a profile with that k to the config (one more service, no code) and measure it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from bench.results import BenchResults, CaseRun
from bench.spec_metrics import alpha_from_length, expected_speedup, expected_tokens_per_step
from bench.sweep.analysis import first_below
from config.speculation import K_RANGE

DEFAULT_COST_RATIO = 0.05  # draft step / target step; Qwen3-1.7B vs Qwen3-32B is ~1.7/32 by parameters
DISAGREEMENT = 0.05  # alpha: more than this between the two paths, and the table says so
# Recommend the smallest k whose predicted speedup is within this fraction of the best: a larger k costs draft
# compute and memory at every step and pays back less as load grows, so a 0.2% edge is not worth it.
DEFAULT_TOLERANCE = 0.02


@dataclass(frozen=True)
class CaseFit:
    variant: str
    test_case: str
    kind: str
    k: int
    alpha: float
    alpha_source: str  # "server metrics", "client-derived" or "fitted from TPOT speedup"
    predicted: dict[int, float]
    c: float  # the cost ratio the predictions use
    c_measured: float | None = None  # from the run's step times
    alpha_fitted: float | None = None  # from the TPOT speedup and the measured (else given) c

    @property
    def best_k(self) -> int:
        return smallest_within(self.predicted, DEFAULT_TOLERANCE)


def smallest_within(predicted: dict[int, float], tolerance: float) -> int:
    """The smallest k whose predicted speedup is at least (1 - tolerance) x the best one."""
    best = max(predicted.values())
    return min(k for k, s in predicted.items() if s >= best * (1 - tolerance))


def fit_alpha(speedup: float, k: int, c: float, tol: float = 1e-6) -> float:
    """The acceptance rate at which the model's speedup at k equals the measured one (S grows with a)."""
    lo, hi = 0.0, 1.0
    if speedup <= expected_speedup(lo, k, c):
        return 0.0
    if speedup >= expected_speedup(hi, k, c):
        return 1.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_speedup(mid, k, c) < speedup else (lo, mid)
    return (lo + hi) / 2


def measured_cost_ratio(run: CaseRun, base: CaseRun | None, k: int) -> float | None:
    """c from step times: a speculative step is one target step plus k draft steps, step_spec = T (1 + k c)."""
    spec_step = run.step_time_s()
    base_step = base.step_time_s() if base is not None else None
    if spec_step is None or not base_step:
        return None
    return max(0.0, (spec_step / base_step - 1) / k)


def _mean_length(run: CaseRun) -> tuple[float | None, str]:
    length = run.spec_decode.mean_acceptance_length
    if length is not None:
        return length, "server metrics"
    return run.tokens_per_step(), "client-derived"


def fit_cases(
    results: BenchResults, k_by_variant: dict[str, int], c: float | None = DEFAULT_COST_RATIO
) -> list[CaseFit]:
    """One fit per speculative run with a known k. `c` None: each run's measured c, else DEFAULT_COST_RATIO."""
    fits: list[CaseFit] = []
    speedups = {(s.variant, s.test_case, s.stop): s for s in results.speedups()}
    k_recorded = {v.name: v.num_speculative_tokens for v in results.variants if v.num_speculative_tokens}
    for run in results.runs:
        k = k_recorded.get(run.variant) or k_by_variant.get(run.variant)
        if run.variant == results.baseline or not k:
            continue
        c_measured = measured_cost_ratio(run, results.run(results.baseline, run.test_case, run.stop), k)
        c_used = c if c is not None else (c_measured if c_measured is not None else DEFAULT_COST_RATIO)
        s = speedups.get((run.variant, run.test_case, run.stop))
        fitted = None
        if s is not None and s.tpot is not None:
            fitted = fit_alpha(s.tpot, k, c_measured if c_measured is not None else c_used)
        length, source = _mean_length(run)
        if length is not None and 1.0 <= length <= k + 1:
            alpha = alpha_from_length(length, k)
        elif fitted is not None:
            alpha, source = fitted, "fitted from TPOT speedup"
        else:
            continue
        predicted = {kk: expected_speedup(alpha, kk, c_used) for kk in K_RANGE}
        case = run.case_label  # each against its own stop
        fits.append(CaseFit(run.variant, case, run.kind, k, alpha, source, predicted, c_used, c_measured, fitted))
    return fits


def recommend(fits: list[CaseFit], tolerance: float = DEFAULT_TOLERANCE) -> dict[str, int]:
    """Per test-case kind (structured, open-ended) and overall: the smallest k whose mean predicted speedup is
    within `tolerance` of the best."""
    groups: dict[str, list[CaseFit]] = defaultdict(list)
    for f in fits:
        groups[f.kind].append(f)
        groups["all"].append(f)
    best: dict[str, int] = {}
    for name, group in groups.items():
        mean = {k: sum(f.predicted[k] for f in group) / len(group) for k in K_RANGE}
        best[name] = smallest_within(mean, tolerance)
    return best


def _opt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def format_tuning(fits: list[CaseFit], tolerance: float = DEFAULT_TOLERANCE) -> str:
    if not fits:
        return "no speculative runs with a known k and an acceptance length or TPOT speedup: nothing to tune"
    costs = sorted({f.c for f in fits})
    lines = [
        "cost ratio c (draft step / target step) used to predict: " + ", ".join(f"{c:.3f}" for c in costs),
        "alpha from the mean acceptance length L; 'alpha fit' from the TPOT speedup with the measured c",
        "",
        f"{'variant':<14}{'test case':<18}{'kind':<12}{'k':>3}{'alpha':>7}{'alpha fit':>10}{'c run':>7}"
        f"  {'S(k) now':>8}   rec k  S(rec)",
    ]
    for f in fits:
        rec = smallest_within(f.predicted, tolerance)
        warn = ""
        if f.alpha_fitted is not None and abs(f.alpha_fitted - f.alpha) > DISAGREEMENT:
            warn = "  (paths disagree: the model does not describe this run)"
        lines.append(
            f"{f.variant:<14}{f.test_case:<18}{f.kind:<12}{f.k:>3}{f.alpha:>7.3f}{_opt(f.alpha_fitted, '.3f'):>10}"
            f"{_opt(f.c_measured, '.3f'):>7}  {f.predicted[f.k]:>8.2f}  {rec:>6}  {f.predicted[rec]:>6.2f}"
            f"   ({f.alpha_source}){warn}"
        )
    lines.append("")
    lines.append(f"recommended: the smallest k predicted within {tolerance:.1%} of the best")
    lines += [f"recommended k ({kind}): {k}" for kind, k in sorted(recommend(fits, tolerance).items())]
    return "\n".join(lines)


@dataclass(frozen=True)
class KCheck:
    """One speculative variant's measured TPOT speedup on one case against what the model predicts for its k
    from the acceptance rate and cost ratio pooled over every k of that case."""

    test_case: str
    variant: str
    k: int
    predicted: float
    measured: float

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1


def check_k_sweep(results: BenchResults, k_by_variant: dict[str, int], c: float | None = None) -> list[KCheck]:
    """For a run of several speculative profiles that differ in k (`make ab` on `tune`'s proposals): per case,
    the median alpha and c of the fits at every k predict each k's speedup; compare with the measured one."""
    fits = fit_cases(results, k_by_variant, c)
    measured = {(s.variant, s.test_case): s.tpot for s in results.speedups() if s.stop == "fixed" and s.tpot}
    checks: list[KCheck] = []
    for case in dict.fromkeys(f.test_case for f in fits):
        mine = [f for f in fits if f.test_case == case and (f.variant, case) in measured]
        if not mine:
            continue
        alphas, costs = sorted(f.alpha for f in mine), sorted(f.c for f in mine)
        alpha, cost = alphas[len(alphas) // 2], costs[len(costs) // 2]
        for f in mine:
            predicted = expected_speedup(alpha, f.k, cost)
            checks.append(KCheck(case, f.variant, f.k, predicted, measured[(f.variant, case)]))  # type: ignore[arg-type]
    return checks


def measured_recommendation(checks: list[KCheck], tolerance: float = DEFAULT_TOLERANCE) -> int | None:
    """The smallest k whose mean measured speedup over the cases is within `tolerance` of the best k's."""
    by_k: dict[int, list[float]] = defaultdict(list)
    for ch in checks:
        by_k[ch.k].append(ch.measured)
    if not by_k:
        return None
    return smallest_within({k: sum(v) / len(v) for k, v in by_k.items()}, tolerance)


def format_check(checks: list[KCheck], tolerance: float = DEFAULT_TOLERANCE) -> str:
    if not checks:
        return "no speculative runs with a known k and a TPOT speedup: nothing to check"
    lines = [f"{'test case':<18}{'variant':<16}{'k':>3}{'predicted':>11}{'measured':>10}{'error':>8}"]
    for ch in checks:
        lines.append(
            f"{ch.test_case:<18}{ch.variant:<16}{ch.k:>3}{ch.predicted:>10.2f}x{ch.measured:>9.2f}x{ch.error:>+8.1%}"
        )
    worst = max(checks, key=lambda ch: abs(ch.error))
    lines += [
        "",
        f"largest error: {worst.error:+.1%} ({worst.variant}, {worst.test_case})",
        f"measured: the smallest k within {tolerance:.1%} of the best is k = {measured_recommendation(checks, tolerance)}",
    ]
    return "\n".join(lines)


PROPOSED_KS = (1, 2, 3, 5, 7)  # the default k set for a k sweep


def propose_profiles(config: object, ks: tuple[int, ...] = PROPOSED_KS) -> tuple[list[dict], list[str]]:
    """For each speculative profile of the config and each k: the profile with that k (named <profile>-k<k>), as
    config entries, kept only when the whole config with it in place of the original still validates (the stack's
    own rules decide which k it accepts, e.g. a DFlash drafter's block size); plus why each other k was dropped."""
    from config import ConfigError, parse_config

    data = config.model_dump(mode="json")  # type: ignore[attr-defined]
    serving = data.get("serving", {})
    proposals: list[dict] = []
    dropped: list[str] = []
    for i, profile in enumerate(data["profiles"]):
        if profile["decoding"]["method"] == "none":
            continue
        for k in ks:
            entry = {**profile, "name": f"{profile['name']}-k{k}", "decoding": {**profile["decoding"]}}
            entry["decoding"]["num_speculative_tokens"] = k
            trial = {**data, "profiles": [*data["profiles"][:i], entry, *data["profiles"][i + 1 :]]}
            try:
                parse_config(trial)
            except ConfigError as err:
                dropped.append(f"{entry['name']}: {'; '.join(err.problems)}")
                continue
            proposals.append(
                {key: v for key, v in entry.items() if key in ("name", "decoding") or serving.get(key) != v}
            )
    return proposals, dropped


# --- predict before paying: where speculation stops paying, from one run at concurrency 1 ---------------------

PREDICTION_ASSUMPTIONS = (
    "the baseline's step time is linear in the batch through the two loads given (a memory-bound floor followed "
    "by a compute-bound slope looks linear only locally: loads near the expected crossover predict best)",
    "verifying k+1 tokens per sequence at batch b costs the baseline's step at batch (k+1) x b (the step grows "
    "with tokens in flight); attention over long contexts makes it cost more: expect the prediction within "
    "about a grid step",
    "a draft step costs c x the baseline's step at the same batch: c is the run's speculative step time less "
    "its verify, per draft step, at the run's concurrency (best 1)",
    "acceptance does not change with load; the batch is the concurrency, up to max_num_seqs",
)


@dataclass(frozen=True)
class CrossoverPrediction:
    """Where a speculative variant's predicted TPOT speedup on one case falls below the floor."""

    variant: str
    test_case: str
    kind: str
    k: int
    tokens_per_step: float
    c: float
    crossover: float | None  # the lowest grid load predicted below the floor; None: none in the grid
    at_grid: dict[float, float]  # load -> predicted speedup


def predicted_speedup(
    tokens_per_step: float, k: int, c: float, base_step: Callable[[float], float], batch: float
) -> float:
    """L x T(b) / (k c T(b) + T((k+1) b)): the speculative step drafts k times and verifies k+1 tokens."""
    base = base_step(batch)
    return tokens_per_step * base / (k * c * base + base_step((k + 1) * batch))


def linear_step(points: dict[float, float]) -> Callable[[float], float]:
    """The baseline's step time (its TPOT: one token per step) as a line through two (load, TPOT) points."""
    (l1, t1), (l2, t2) = sorted(points.items())[:2]
    slope = max(0.0, (t2 - t1) / (l2 - l1))
    return lambda b: t1 + slope * (b - l1)


def predict_crossovers(
    results: BenchResults,
    k_by_variant: dict[str, int],
    baseline_tpot: dict[float, float],
    grid: list[float],
    floor: float,
    max_num_seqs: int | None = None,
) -> list[CrossoverPrediction]:
    """Per speculative run of a results file (acceptance and the draft's cost at its load, best at concurrency
    1): the predicted speedup at every grid load and the first below the floor."""
    if len(baseline_tpot) < 2:
        raise ValueError("--baseline-tpot needs the baseline's TPOT at two loads, e.g. 1=45,4=52 (ms)")
    step = linear_step(baseline_tpot)
    load = float(results.settings.concurrency or 1)
    out = []
    for fit in fit_cases(results, k_by_variant, c=None):
        run = next(r for r in results.runs if r.variant == fit.variant and r.case_label == fit.test_case)
        length, _ = _mean_length(run)
        tokens = length if length is not None else expected_tokens_per_step(fit.alpha, fit.k)
        # c under this model: the measured speculative step less its verify, per draft step
        spec_step = run.step_time_s()
        c = fit.c if not spec_step else max(0.0, (spec_step - step((fit.k + 1) * load)) / (fit.k * step(load)))
        at = {g: predicted_speedup(tokens, fit.k, c, step, min(g, max_num_seqs or g)) for g in grid}
        loads = sorted(at)
        first = first_below([at[g] for g in loads], floor)  # the sweep's crossover rule, on predicted speedups
        crossover = None if first is None else loads[first]
        out.append(CrossoverPrediction(fit.variant, fit.test_case, fit.kind, fit.k, tokens, c, crossover, at))
    return out


def format_predictions(predictions: list[CrossoverPrediction], floor: float) -> str:
    lines = [f"Predicted crossover (speedup below {floor:g}x), before paying for a sweep. Assumptions:"]
    lines += [f"  - {a}" for a in PREDICTION_ASSUMPTIONS]
    for p in predictions:
        where = "none in the grid" if p.crossover is None else f"{p.crossover:g}"
        curve = ", ".join(f"{g:g}: {s:.2f}x" for g, s in sorted(p.at_grid.items()))
        lines.append(
            f"{p.variant} {p.test_case} ({p.kind}, k={p.k}, {p.tokens_per_step:.2f} tokens/step, c={p.c:.3f}): "
            f"crossover {where}  [{curve}]"
        )
    return "\n".join(lines)
