"""Measured decode step times (batch x tokens per sequence per step, target and draft) as a stand-in's load curve.

Why: a linear step-time model has no memory-bound floor, so speculation never stops paying the way it does on a
real accelerator, where a step costs about the same up to some batch (weights dominate) and then grows with the
batch (compute dominates). A table of measured step times gives the stand-ins that shape. The file format is the
one of `tests/bench/fixtures/step-times-h100-qwen3-32b.json` (its provenance is in its `what` and `caveat`):
`batches`, and `step_ms.target.q<N>` / `step_ms.draft.q1` as {batch: ms}.

The speculative step follows that file's `speculative_model`: k draft steps of one token plus one target step
verifying k + 1 tokens per sequence, T_spec(b, k) = k x draft_q1(b) + target_q(k+1)(b).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bench.curve import value_at
from bench.spec_metrics import expected_tokens_per_step

Curve = tuple[tuple[int, float], ...]  # (batch, step seconds), increasing batch


class StepTableError(ValueError):
    """A step-time file that cannot be used, as a sentence naming the file and what is missing."""


@dataclass(frozen=True)
class StepTable:
    """Step times in ms per model ('target', 'draft'), tokens per sequence per step and batch."""

    batches: tuple[int, ...]
    step_ms: dict[str, dict[int, dict[int, float]]]  # model -> q -> batch -> ms

    @classmethod
    def load(cls, path: str | Path) -> StepTable:
        file = Path(path)
        try:
            raw = json.loads(file.read_text(encoding="utf-8"))
            batches = tuple(int(b) for b in raw["batches"])
            step_ms = {
                model: {
                    int(q.removeprefix("q")): {int(b): float(ms) for b, ms in by_batch.items()}
                    for q, by_batch in by_q.items()
                }
                for model, by_q in raw["step_ms"].items()
            }
        except OSError as err:
            raise StepTableError(f"step-time table {str(file)!r} cannot be read ({err.strerror})") from None
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise StepTableError(
                f"step-time table {str(file)!r} is not in the step-times format ({err!r}): it needs `batches` "
                "and `step_ms.target.q1`, `step_ms.target.q<k+1>`, `step_ms.draft.q1` as {batch: ms}"
            ) from None
        return cls(batches, step_ms)

    def _ms(self, model: str, q: int) -> dict[int, float]:
        table = self.step_ms.get(model, {}).get(q)
        if table is None or any(b not in table for b in self.batches):
            have = sorted(self.step_ms.get(model, {}))
            raise StepTableError(
                f"the step-time table has no {model} step times at {q} token(s) per sequence for every batch "
                f"(it has q in {have}); choose a k with target q<k+1> in the table"
            )
        return table

    def curve(self, k: int, scale: float = 1.0) -> Curve:
        """Step seconds per batch: the target alone (k = 0, the baseline) or a speculative step drafting k.
        `scale` multiplies every time (a small one keeps loopback tests fast; the shape is unchanged)."""
        target = self._ms("target", k + 1)
        draft = self._ms("draft", 1) if k else {}
        return tuple((b, scale * (k * draft.get(b, 0.0) + target[b]) / 1000) for b in self.batches)


def step_at(curve: Curve, batch: float) -> float:
    """Step seconds at `batch`, linear between the table's batches, flat below its first and along the last
    segment's slope above its last (a compute-bound step grows linearly with the batch)."""
    if not curve:
        raise ValueError("an empty step-time curve")
    return value_at(curve, batch)


def acceptance_pattern(alpha: float, k: int, length: int = 100) -> tuple[int, ...]:
    """Chunk sizes (tokens per step) cycled by a speculative stand-in: a step accepts j of k drafts with the
    model's probability alpha^j (1 - alpha) (j < k) or alpha^k (j = k); each size gets its share of `length` by
    largest remainder (so the mean is E(alpha, k) = (1 - alpha^(k+1)) / (1 - alpha) to about k / length), then
    they are ordered so that every prefix has about that mean too: each request starts the cycle afresh, so a
    short response must see the model's tokens per step, not a run of ones."""
    if not 0.0 <= alpha < 1.0 or k < 1:
        raise ValueError(f"alpha={alpha} must be in [0, 1) and k={k} >= 1")
    shares = [length * (alpha**j * (1 - alpha) if j < k else alpha**k) for j in range(k + 1)]
    counts = [int(s) for s in shares]
    for j in sorted(range(k + 1), key=lambda j: counts[j] - shares[j])[: length - sum(counts)]:
        counts[j] += 1
    mean = sum((j + 1) * n for j, n in enumerate(counts)) / length
    pattern: list[int] = []
    for i in range(length):  # greedy: the size left that keeps the running sum nearest (i + 1) x mean
        target = (i + 1) * mean - sum(pattern)
        j = min((j for j in range(k + 1) if counts[j]), key=lambda j: (abs(j + 1 - target), j))
        counts[j] -= 1
        pattern.append(j + 1)
    return tuple(pattern)


def tokens_per_step(alpha: float, k: int) -> float:
    return expected_tokens_per_step(alpha, k)
