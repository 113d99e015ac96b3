"""The stack registry: every image tag belongs to at most one stack, and each stack can serve plain decoding
(the baseline of its own stack)."""

from __future__ import annotations

import pytest

from serving_stacks import STACKS, catalogue, stack_named, stack_serving


@pytest.mark.parametrize(
    ("vllm", "plugin", "sdk", "stack"),
    [
        ("0.9.1", None, "2.26.1", "legacy-v0"),
        ("0.9.1", None, "2.32.0", None),  # no NxDI in SDK 2.32+
        ("0.29.0", "1.2.0", "2.33.0", "vllm-neuron"),
        ("0.24.0", "1.1.0", "2.32.0", None),  # not pinned by the engine check
        ("0.16.0", None, "2.31.1", None),  # the last NxDI-based V1 image
    ],
)
def test_each_image_has_at_most_one_stack(vllm, plugin, sdk, stack):
    assert sum(s.serves_image(vllm, plugin, sdk) for s in STACKS) == (stack is not None)
    found = stack_serving(vllm, plugin, sdk)
    assert (found.NAME if found else None) == stack


def test_each_stack_serves_its_own_image_and_a_baseline():
    for s in STACKS:
        vllm, rest = s.IMAGE_TAG.split("-", 1)
        parts = vllm.split(".")
        plugin = ".".join(parts[3:]) or None
        sdk = rest.split("-sdk", 1)[1].split("-", 1)[0]
        assert stack_serving(".".join(parts[:3]), plugin, sdk) is s
        assert "none" in s.METHODS
        assert s.IMAGE_TAG in catalogue()
    assert stack_named("vllm-neuron").METHODS == ("none", "eagle3", "dflash")
