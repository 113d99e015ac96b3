"""The range of k (speculative tokens per target step) that the config accepts and the tuner predicts over.

1..15: the blog swept k from 5 to 15 and found 7 best for Qwen3-32B with a Qwen3-1.7B draft; past 15 the
draft's cost outgrows any plausible acceptance.

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

K_MIN = 1
K_MAX = 15
K_RANGE = range(K_MIN, K_MAX + 1)
