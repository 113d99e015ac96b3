"""The build plan of a profile: NxDI keyword arguments, the equivalent inference_demo command, destinations.

Pure and offline. `compile` executes exactly this plan, and tests check every keyword against the
parameters NxDI accepts at the pinned release (NeuronConfig silently drops keys it does not know).

NxDI facts are pinned to aws-neuron/neuronx-distributed-inference tag v0.6.10598 (Neuron SDK 2.26,
the NxDI inside the 0.9.1-neuronx-py311-sdk2.26.1 image); see tests/model_build/fixtures/.
"""

from __future__ import annotations

import copy
import json
import shlex
from dataclasses import dataclass
from typing import Any, Unpack

from config.bucket_layout import MANIFEST_NAME, artifact_prefix, checkpoint_prefix, manifest_key, mounted
from config.profiles import DraftSpeculation, HfModel, ServingProfile
from config.schema import DeploymentConfig
from model_build.artifact_plan import ArtifactPlan, BuildOptions, PlanLocations, artifact_base
from model_build.compile import compile_profile
from model_build.errors import BuildError, build_command
from serving_pod.manifest import BuildRecord
from serving_stacks import stack_named
from serving_stacks.contract import ArtifactKind

# Which NxDI release each Neuron SDK line ships (the SDK release notes / DLC Dockerfiles pin these).
NXDI_RELEASE_BY_SDK = {"2.26": "v0.6.10598"}
CHECKED_NXDI_RELEASE = "v0.6.10598"  # the release whose parameter list the tests hold

# inference_demo's `run` requires --prompt even with --compile-only (inference_demo.py:110).
DEMO_PROMPT = "The capital of France is"


@dataclass(frozen=True)
class NxdiModel:
    """An NxDI model family: the application class and the names other tools use for it."""

    module: str
    class_name: str
    demo_model_type: str  # inference_demo --model-type (inference_demo.py:50-64, MODEL_TYPES)
    hf_model_type: str  # "model_type" in the checkpoint's config.json

    @property
    def qualified_name(self) -> str:
        return f"{self.module}.{self.class_name}"


# Keyed by the config's tokenizer_family. Qwen3: models/qwen3/modeling_qwen3.py:50-239 (get_config_cls() ->
# Qwen3InferenceConfig, get_neuron_config_cls() -> Qwen3NeuronConfig, _model_cls = NeuronQwen3Model).
MODEL_FAMILIES: dict[str, NxdiModel] = {
    "qwen3": NxdiModel(
        module="neuronx_distributed_inference.models.qwen3.modeling_qwen3",
        class_name="NeuronQwen3ForCausalLM",
        demo_model_type="qwen3",
        hf_model_type="qwen3",
    ),
}


def model_path(models_root: str, model: HfModel) -> str:
    """Local directory of a staged checkpoint (a path, never a hub id: Qwen3 small models tie embeddings)."""
    return mounted(checkpoint_prefix(model.hf_id, model.revision), models_root)


