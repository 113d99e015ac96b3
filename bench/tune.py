"""Predict the best k (tokens drafted per step) from a benchmark run, with Leviathan et al.'s model.

Per (speculative variant, test case) the acceptance rate a is the server's measured one when vLLM exposes
it; otherwise it is fitted so that the model reproduces the measured TPOT speedup at the k that ran. The
model S(a, k, c) = (1 - a^(k+1)) / ((1 - a)(k c + 1)) then predicts every k in 1..15. It ignores batching
and the fused kernel's own overheads, so treat the answer as where to look next: add a profile with that
k to the config (one more service, no code) and measure it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from bench.results import BenchResults
from bench.spec_metrics import expected_speedup
from config.speculation import K_RANGE

DEFAULT_COST_RATIO = 0.05  # draft step / target step; Qwen3-1.7B vs Qwen3-32B is ~1.7/32 by parameters


@dataclass(frozen=True)
class CaseFit:
    variant: str
    test_case: str
    kind: str
    k: int
    alpha: float
    alpha_source: str  # "measured" or "fitted from TPOT speedup"
    predicted: dict[int, float]

    @property
    def best_k(self) -> int:
        return max(self.predicted, key=lambda k: self.predicted[k])


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


def fit_cases(results: BenchResults, k_by_variant: dict[str, int], c: float = DEFAULT_COST_RATIO) -> list[CaseFit]:
    fits: list[CaseFit] = []
    speedups = {(s.variant, s.test_case): s for s in results.speedups()}
    for run in results.runs:
        k = k_by_variant.get(run.variant)
        if run.variant == results.baseline or not k:
            continue
        rate = run.spec_decode.acceptance_rate
        if rate is not None:
            alpha, source = rate, "measured"
        else:
            s = speedups.get((run.variant, run.test_case))
            if s is None or s.tpot is None:
                continue
            alpha, source = fit_alpha(s.tpot, k, c), "fitted from TPOT speedup"
        predicted = {kk: expected_speedup(alpha, kk, c) for kk in K_RANGE}
        fits.append(CaseFit(run.variant, run.test_case, run.kind, k, alpha, source, predicted))
    return fits


def recommend(fits: list[CaseFit]) -> dict[str, int]:
    """Best k per test-case kind (structured, open-ended) and overall, by mean predicted speedup."""
    groups: dict[str, list[CaseFit]] = defaultdict(list)
    for f in fits:
        groups[f.kind].append(f)
        groups["all"].append(f)
    best: dict[str, int] = {}
    for name, group in groups.items():
        mean = {k: sum(f.predicted[k] for f in group) / len(group) for k in K_RANGE}
        best[name] = max(mean, key=lambda k: mean[k])
    return best


def format_tuning(fits: list[CaseFit], c: float) -> str:
    if not fits:
        return "no speculative runs with a measured acceptance rate or TPOT speedup: nothing to tune"
    lines = [f"cost ratio c = {c} (draft step / target step)", ""]
    lines.append(f"{'variant':<14}{'test case':<18}{'kind':<12}{'k':>3}{'alpha':>7}  {'S(k) now':>8}  best k  S(best)")
    for f in fits:
        lines.append(
            f"{f.variant:<14}{f.test_case:<18}{f.kind:<12}{f.k:>3}{f.alpha:>7.3f}  {f.predicted[f.k]:>8.2f}  "
            f"{f.best_k:>6}  {f.predicted[f.best_k]:>6.2f}   ({f.alpha_source})"
        )
    lines.append("")
    lines += [f"recommended k ({kind}): {k}" for kind, k in sorted(recommend(fits).items())]
    return "\n".join(lines)
