"""The serving stacks: one module per Neuron vLLM stack, each owning what differs between stacks.

A stack module says which images it serves and why (its catalogue), which decoding methods it runs, how
Neuron settings and the speculative config reach its vLLM, its environment, and how its artifact is built
and checked. Adding a stack is adding a module here and listing it in STACKS; config, charts and model_build
ask the profile's stack instead of branching on its name.

Leaf package: imports nothing of ours outside itself, so the config schema can read it.
"""

from __future__ import annotations

from types import ModuleType

from serving_stacks import legacy_v0, vllm_neuron_v1

STACKS: tuple[ModuleType, ...] = (legacy_v0, vllm_neuron_v1)


def stack_named(name: str) -> ModuleType:
    return next(s for s in STACKS if name == s.NAME)


def stack_serving(vllm_version: str) -> ModuleType:
    """The stack whose images carry this vLLM version (the version part of the image tag)."""
    major, minor, _ = (int(p) for p in vllm_version.split("."))
    return next(s for s in STACKS if s.serves_vllm((major, minor)))