@dataclass(frozen=True)
class BuildPlan(ArtifactPlan):
    """The NxDI compile of a legacy-v0 profile, on top of what every artifact plan has."""

    image: str
    sdk_version: str
    nxdi_release: str | None
    model: NxdiModel
    target_key: str
    target: HfModel
    target_path: str
    target_kwargs: dict[str, Any]
    draft_key: str | None
    draft: HfModel | None
    draft_path: str | None
    draft_kwargs: dict[str, Any] | None

    @property
    def speculative(self) -> bool:
        return self.draft_kwargs is not None

    def build(self, options: BuildOptions) -> BuildRecord:
        """Compile with NxDI (only in the Neuron image: model_build.compile imports NxDI when it runs)."""
        return compile_profile(self, target_path=options.target_path, draft_path=options.draft_path)

    def inference_demo_argv(self) -> list[str]:
        """The same compile through NxDI's own CLI (top-level flags must come before `run`)."""
        argv = ["inference_demo", "--model-type", self.model.demo_model_type, "--task-type", "causal-lm", "run"]
        argv += ["--model-path", self.target_path, "--compiled-model-path", self.out_dir]
        for key, value in self.target_kwargs.items():
            if key == "on_device_sampling_config":
                argv += ["--on-device-sampling", "--top-k", str(value["top_k"])]
                if value.get("do_sample"):
                    argv.append("--do-sample")
            elif value is True:
                argv.append(_flag(key))
            elif value is not False:
                argv += [_flag(key), str(value)]
        if self.draft_path is not None:
            argv += ["--draft-model-path", self.draft_path]
        return [*argv, "--compile-only", "--prompt", DEMO_PROMPT]

    def destinations(self) -> dict[str, Any]:
        base = f"s3://{self.bucket}/"
        checkpoints = {self.target_key: base + checkpoint_prefix(self.target.hf_id, self.target.revision)}
        if self.draft is not None and self.draft_key is not None:
            checkpoints[self.draft_key] = base + checkpoint_prefix(self.draft.hf_id, self.draft.revision)
        return {
            "bucket": self.bucket,
            "artifacts": base + artifact_prefix(self.digest),
            "manifest": base + manifest_key(artifact_prefix(self.digest)),
            "checkpoints": checkpoints,
        }

    def commands(self) -> dict[str, str]:
        return {
            "build": build_command(self.profile),
            "stage": "python -m model_build stage-checkpoints "
            + " ".join(f"--model {k}" for k in (self.target_key, self.draft_key) if k),
            "compile": f"python -m model_build compile {self.profile} --out {shlex.quote(self.out_dir)}",
            "publish": f"python -m model_build publish {self.profile} --from {shlex.quote(self.out_dir)}",
            "verify": f"python -m model_build verify {self.profile} --deep",
        }

    def to_json(self) -> dict[str, Any]:
        fused = None
        if self.draft_path is not None:
            fused = {
                "worker_cls": f"{self.model.class_name}._model_cls",
                "draft_config": "draft InferenceConfig (below)",
                "draft_model_path": self.draft_path,
            }
        return {
            "profile": self.profile,
            "digest": self.digest,
            "inputs": self.inputs,
            "image": self.image,
            "nxdi": {
                "release": self.nxdi_release,
                "checked_against": CHECKED_NXDI_RELEASE,
                "application_class": self.model.qualified_name,
                "target": {
                    "model": self.target.hf_id,
                    "model_path": self.target_path,
                    "neuron_config": self.target_kwargs,
                },
                "draft": None
                if self.draft is None
                else {"model": self.draft.hf_id, "model_path": self.draft_path, "neuron_config": self.draft_kwargs},
                "fused_spec_config": fused,
                "compiled_model_path": self.out_dir,
            },
            "inference_demo": self.inference_demo_argv(),
            "destinations": self.destinations(),
            "check_mounted": self.check_mounted_argv(),
            "commands": self.commands(),
        }

    def render(self) -> str:
        cls = self.model.class_name
        lines = [
            f"profile {self.profile}: artifact digest {self.digest}",
            f"image   {self.image} (Neuron SDK {self.sdk_version}, NxDI {self.nxdi_release or 'unknown'})",
        ]
        if self.nxdi_release != CHECKED_NXDI_RELEASE:
            lines.append(
                f"warning: keyword arguments were checked against NxDI {CHECKED_NXDI_RELEASE} (SDK 2.26) only; "
                f"re-check them for SDK {self.sdk_version} (NeuronConfig ignores unknown keys)"
            )
        lines += ["", f"target  {self.target.hf_id}@{self.target.revision}", f"        from {self.target_path}"]
        lines += _call("neuron_config = " + cls + ".get_neuron_config_cls()", self.target_kwargs)
        lines.append(f"config = {cls}.get_config_cls()(neuron_config, load_config=load_pretrained_config(TARGET_PATH))")
        if self.draft is not None and self.draft_kwargs is not None:
            lines += ["", f"draft   {self.draft.hf_id}@{self.draft.revision}", f"        from {self.draft_path}"]
            lines += [
                "draft_neuron_config = copy.deepcopy(neuron_config)",
                "draft_neuron_config.speculation_length = 0",
                "draft_neuron_config.enable_fused_speculation = False",
                "  # i.e. the equivalent of",
            ]
            lines += ["  " + line for line in _call(cls + ".get_neuron_config_cls()", self.draft_kwargs)]
            lines.append(
                f"draft_config = {cls}.get_config_cls()(draft_neuron_config, load_config=load_pretrained_config(DRAFT_PATH))"
            )
            lines.append(
                f"config.fused_spec_config = FusedSpecNeuronConfig({cls}._model_cls, draft_config=draft_config, "
                "draft_model_path=DRAFT_PATH)"
            )
        lines += [f"model = {cls}(TARGET_PATH, config)", f"model.compile({self.out_dir!r})", ""]
        lines.append("equivalent NxDI command line:")
        lines.append("  " + shlex.join(self.inference_demo_argv()))
        dest = self.destinations()
        lines += ["", "S3 destinations:", f"  artifact     {dest['artifacts']}  ({MANIFEST_NAME} written last)"]
        lines += [f"  checkpoint   {url}  ({key})" for key, url in dest["checkpoints"].items()]
        lines += ["", "commands:"] + [f"  {name:<8} {cmd}" for name, cmd in self.commands().items()]
        return "\n".join(lines) + "\n"


