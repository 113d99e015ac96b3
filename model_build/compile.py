"""Compile a profile's NxDI artifact into local scratch; runs only inside the Neuron image on a Trn2 node.

NxDI is imported lazily: everywhere else `compile` stops with exit code 2 and says where it runs.
The calls mirror NxDI v0.6.10598's own inference_demo.run_inference (see model_build/plan.py):
NeuronConfig -> InferenceConfig(load_config=load_pretrained_config(path)) -> for fused speculation a
deep-copied draft config wrapped in FusedSpecNeuronConfig -> model.compile(out). With
save_sharded_checkpoint=True the output holds neuron_config.json, model.pt and
weights/tp{rank}_sharded_checkpoint.safetensors (application_base.py:220-284), so serving never
re-shards from the original checkpoint. The build record (build-inputs.json) is written last.
"""

from __future__ import annotations

import copy
import importlib
import importlib.metadata
import json
import os
import platform
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from config.bucket_layout import BUILD_RECORD_NAME, MANIFEST_NAME
from config.exit_codes import EXIT_FAILED
from config.profiles import HfModel
from model_build.digest import ARTIFACT_SCHEMA
from model_build.errors import BuildError, build_command
from serving_pod.manifest import BuildRecord, Manifest, file_problems

if TYPE_CHECKING:  # model_build.plan imports this module to build its plans
    from model_build.plan import BuildPlan

# Versions recorded in the manifest's `builder` block (whatever of these the image has).
BUILDER_PACKAGES = (
    "neuronx-distributed-inference",
    "neuronx-distributed",
    "neuronx-cc",
    "torch-neuronx",
    "torch",
    "transformers",
    "libneuronxla",
)


@dataclass(frozen=True)
class Nxdi:
    """The NxDI entry points compile uses; tests pass stand-ins, the Neuron image the real ones."""

    model_cls: Any
    FusedSpecNeuronConfig: Any
    OnDeviceSamplingConfig: Any
    load_pretrained_config: Callable[[str], Any]


def import_nxdi(plan: BuildPlan) -> Nxdi:
    try:
        module = importlib.import_module(plan.model.module)
        nxdi_config = importlib.import_module("neuronx_distributed_inference.models.config")
        hf_adapter = importlib.import_module("neuronx_distributed_inference.utils.hf_adapter")
    except ImportError as err:
        raise BuildError(
            f"compile needs NxDI (neuronx-distributed-inference), which this Python does not have ({err}). "
            f"It runs only inside the Neuron image {plan.image} on a Trainium2 node, which the build Job provides. "
            f"Run: {build_command(plan.profile)}   (python -m model_build plan {plan.profile} shows what it compiles)"
        ) from None
    return Nxdi(
        model_cls=getattr(module, plan.model.class_name),
        FusedSpecNeuronConfig=nxdi_config.FusedSpecNeuronConfig,
        OnDeviceSamplingConfig=nxdi_config.OnDeviceSamplingConfig,
        load_pretrained_config=hf_adapter.load_pretrained_config,
    )


def builder_versions() -> dict[str, str]:
    versions = {"python": platform.python_version(), "model_build_artifact_schema": str(ARTIFACT_SCHEMA)}
    for name in BUILDER_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def check_checkpoint(path: str, key: str, model: HfModel, hf_model_type: str, *, require_manifest: bool) -> None:
    """A staged checkpoint is complete (its manifest's sizes hold) and is the architecture the plan expects."""
    root = Path(path)
    stage = f"python -m model_build stage-checkpoints --model {key}"
    if not (root / "config.json").is_file():
        raise BuildError(
            f"checkpoint of {key} ({model.hf_id}@{model.revision}) not found at {root} (no config.json); "
            f"stage it into the bucket first: {stage}"
        )
    manifest_path = root / MANIFEST_NAME
    if manifest_path.is_file():
        manifest = Manifest.from_json(manifest_path.read_text())
        if manifest.digest != model.revision:
            raise BuildError(
                f"{root} holds revision {manifest.digest}, the config pins {model.revision}; re-stage: {stage}",
                EXIT_FAILED,
            )
        problems = file_problems(root, manifest.files)
        if problems:
            raise BuildError(
                f"checkpoint {root} is incomplete: " + "; ".join(problems[:5]) + f". Re-stage it: {stage}",
                EXIT_FAILED,
            )
    elif require_manifest:
        raise BuildError(f"checkpoint {root} has no {MANIFEST_NAME}, so its staging never finished; re-run: {stage}")
    model_type = json.loads((root / "config.json").read_text()).get("model_type")
    if model_type != hf_model_type:
        raise BuildError(
            f"checkpoint {root} is a {model_type!r} model but {key} is configured as family {hf_model_type!r}; "
            "fix models.<key>.hf_id / tokenizer_family in the config"
        )


