"""The compile-and-publish Job for one serving profile, on a Trainium2 node, in the serving image.

`make build PROFILE=...` renders it with `python -m ops.build_artifact`, frees the profile's devices by scaling
its Deployment to zero, applies the Job, follows its log and scales the Deployment back.
"""

from __future__ import annotations

import shlex
from datetime import timedelta

import cdk8s
from cdk8s_plus_34 import k8s
from constructs import Construct

from charts.code_bundle import (
    BENCH_ONLY_CONFIG,
    BUILD_CODE_CONFIG_MAP,
    CONFIG_PATH,
    SHARED_PACKAGES,
    CodeArchive,
    archived_requirements,
    locked_requirements,
    own_code_files,
    python_files,
)
from charts.jobs.job import SCRATCH_PATH, JobVolume, ScriptJob, code_volumes, job_script, scratch_volume
from charts.models_volume import ModelsVolume
from charts.neuron_claim import NeuronClaimTemplate, trn2_placement, trn2_resources
from charts.pod_security import image_user
from charts.vllm_args import vllm_args
from config.bucket_layout import MOUNT_PATH
from config.labels import ARTIFACT_DIGEST, PROFILE, workload_labels
from config.profiles import ServingProfile
from config.schema import ConfigError, DeploymentConfig
from model_build.digest import profile_digest
from serving_stacks import stack_named

SCRATCH_GIB = 400  # Qwen3-32B artifacts are tens of GB; neuronx-cc work files need more
BUILD_DEADLINE = timedelta(hours=6)
STOP_MARGIN = timedelta(minutes=30)  # the compile gives up this long before the deadline, to say why itself


# The in-pod code model_build never imports: the serving pods get it from the verify-code ConfigMap
# (charts/serving_chart.py); the build ships the rest of serving_pod/ (the manifest, the init check it renders).
SERVING_ONLY = ("serving_pod/startup_guard.py",)


def build_code_files() -> list[str]:
    """model_build, the in-pod modules it writes and renders through (serving_pod/), and the config it reads;
    pydantic and PyYAML come with vLLM in the serving image. The config's vocabulary of other layers (benchmark, API
    key, cost, labels) stays out: the archives have a size budget. The Job gets config/ and serving_stacks/ from the
    shared archive, the rest from its own (ModelBuildCode)."""
    return [
        f
        for f in python_files("model_build", "serving_pod", *SHARED_PACKAGES)
        if f not in BENCH_ONLY_CONFIG and f not in SERVING_ONLY
    ]


def build_requirements() -> dict[str, str]:
    """What the build and staging Jobs may install when the serving image lacks it, hash-pinned from the lock."""
    return {"build": locked_requirements("boto3"), "stage": locked_requirements("boto3", "huggingface-hub")}


def build_service_account(profile: ServingProfile) -> str:
    return f"{profile.name}-build"


def build_claim_template(profile: ServingProfile) -> str:
    return f"{profile.name}-build-neuron"


def build_volume_claim(profile: ServingProfile) -> str:
    return f"{profile.name}-build-models"


def build_job_name(config: DeploymentConfig, profile: ServingProfile) -> str:
    return f"build-{profile.name}-{profile_digest(config, profile)[:12]}"


def compile_command(config: DeploymentConfig, profile: ServingProfile, cli: str, out: str) -> str:
    """`model_build compile` with what the profile's stack needs besides (a stack that compiles by running vLLM
    gets the Deployment's own command line)."""
    extra = stack_named(profile.image.stack).compile_args(
        vllm_argv=["vllm", *vllm_args(config, profile)],
        port=profile.port,
        timeout_minutes=(BUILD_DEADLINE - STOP_MARGIN) // timedelta(minutes=1),
    )
    return f"{cli} compile {profile.name} --out {out}" + "".join(f" {shlex.quote(arg)}" for arg in extra)


BUILD_OUT = f"{SCRATCH_PATH}/artifact"  # where compile writes and publish reads


def build_job_env(profile: ServingProfile) -> dict[str, str]:
    """The stack's build environment (the route, the LNC, where it compiles), as the Job renders it."""
    return stack_named(profile.image.stack).build_job_env(
        logical_neuron_cores=profile.placement.logical_neuron_cores, scratch=SCRATCH_PATH, out_dir=BUILD_OUT
    )