def build_plan(config: DeploymentConfig, profile: ServingProfile, **where: Unpack[PlanLocations]) -> BuildPlan:
    if stack_named(profile.image.stack).ARTIFACT is not ArtifactKind.NXDI_COMPILE:
        raise BuildError(
            f"profile {profile.name} runs on the {profile.image.stack} stack, whose artifact is its compile cache, "
            "not an NxDI compile; build it with model_build.compile_cache (make build does)"
        )
    target = config.models[profile.target]
    model = MODEL_FAMILIES.get(target.tokenizer_family)
    if model is None:
        raise BuildError(
            f"no NxDI model class is known for family {target.tokenizer_family!r} (model {profile.target}); "
            f"model_build knows {', '.join(sorted(MODEL_FAMILIES))}: add the family to model_build/plan.py MODEL_FAMILIES"
        )
    base = artifact_base(config, profile, **where)
    compiled = base.inputs["neuron_config"]  # the keywords the digest covers are the ones compile uses
    target_kwargs, draft_kwargs = copy.deepcopy(compiled["target"]), copy.deepcopy(compiled["draft"])
    draft_key = draft = draft_path = None
    if isinstance(profile.decoding, DraftSpeculation):
        draft_key = profile.decoding.draft
        draft = config.models[draft_key]
        if draft.tokenizer_family != target.tokenizer_family:
            raise BuildError(
                f"profile {profile.name}: fused speculation runs the draft {draft_key} with the target's model class "
                f"({model.class_name}); pick a draft of family {target.tokenizer_family!r}"
            )
        draft_path = model_path(base.models_root, draft)
    sdk = profile.image.sdk_version
    return BuildPlan(
        **vars(base),
        image=profile.image.uri,
        sdk_version=sdk,
        nxdi_release=NXDI_RELEASE_BY_SDK.get(".".join(sdk.split(".")[:2])),
        model=model,
        target_key=profile.target,
        target=target,
        target_path=model_path(base.models_root, target),
        target_kwargs=target_kwargs,
        draft_key=draft_key,
        draft=draft,
        draft_path=draft_path,
        draft_kwargs=draft_kwargs,
    )


def _flag(kwarg: str) -> str:
    return "--" + kwarg.replace("_", "-")


def _call(head: str, kwargs: dict[str, Any]) -> list[str]:
    lines = [f"{head}("]
    for key, value in kwargs.items():
        if key == "on_device_sampling_config":
            inner = ", ".join(f"{k}={v!r}" for k, v in value.items())
            lines.append(f"    {key}=OnDeviceSamplingConfig({inner}),")
        else:
            shown = json.dumps(value) if isinstance(value, str) else repr(value)
            lines.append(f"    {key}={shown},")
    return [*lines, ")"]
