"""Every vLLM command line the charts render is accepted by the vLLM that will run it, up to its engine config.

The command lines are read from the rendered Deployments (container command + args + env), not from the
argument builder, so the check sees exactly what Kubernetes would start (tests/engine/command_lines.py).
The pinned vLLM runs in its own environment in a subprocess (tests/engine/conftest.py starts it).
"""

from __future__ import annotations

import pytest

from tests.engine.command_lines import PER_BATCH_K, TOO_LONG_DRAFT, rendered_names


@pytest.mark.parametrize("name", rendered_names())
def test_vllm_builds_its_engine_config_from_the_rendered_command_line(engine_results, name):
    assert engine_results[name] == "ok", f"{name}: vLLM would not start: {engine_results[name]}"


def test_every_profile_of_every_config_is_checked(engine_results):
    assert {n for n in engine_results if "+" not in n} == set(rendered_names())
    assert {"default/baseline", "default/speculative", "multi/spec-k5", "multi/spec-0-6b"} <= set(engine_results)
    assert {"plugin/baseline", "plugin/eagle3", "dflash/dflash"} <= set(engine_results)


def test_a_draft_longer_than_the_target_is_rejected_by_vllm(engine_results):
    """The check reaches create_engine_config(): today's defect (draft 2048 > target 1024) fails it."""
    assert TOO_LONG_DRAFT in engine_results["default/speculative+draft-len-2048"]
    assert TOO_LONG_DRAFT in engine_results["plugin/eagle3+draft-len-2048"]


def test_a_per_batch_size_k_schedule_builds_an_engine_config_in_both_pinned_vllms(engine_results):
    """What the engine check can say about `num_speculative_tokens_per_batch_size` (docs/sweep.md, "Per-load k"):
    vLLM 0.29.0 declares it (vllm/config/speculative.py SpeculativeConfig) and 0.9.1 drops the unknown key
    silently (its SpeculativeConfig is a pydantic dataclass that ignores extra keys), so both build an engine
    config. Neither proves the schedule runs on Neuron: 0.29.0 validates it only in the V1 scheduler and the GPU
    worker, and the vllm-neuron plugin's EAGLE3 proposer compiles one k. So the sweep does not render it."""
    assert engine_results[f"plugin/eagle3{PER_BATCH_K}"] == "ok"
    assert engine_results[f"default/speculative{PER_BATCH_K}"] == "ok"
