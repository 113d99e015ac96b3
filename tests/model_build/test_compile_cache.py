"""The vllm-neuron build: run the stack's vLLM with the serving command line until it serves, then keep its cache.

A stand-in `vllm` executable (a real process serving real HTTP on loopback) writes a NEFF into
$VLLM_CACHE_ROOT/neuron/compile_cache/<hash>/ before it answers /health, as the plugin compiles before serving.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import stat
import sys
from pathlib import Path

import pytest

from charts.vllm_args import vllm_args
from config import load_config, parse_config
from config.bucket_layout import BUILD_RECORD_NAME
from model_build.compile_cache import CachePlan, build_cache, cache_plan, check_drafter
from model_build.digest import profile_digest
from model_build.errors import BuildError
from serving_pod.manifest import BuildRecord
from tests.conftest import ROOT
from tests.ports import free_port
from tests.vllm_health import HEALTH_SERVER

STAGED = str(ROOT / "tests" / "engine" / "fixtures")  # staged checkpoints' config.json, as on the bucket mount

FAKE_VLLM = """#!{python}
import os, pathlib, sys
mode = {mode!r}
port = int(sys.argv[sys.argv.index("--port") + 1])
if mode == "crash":
    sys.exit(3)
if mode != "no-cache":
    cache = pathlib.Path(os.environ["VLLM_CACHE_ROOT"]) / "neuron" / "compile_cache" / "0123abcd"
    cache.mkdir(parents=True)
    (cache / "model.neff").write_bytes(b"neff")
{health}
health_server(port).serve_forever()
"""


@pytest.fixture
def plugin():
    config = load_config(ROOT / "config" / "vllm-neuron.yaml")
    return config, config.profile("eagle3")


def fake_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "vllm"
    script.write_text(FAKE_VLLM.format(python=sys.executable, mode=mode, health=HEALTH_SERVER))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")


def serving_argv(config, profile, port: int) -> list[str]:
    args = vllm_args(config, profile)
    args[args.index("--port") + 1] = str(port)
    return ["vllm", *args]


def port_closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_the_cache_is_built_by_the_serving_command_line_and_recorded(plugin, tmp_path, monkeypatch):
    config, profile = plugin
    fake_vllm(tmp_path, monkeypatch, "ok")
    port, out = free_port(), tmp_path / "out"
    plan = cache_plan(config, profile, out_dir=str(out), models_root=STAGED)
    argv = serving_argv(config, profile, port)
    record = build_cache(plan, argv, out=out, port=port, timeout_s=120, poll_s=0.05)
    assert (out / "neuron/compile_cache/0123abcd/model.neff").read_bytes() == b"neff"
    written = BuildRecord.from_json((out / BUILD_RECORD_NAME).read_text())
    assert written == record and written.digest == plan.digest and written.neuron_config == {"vllm_argv": argv}
    assert port_closed(port), "the build must stop the vLLM it started"


@pytest.mark.parametrize(
    ("mode", "words"),
    [("crash", "vLLM exited with code 3 before serving"), ("no-cache", "left no compile cache")],
)
def test_a_vllm_that_exits_or_leaves_no_cache_fails_the_build(mode, words, plugin, tmp_path, monkeypatch):
    """Either way the build records nothing and leaves no vLLM behind."""
    config, profile = plugin
    fake_vllm(tmp_path, monkeypatch, mode)
    port, out = free_port(), tmp_path / "out"
    plan = cache_plan(config, profile, out_dir=str(out), models_root=STAGED)
    with pytest.raises(BuildError, match=words):
        build_cache(plan, serving_argv(config, profile, port), out=out, port=port, timeout_s=120, poll_s=0.05)
    assert not (out / BUILD_RECORD_NAME).exists() and port_closed(port)


def test_a_command_line_of_another_profile_is_refused_before_vllm_starts(plugin, tmp_path):
    config, profile = plugin
    plan = cache_plan(config, profile, out_dir=str(tmp_path))
    other = serving_argv(config, config.profile("baseline"), 8000)
    other[other.index("--max-num-batched-tokens") + 1] = "2048"
    with pytest.raises(BuildError, match="does not carry profile eagle3's graph arguments"):
        build_cache(plan, other, out=tmp_path, port=8000, timeout_s=1)


@pytest.mark.parametrize(
    ("where", "key", "value"),
    [
        ("profile", "max_num_seqs", 8),  # the num_seqs bucket
        ("profile", "max_model_len", 2048),  # the num_batched_tokens bucket
        ("placement", "logical_neuron_cores", 1),  # LNC (and TP with it)
        ("decoding", "num_speculative_tokens", 4),  # k
        ("decoding", "draft_max_model_len", 512),
    ],
)
def test_the_digest_moves_with_every_graph_shaping_input(where, key, value):
    config = load_config(ROOT / "config" / "vllm-neuron.yaml")
    data = config.model_dump(mode="json")
    profile = data["profiles"][1]
    node = profile if where == "profile" else profile[where]
    node[key] = value
    if key == "logical_neuron_cores":
        node["tensor_parallel_size"] = 32
    if key == "max_model_len":
        profile["decoding"]["draft_max_model_len"] = None
    other = parse_config(data)
    assert profile_digest(other, other.profile("eagle3")) != profile_digest(config, config.profile("eagle3"))


def test_the_graph_args_are_in_the_digest_inputs(plugin):
    config, profile = plugin
    inputs = cache_plan(config, profile).inputs
    args = vllm_args(config, profile)
    graph = inputs["graph_args"]
    assert any(args[i : i + len(graph)] == graph for i in range(len(args)))
    assert (inputs["plugin_version"], inputs["vllm_version"], inputs["stack"]) == ("1.2.0", "0.29.0", "vllm-neuron")


def _dflash_plan(k: int) -> CachePlan:
    """The engine check's DFlash profile with k replaced (its drafter fixture has block_size 16)."""
    from tests.engine.command_lines import dflash_config

    config = dflash_config()
    plan = cache_plan(config, config.profile("dflash"))
    return dataclasses.replace(plan, inputs={**plan.inputs, "num_speculative_tokens": k})


