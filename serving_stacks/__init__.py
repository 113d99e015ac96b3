"""The serving stacks: one module per Neuron vLLM stack, each owning what differs between stacks.

A stack module says which images it serves and why (its catalogue), which decoding methods it runs, how
Neuron settings and the speculative method reach its vLLM, its environment, the Neuron driver its images
need, its own config rules, and how its artifact is built and checked: the members of the ServingStack
contract (serving_stacks/contract.py). Adding a stack is adding a module here and listing it in STACKS; config,
charts and model_build ask the profile's stack instead of branching on its name
(tests/serving_stacks/test_contract.py fails on any other use of a stack outside this package).

Leaf package: imports nothing of ours outside itself, so the config schema can read it.
"""

from __future__ import annotations

from serving_stacks import legacy_v0, vllm_neuron
from serving_stacks.contract import ServingStack

STACKS: tuple[ServingStack, ...] = (legacy_v0, vllm_neuron)
# Every speculative decoding method some stack serves, in STACKS order: the config's vocabulary of
# decoding.method (config.profiles.DraftSpeculation) is this, so a stack's METHODS is its one owner.
SPECULATIVE_METHODS: tuple[str, ...] = tuple(dict.fromkeys(m for s in STACKS for m in s.METHODS if m != "none"))
# The image a config without one gets: the seed reproduction's stack (DESIGN.md, decision 1).
DEFAULT_IMAGE_TAG = legacy_v0.IMAGE_TAG


def stack_named(name: str) -> ServingStack:
    """The stack of a profile (config.profiles.Image.stack names it)."""
    return next(s for s in STACKS if name == s.NAME)


def stack_serving(vllm: str, plugin: str | None, sdk: str) -> ServingStack | None:
    """The stack whose catalogue holds an image with these versions (from its tag), or None."""
    return next((s for s in STACKS if s.serves_image(vllm, plugin, sdk)), None)


def catalogue() -> str:
    """One line per stack for error sentences: which image to use for which methods."""
    return "; ".join(f"{s.NAME} serves {', '.join(s.METHODS)} with image tag {s.IMAGE_TAG}" for s in STACKS)
