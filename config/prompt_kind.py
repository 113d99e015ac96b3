"""The prompt kinds: how each test case is labelled (config/prompt_suite.py), what the benchmark's results and
report group speedups by, and what crossover.json's entries are per (config/crossover.py). Its own leaf, not part
of prompt_suite: the config loader reads crossover.json in every Job, and the prompts ship only with the benchmark.

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

from typing import Literal, get_args

PromptKind = Literal["structured", "open-ended"]
PROMPT_KINDS: tuple[PromptKind, ...] = get_args(PromptKind)  # in this order in the reports
