"""compile: a clear exit 2 without NxDI; with stand-ins for NxDI, the exact call sequence of the plan."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from config.bucket_layout import BUILD_RECORD_NAME, MANIFEST_NAME
from model_build.cli import main
from model_build.compile import Nxdi, compile_profile, expected_outputs
from model_build.errors import BuildError
from model_build.plan import BuildPlan, build_plan
from serving_pod.manifest import BuildRecord, Manifest, ManifestFile, sha256_file


def test_without_nxdi_compile_exits_2_with_where_it_runs(capsys, tmp_path):
    code = main(["compile", "speculative", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert "neuronx-distributed-inference" in err and "No module named 'neuronx_distributed_inference'" in err
    assert "pytorch-inference-vllm-neuronx:0.9.1-neuronx-py311-sdk2.26.1-ubuntu22.04" in err
    assert "make build PROFILE=speculative" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


# --- stand-ins with the shapes of NxDI v0.6.10598 -----------------------------------------------------


class FakeNeuronConfig:
    """Like NeuronConfig: takes keyword arguments; refuses any key the pinned release does not pop."""

    known: ClassVar[set[str]] = set()

    def __init__(self, **kwargs: Any) -> None:
        unknown = set(kwargs) - self.known
        assert not unknown, f"NeuronConfig would silently ignore {unknown}"
        self.__dict__.update(kwargs)


class FakeSampling:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


class FakeInferenceConfig:
    def __init__(self, neuron_config: Any, fused_spec_config: Any = None, load_config: Any = None) -> None:
        self.neuron_config = neuron_config
        self.fused_spec_config = fused_spec_config
        load_config(self)


class FakeFusedSpec:
    def __init__(self, worker_cls: Any, draft_config: Any = None, draft_model_path: Any = None) -> None:
        self.worker_cls, self.draft_config, self.draft_model_path = worker_cls, draft_config, draft_model_path


class FakeModel:
    _model_cls = object()  # stands for NeuronQwen3Model
    built: ClassVar[list[FakeModel]] = []
    skip_outputs: ClassVar[set[str]] = set()

    def __init__(self, model_path: str, config: Any) -> None:
        self.model_path, self.config = model_path, config
        self.compiled_to: str | None = None
        FakeModel.built.append(self)

    @classmethod
    def get_neuron_config_cls(cls) -> type:
        return FakeNeuronConfig

    @classmethod
    def get_config_cls(cls) -> type:
        return FakeInferenceConfig

    def compile(self, out: str) -> None:
        self.compiled_to = out
        tp = self.config.neuron_config.tp_degree
        for name in [
            "neuron_config.json",
            "model.pt",
            *(f"weights/tp{r}_sharded_checkpoint.safetensors" for r in range(tp)),
        ]:
            if name not in self.skip_outputs:
                (Path(out) / name).parent.mkdir(parents=True, exist_ok=True)
                (Path(out) / name).write_bytes(b"x")


def _load_pretrained_config(path: str) -> Any:
    def load(config: Any) -> None:
        config.loaded_from = path

    return load


@pytest.fixture
def nxdi(nxdi_recorded) -> Nxdi:
    FakeNeuronConfig.known = set(nxdi_recorded["neuron_config_kwargs"])
    FakeModel.built = []
    FakeModel.skip_outputs = set()
    return Nxdi(FakeModel, FakeFusedSpec, FakeSampling, _load_pretrained_config)


def _stage(root: Path, hf_id: str, revision: str, *, model_type: str = "qwen3", manifest: bool = True) -> Path:
    """A staged checkpoint as the mount shows it: files plus the manifest stage-checkpoints wrote."""
    d = root / "checkpoints" / hf_id / revision
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"model_type": model_type}))
    (d / "model.safetensors").write_bytes(b"w" * 1000)
    if manifest:
        files = [ManifestFile(p.name, p.stat().st_size, sha256_file(p)) for p in sorted(d.iterdir())]
        inputs = {"kind": "checkpoint", "hf_id": hf_id, "revision": revision}
        (d / MANIFEST_NAME).write_text(Manifest(revision, inputs, files, created_at="t").to_json())
    return d


@pytest.fixture
def models_root(tmp_path: Path, default_config) -> Path:
    root = tmp_path / "models"
    for model in default_config.models.values():
        _stage(root, model.hf_id, model.revision)
    return root


def _plan(default_config, profile: str, models_root: Path, out: Path) -> BuildPlan:
    return build_plan(default_config, default_config.profile(profile), models_root=str(models_root), out_dir=str(out))


def test_fused_compile_builds_the_configs_of_the_plan(default_config, nxdi, models_root, tmp_path):
    plan = _plan(default_config, "speculative", models_root, tmp_path / "out")
    record = compile_profile(plan, nxdi=nxdi)

    (model,) = FakeModel.built
    config = model.config
    target = config.neuron_config
    assert {k: v for k, v in vars(target).items() if k != "on_device_sampling_config"} == {
        k: v for k, v in plan.target_kwargs.items() if k != "on_device_sampling_config"
    }
    assert target.on_device_sampling_config.kwargs == {"top_k": 1, "do_sample": False}
    assert model.model_path == config.loaded_from == plan.target_path
    fused = config.fused_spec_config
    assert fused.worker_cls is FakeModel._model_cls and fused.draft_model_path == plan.draft_path
    draft = fused.draft_config
    assert draft.loaded_from == plan.draft_path and draft.neuron_config is not target
    assert draft.neuron_config.speculation_length == 0 and draft.neuron_config.enable_fused_speculation is False
    same = {
        k
        for k in vars(target)
        if k not in ("speculation_length", "enable_fused_speculation", "on_device_sampling_config")
    }
    assert all(getattr(draft.neuron_config, k) == getattr(target, k) for k in same)
    assert target.speculation_length == 7 and target.enable_fused_speculation is True  # the copy left it alone

    assert model.compiled_to == plan.out_dir
    saved = BuildRecord.from_json((tmp_path / "out" / BUILD_RECORD_NAME).read_text())
    assert saved == record and saved.digest == plan.digest and saved.inputs == plan.inputs
    assert saved.neuron_config == {"target": plan.target_kwargs, "draft": plan.draft_kwargs}
    assert "python" in saved.builder


def test_baseline_compile_has_no_draft(default_config, nxdi, models_root, tmp_path):
    plan = _plan(default_config, "baseline", models_root, tmp_path / "out")
    compile_profile(plan, nxdi=nxdi)
    (model,) = FakeModel.built
    assert model.config.fused_spec_config is None
    assert not hasattr(model.config.neuron_config, "speculation_length")


def test_incomplete_output_is_not_recorded(default_config, nxdi, models_root, tmp_path):
    plan = _plan(default_config, "baseline", models_root, tmp_path / "out")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / BUILD_RECORD_NAME).write_text("{}")  # from an earlier build
    FakeModel.skip_outputs = {"weights/tp31_sharded_checkpoint.safetensors"}
    with pytest.raises(BuildError, match="tp31_sharded_checkpoint") as err:
        compile_profile(plan, nxdi=nxdi)
    assert err.value.code == 1
    assert not (tmp_path / "out" / BUILD_RECORD_NAME).exists()
    assert len(expected_outputs(plan)) == 2 + 32


def test_unstaged_checkpoint_names_the_stage_command(default_config, nxdi, tmp_path):
    plan = _plan(default_config, "speculative", tmp_path / "empty", tmp_path / "out")
    with pytest.raises(BuildError, match="stage-checkpoints --model qwen3-32b") as err:
        compile_profile(plan, nxdi=nxdi)
    assert err.value.code == 2 and not FakeModel.built


def test_half_staged_or_truncated_checkpoints_are_refused(default_config, nxdi, models_root, tmp_path):
    plan = _plan(default_config, "speculative", models_root, tmp_path / "out")
    draft_dir = Path(plan.draft_path)
    (draft_dir / "model.safetensors").write_bytes(b"w" * 10)
    with pytest.raises(BuildError, match="incomplete") as err:
        compile_profile(plan, nxdi=nxdi)
    assert err.value.code == 1 and "model.safetensors" in str(err.value)
    (draft_dir / MANIFEST_NAME).unlink()
    with pytest.raises(BuildError, match="staging never finished"):
        compile_profile(plan, nxdi=nxdi)


def test_explicit_local_paths_need_no_manifest_but_the_right_architecture(default_config, nxdi, tmp_path):
    plan = _plan(default_config, "speculative", tmp_path / "unused", tmp_path / "out")
    target = _stage(tmp_path / "local", "t", "r", manifest=False)
    draft = _stage(tmp_path / "local", "d", "r", model_type="llama", manifest=False)
    with pytest.raises(BuildError, match="'llama' model"):
        compile_profile(plan, nxdi=nxdi, target_path=str(target), draft_path=str(draft))
    draft = _stage(tmp_path / "local", "d2", "r", manifest=False)
    compile_profile(plan, nxdi=nxdi, target_path=str(target), draft_path=str(draft))
    assert FakeModel.built[-1].config.fused_spec_config.draft_model_path == str(draft)


def test_an_lnc_environment_override_is_refused(default_config, nxdi, models_root, tmp_path, monkeypatch):
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
    plan = _plan(default_config, "baseline", models_root, tmp_path / "out")
    with pytest.raises(BuildError, match="NEURON_LOGICAL_NC_CONFIG=1"):
        compile_profile(plan, nxdi=nxdi)


def test_an_nxdi_that_drops_a_keyword_is_caught(default_config, nxdi, models_root, tmp_path):
    class Forgetful(FakeNeuronConfig):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**{k: v for k, v in kwargs.items() if k != "save_sharded_checkpoint"})

    class OtherModel(FakeModel):
        @classmethod
        def get_neuron_config_cls(cls) -> type:
            return Forgetful

    plan = _plan(default_config, "baseline", models_root, tmp_path / "out")
    with pytest.raises(BuildError, match="did not apply save_sharded_checkpoint=True"):
        compile_profile(plan, nxdi=dataclasses.replace(nxdi, model_cls=OtherModel))