def test_a_dflash_drafter_that_fits_passes_the_check():
    check_drafter(_dflash_plan(15), ROOT / "tests/engine/fixtures")


def test_a_dflash_k_other_than_block_size_minus_one_is_refused_before_the_build():
    with pytest.raises(BuildError, match="block_size=16, so the plugin requires num_speculative_tokens=15, not 7"):
        check_drafter(_dflash_plan(7), ROOT / "tests/engine/fixtures")


def test_a_dflash_drafter_of_another_target_is_refused():
    from serving_stacks.vllm_neuron import dflash_drafter_problems

    target = {"hidden_size": 5120, "vocab_size": 151936, "num_hidden_layers": 64}
    drafter = {"hidden_size": 4096, "vocab_size": 151936, "num_target_layers": 36, "block_size": 16}
    problems = dflash_drafter_problems(target, drafter, 15)
    assert problems == [
        "the drafter has hidden_size=4096 but the target 5120; use its own drafter",
        "the drafter was trained for a target of 36 layers, this target has 64",
    ]


def test_the_drafter_check_needs_staged_checkpoints(tmp_path):
    with pytest.raises(BuildError, match="stage the checkpoints first"):
        check_drafter(_dflash_plan(15), tmp_path)


def _eagle3_plan(models_root: Path) -> CachePlan:
    config = load_config(ROOT / "config" / "vllm-neuron.yaml")
    return cache_plan(config, config.profile("eagle3"), models_root=str(models_root))


def _stage_draft(models_root: Path, plan: CachePlan, draft_config: dict) -> None:
    draft = plan.inputs["draft"]
    directory = models_root / "checkpoints" / draft["hf_id"] / draft["revision"]
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps(draft_config))


def _redhat_fixture() -> dict:
    """The engine check's copy of RedHatAI's Qwen3-32B EAGLE3 config (tests/engine/fixtures/README.md)."""
    path = "tests/engine/fixtures/checkpoints/RedHatAI/Qwen3-32B-speculator.eagle3/dc84fe7ff1db31efa824776f49c141fc8195eb47"
    return json.loads((ROOT / path / "config.json").read_text())


def test_a_staged_eagle3_head_in_speculators_format_that_vllm_reads_passes(tmp_path):
    plan = _eagle3_plan(tmp_path)
    _stage_draft(tmp_path, plan, _redhat_fixture())
    check_drafter(plan, tmp_path)


def test_a_speculators_config_with_an_unregistered_model_type_is_refused_before_vllm_starts(tmp_path):
    """The public copy of RedHatAI's config reproduced by sglang's TestEagle3SpeculatorConfigLoading spells
    speculators_model_type "qwen3" (fixtures/README.md); vLLM 0.29.0 refuses it (speculators/base.py:53-58)."""
    plan = _eagle3_plan(tmp_path)
    _stage_draft(tmp_path, plan, {**_redhat_fixture(), "speculators_model_type": "qwen3"})
    with pytest.raises(BuildError) as err:
        check_drafter(plan, tmp_path)
    text = str(err.value)
    assert "draft RedHatAI/Qwen3-32B-speculator.eagle3@dc84fe7ff1db31efa824776f49c141fc8195eb47" in text
    assert "speculators_model_type='qwen3' is not an algorithm vLLM 0.29.0 registers" in text
    assert "stage a revision of the draft whose config.json says 'eagle3'" in text


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"speculators_model_type": "dflash"}, "speculators_model_type='dflash' but the profile runs decoding.method"),
        (
            {"speculators_config": {"proposal_methods": [], "verifier": {"name_or_path": "Qwen/Qwen3-32B"}}},
            "speculative_tokens is missing",
        ),
        ({"transformer_layer_config": {"model_type": "mistral"}}, "transformer_layer_config.model_type='mistral'"),
    ],
)
def test_a_speculators_config_vllm_would_reject_names_what_is_wrong(change, problem):
    from serving_stacks.vllm_neuron import speculators_problems

    problems = speculators_problems({**_redhat_fixture(), **change}, "eagle3")
    assert any(problem in p for p in problems), problems


def test_a_draft_outside_the_speculators_format_is_left_to_vllm():
    from serving_stacks.vllm_neuron import speculators_problems

    assert speculators_problems({"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama"}, "eagle3") == []


def test_the_plan_shows_the_compile_route(plugin):
    config, profile = plugin
    assert "compile route: VLLM_NEURON_BACKEND=neuron_native\n" in cache_plan(config, profile).render()
