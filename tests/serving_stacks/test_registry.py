"""The stack registry: every vLLM version belongs to exactly one stack, and each stack can serve plain
decoding (the baseline of its own stack)."""

from __future__ import annotations

import pytest

from serving_stacks import STACKS, stack_named, stack_serving


@pytest.mark.parametrize("version", [(0, 9), (0, 10), (0, 11), (0, 29), (1, 0)])
def test_each_vllm_version_has_exactly_one_stack(version):
    assert sum(s.serves_vllm(version) for s in STACKS) == 1


def test_stacks_are_found_by_name_and_by_image_version():
    assert [s.NAME for s in STACKS] == ["legacy-v0", "vllm-neuron-v1"]
    assert stack_serving("0.9.1") is stack_named("legacy-v0")
    assert stack_serving("0.11.0") is stack_named("vllm-neuron-v1")


def test_every_stack_serves_a_baseline():
    assert all("none" in s.METHODS for s in STACKS)
