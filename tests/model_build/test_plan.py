"""The build plan: snapshot of what `plan` prints, and every NxDI keyword/flag checked against the pinned release."""

from __future__ import annotations

import argparse
import copy
import json
from typing import Any

import pytest

from config import load_config, parse_config
from model_build.cli import main
from model_build.errors import BuildError
from model_build.neuron_config import GREEDY_SAMPLING
from model_build.plan import CHECKED_NXDI_RELEASE, DEMO_PROMPT, build_plan
from tests.conftest import ROOT, default_config_dict

PROFILES = ["baseline", "speculative"]


@pytest.mark.parametrize("profile", PROFILES)
def test_plan_text_matches_snapshot(profile, capsys, snapshot):
    assert main(["plan", profile]) == 0
    assert capsys.readouterr().out == snapshot


@pytest.mark.parametrize("profile", PROFILES)
def test_plan_json_matches_snapshot(profile, capsys, snapshot):
    assert main(["plan", profile, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == snapshot


@pytest.mark.parametrize("profile", PROFILES)
def test_every_neuron_config_kwarg_is_one_nxdi_accepts(default_config, nxdi_recorded, profile):
    plan = build_plan(default_config, default_config.profile(profile))
    known = nxdi_recorded["neuron_config_kwargs"]
    for kwargs in filter(None, [plan.target_kwargs, plan.draft_kwargs]):
        unknown = sorted(set(kwargs) - set(known))
        assert not unknown, f"NeuronConfig at {nxdi_recorded['tag']} would silently ignore {unknown}"
        sampling = kwargs["on_device_sampling_config"]
        assert set(sampling) <= set(nxdi_recorded["on_device_sampling_config_kwargs"])
    assert plan.nxdi_release == nxdi_recorded["tag"] == CHECKED_NXDI_RELEASE


def test_target_config_follows_the_profile(default_config):
    profile = default_config.profile("speculative")
    kw = build_plan(default_config, profile).target_kwargs
    assert kw["tp_degree"] == profile.placement.tensor_parallel_size == 32
    assert kw["logical_nc_config"] == profile.placement.logical_neuron_cores == 2
    assert kw["batch_size"] == profile.max_num_seqs
    assert kw["seq_len"] == kw["max_context_length"] == profile.max_model_len
    assert kw["torch_dtype"] == profile.dtype
    assert kw["on_device_sampling_config"] == GREEDY_SAMPLING == {"top_k": 1, "do_sample": False}
    assert kw["speculation_length"] == profile.decoding.num_speculative_tokens == 7
    assert kw["enable_fused_speculation"] is kw["save_sharded_checkpoint"] is kw["enable_bucketing"] is True
    assert kw["is_continuous_batching"] is True


def test_draft_is_the_target_config_with_speculation_off(default_config):
    plan = build_plan(default_config, default_config.profile("speculative"))
    assert plan.draft_kwargs is not None
    differing = {k for k in plan.target_kwargs if plan.target_kwargs[k] != plan.draft_kwargs[k]}
    assert differing == {"speculation_length", "enable_fused_speculation"}
    assert plan.draft_kwargs["speculation_length"] == 0 and plan.draft_kwargs["enable_fused_speculation"] is False
    assert plan.draft_path == "/models/checkpoints/Qwen/Qwen3-1.7B/70d244cc86ccca08cf5af4e1e306ecf908b1ad5e"


def test_baseline_has_no_draft_or_speculation_keys(default_config):
    plan = build_plan(default_config, default_config.profile("baseline"))
    assert plan.draft_kwargs is None and plan.draft_path is None
    assert not {"speculation_length", "enable_fused_speculation"} & set(plan.target_kwargs)
    argv = plan.inference_demo_argv()
    assert not {"--draft-model-path", "--enable-fused-speculation", "--speculation-length"} & set(argv)


def _demo_parser(recorded: dict[str, Any]) -> argparse.ArgumentParser:
    """A replica of inference_demo's parser from the recorded add_argument calls (types as plain str/int)."""
    types = {"int": int, "float": float}
    top = argparse.ArgumentParser(exit_on_error=False)
    sub = top.add_subparsers(dest="subcommand", required=True)
    run = sub.add_parser("run", exit_on_error=False)
    for flag, spec in recorded["inference_demo_flags"].items():
        parser = top if spec["parser"] == "top-level" else run
        kwargs: dict[str, Any] = {"required": bool(spec.get("required", False))}
        if spec.get("action") in ("store_true", "append"):
            kwargs["action"] = spec["action"]
        if spec.get("nargs"):
            kwargs["nargs"] = spec["nargs"]
        if kwargs.get("action") != "store_true":
            kwargs["type"] = types.get(spec.get("type", "str"), str)
        if isinstance(spec.get("choices"), list):
            kwargs["choices"] = spec["choices"]
        parser.add_argument(flag, **kwargs)
    return top


@pytest.mark.parametrize("profile", PROFILES)
def test_inference_demo_command_parses_with_the_recorded_flags(default_config, nxdi_recorded, profile):
    plan = build_plan(default_config, default_config.profile(profile), out_dir="/scratch/out")
    argv = plan.inference_demo_argv()
    assert argv[0] == "inference_demo"
    flags = [a for a in argv[1:] if a.startswith("--")]
    assert set(flags) <= set(nxdi_recorded["inference_demo_flags"]), "a flag inference_demo does not have"
    run = argv.index("run")
    assert {"--model-type", "--task-type"} <= set(argv[1:run]), "top-level flags must precede `run`"
    args = _demo_parser(nxdi_recorded).parse_args(argv[1:])
    assert args.model_type == "qwen3" and args.task_type == "causal-lm"
    assert args.prompt == [DEMO_PROMPT] and args.compile_only and args.save_sharded_checkpoint
    assert args.model_path == plan.target_path and args.compiled_model_path == "/scratch/out"
    kw = plan.target_kwargs
    assert (args.tp_degree, args.batch_size, args.seq_len, args.max_context_length) == (
        kw["tp_degree"],
        kw["batch_size"],
        kw["seq_len"],
        kw["max_context_length"],
    )
    assert args.logical_nc_config == kw["logical_nc_config"] and args.torch_dtype == kw["torch_dtype"]
    assert args.enable_bucketing and args.is_continuous_batching and args.on_device_sampling and args.top_k == 1
    assert args.enable_fused_speculation == bool(plan.speculative)
    assert args.speculation_length == kw.get("speculation_length")
    assert args.draft_model_path == plan.draft_path


def test_demo_replica_rejects_what_inference_demo_rejects(nxdi_recorded):
    """The replica is strict: flags after `run` that belong to the top level, or a missing --prompt, fail."""
    parser = _demo_parser(nxdi_recorded)
    ok = ["--model-type", "qwen3", "--task-type", "causal-lm", "run", "--model-path", "m", "--compiled-model-path", "c"]
    with pytest.raises((argparse.ArgumentError, SystemExit)):
        parser.parse_args(ok)  # no --prompt
    with pytest.raises((argparse.ArgumentError, SystemExit)):
        parser.parse_args(["run", "--model-type", "qwen3", *ok[4:], "--prompt", "p"])


def test_fused_spec_config_uses_the_recorded_parameters(default_config, nxdi_recorded):
    fused = build_plan(default_config, default_config.profile("speculative")).to_json()["nxdi"]["fused_spec_config"]
    assert list(fused) == nxdi_recorded["fused_spec_neuron_config_params"]
    assert fused["worker_cls"] == "NeuronQwen3ForCausalLM._model_cls"
    assert nxdi_recorded["qwen3"]["_model_cls"] == "NeuronQwen3Model"


def test_plugin_profiles_get_no_nxdi_plan():
    config = load_config(ROOT / "config" / "vllm-neuron.yaml")
    with pytest.raises(BuildError, match="NxDI"):
        build_plan(config, config.profile("eagle3"))


def test_unknown_model_family_is_refused():
    data = default_config_dict()
    for model in data["models"].values():
        model["tokenizer_family"] = "llama3"
    config = parse_config(data)
    with pytest.raises(BuildError, match="MODEL_FAMILIES"):
        build_plan(config, config.profile("baseline"))


def test_other_sdk_warns_that_kwargs_were_checked_against_2_26_only():
    data = copy.deepcopy(default_config_dict())
    data["serving"]["image"]["tag"] = "0.9.1-neuronx-py311-sdk2.27.0-ubuntu22.04"
    config = parse_config(data)
    assert "re-check them for SDK 2.27.0" in build_plan(config, config.profile("baseline")).render()


def test_plan_of_an_unknown_profile_exits_2(capsys):
    assert main(["plan", "nope"]) == 2
    assert "no profile named 'nope'" in capsys.readouterr().err