def expected_outputs(plan: BuildPlan) -> list[str]:
    """Files NxDI v0.6.10598 writes for this plan (application_base.py:269, :281, :220-238)."""
    tp = int(plan.target_kwargs["tp_degree"])
    return ["neuron_config.json", "model.pt", *(f"weights/tp{r}_sharded_checkpoint.safetensors" for r in range(tp))]


def compile_profile(
    plan: BuildPlan,
    *,
    target_path: str | None = None,
    draft_path: str | None = None,
    nxdi: Nxdi | None = None,
) -> BuildRecord:
    """Compile into plan.out_dir and record what was built; returns the record written last."""
    nxdi = nxdi or import_nxdi(plan)
    lnc_env = os.environ.get("NEURON_LOGICAL_NC_CONFIG")
    lnc = plan.target_kwargs["logical_nc_config"]
    if lnc_env is not None and lnc_env != str(lnc):
        raise BuildError(
            f"NEURON_LOGICAL_NC_CONFIG={lnc_env} is set and NxDI prefers it over logical_nc_config={lnc} "
            "(models/config.py:519-530); unset it or change placement.logical_neuron_cores"
        )
    target = target_path or plan.target_path
    check_checkpoint(target, plan.target_key, plan.target, plan.model.hf_model_type, require_manifest=not target_path)
    draft = None
    if plan.draft is not None and plan.draft_key is not None:
        draft = draft_path or plan.draft_path
        assert draft is not None
        check_checkpoint(draft, plan.draft_key, plan.draft, plan.model.hf_model_type, require_manifest=not draft_path)

    out = Path(plan.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / BUILD_RECORD_NAME).unlink(missing_ok=True)  # a stale record must never describe a new, failed build

    cls = nxdi.model_cls
    kwargs = dict(plan.target_kwargs)
    kwargs["on_device_sampling_config"] = nxdi.OnDeviceSamplingConfig(**kwargs["on_device_sampling_config"])
    neuron_config = cls.get_neuron_config_cls()(**kwargs)
    _check_applied(neuron_config, plan.target_kwargs)
    config = cls.get_config_cls()(neuron_config, load_config=nxdi.load_pretrained_config(target))
    if draft is not None:
        draft_neuron_config = copy.deepcopy(neuron_config)
        draft_neuron_config.speculation_length = 0
        draft_neuron_config.enable_fused_speculation = False
        draft_config = cls.get_config_cls()(draft_neuron_config, load_config=nxdi.load_pretrained_config(draft))
        config.fused_spec_config = nxdi.FusedSpecNeuronConfig(
            cls._model_cls, draft_config=draft_config, draft_model_path=draft
        )
    model = cls(target, config)
    model.compile(str(out))

    missing = [name for name in expected_outputs(plan) if not (out / name).is_file()]
    if missing:
        raise BuildError(
            f"compile returned but {out} lacks {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}; the "
            "artifact is incomplete and was not recorded. Check the compile log (a host OOM 'Killed' is the usual cause)",
            EXIT_FAILED,
        )
    record = BuildRecord(
        profile=plan.profile,
        digest=plan.digest,
        inputs=plan.inputs,
        builder=builder_versions(),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        neuron_config={"target": plan.target_kwargs, "draft": plan.draft_kwargs},
    )
    write_build_record(out, record)
    return record


def write_build_record(out: Path, record: BuildRecord) -> None:
    tmp = out / (BUILD_RECORD_NAME + ".tmp")
    tmp.write_text(record.to_json())
    tmp.replace(out / BUILD_RECORD_NAME)


def _check_applied(neuron_config: Any, kwargs: dict[str, Any]) -> None:
    """NeuronConfig drops unknown keys silently; fail if the image's NxDI did not take ours as given."""
    ignored = [
        key
        for key, value in kwargs.items()
        if key not in ("on_device_sampling_config", "torch_dtype") and getattr(neuron_config, key, None) != value
    ]
    if ignored:
        shown = ", ".join(f"{k}={kwargs[k]!r} (got {getattr(neuron_config, k, '<absent>')!r})" for k in ignored)
        raise BuildError(
            f"the NxDI in this image did not apply {shown}; it is not NxDI v0.6.10598. Compile with the image "
            "the profile names, or re-check model_build/plan.py against this NxDI release"
        )