def build_script(config: DeploymentConfig, profile: ServingProfile, bucket_name: str) -> str:
    out = BUILD_OUT
    cli = f"python3 -m model_build --config {CONFIG_PATH}/config.yaml --bucket {bucket_name} --models-root {MOUNT_PATH}"
    return job_script(
        requirements=archived_requirements("build"),
        unless_importable="boto3",  # publish needs boto3; hash-checked, only if missing
        steps=[
            f"{cli} plan {profile.name}",
            compile_command(config, profile, cli, out),
            f"{cli} publish {profile.name} --from {out}",
            f"{cli} verify {profile.name}",
        ],
    )


class ModelBuildCode(Construct):
    """The build Job's own code (model_build; config/ and serving_stacks/ are in the shared archive) and
    hash-pinned requirements. Applied as a chart group of its own: the archive is most of a manifest, and the
    kubectl handler's event limit applies per group."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.code = CodeArchive(
            self,
            "Code",
            name=BUILD_CODE_CONFIG_MAP,
            files=own_code_files(build_code_files()),
            requirements=build_requirements(),
        )


class ModelBuildSupport(Construct):
    """What a build Job needs per profile that `cdk deploy` applies once: a service account (its Pod Identity
    role writes only artifacts/<digest>/), a claim template and a volume."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig, bucket_name: str) -> None:
        super().__init__(scope, construct_id)
        for profile in config.profiles:
            k8s.KubeServiceAccount(
                self,
                f"{profile.name}-sa",
                metadata=k8s.ObjectMeta(name=build_service_account(profile)),
            )
            NeuronClaimTemplate(
                self,
                f"{profile.name}-claim",
                name=build_claim_template(profile),
                placement=profile.placement,
                instance_type=config.trn2_nodes.instance_type,
            )
            ModelsVolume(
                self,
                f"{profile.name}-models",
                name=build_volume_claim(profile),
                namespace=config.namespace,
                bucket_name=bucket_name,
                region=config.region,
                cache_gib=0,
            )


class ModelBuildJob(ScriptJob):
    """Compile with the same image and device claim shape as the service it builds for, then publish."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        profile: ServingProfile,
        bucket_name: str,
    ) -> None:
        models = JobVolume(
            volume=k8s.Volume(
                name="models",
                persistent_volume_claim=k8s.PersistentVolumeClaimVolumeSource(
                    claim_name=build_volume_claim(profile), read_only=True
                ),
            ),
            mount=k8s.VolumeMount(name="models", mount_path=MOUNT_PATH, read_only=True),
        )
        super().__init__(
            scope,
            construct_id,
            name=build_job_name(config, profile),
            labels={
                **workload_labels("model-build"),
                PROFILE: profile.name,
                ARTIFACT_DIGEST: profile_digest(config, profile),
            },
            container="build",
            image=profile.image.uri,
            script=build_script(config, profile, bucket_name),
            region=config.region,
            service_account=build_service_account(profile),
            placement=trn2_placement(build_claim_template(profile)),
            resources=trn2_resources(config.trn2_nodes.instance, profile.placement.devices),
            security_context=image_user(),
            env=[k8s.EnvVar(name=k, value=v) for k, v in build_job_env(profile).items()],
            volumes=[models, scratch_volume(SCRATCH_GIB), *code_volumes(BUILD_CODE_CONFIG_MAP)],
            retries=1,
            deadline=BUILD_DEADLINE,
            keep_finished=timedelta(days=1),
        )


def profile_of(config: DeploymentConfig, name: str) -> ServingProfile:
    try:
        return config.profile(name)
    except KeyError as err:
        raise ConfigError([str(err.args[0])]) from None


def render_build_job(config: DeploymentConfig, profile_name: str, account: str) -> list[dict]:
    profile = profile_of(config, profile_name)
    app = cdk8s.App()
    chart = cdk8s.Chart(app, "build", namespace=config.namespace, disable_resource_name_hashes=True)
    ModelBuildJob(chart, "job", config=config, profile=profile, bucket_name=config.models_bucket_name(account))
    return chart.to_json()
