"""The Job that stages Hugging Face checkpoints into the bucket from inside the cluster.

`make stage` (and `make build`, for the models its profile needs) renders it with `python -m ops.stage_checkpoints`.
It runs where the download is fast and nothing is copied twice: on the Trainium2 node, which is up anyway,
has a 1 TiB root volume and already holds the serving image (which ships huggingface_hub). It claims no
devices, so it runs next to the services. Its Pod Identity role can write only the checkpoint prefixes of
the configured models.
"""

from __future__ import annotations

import hashlib

import cdk8s
from cdk8s_plus_34 import k8s
from constructs import Construct

from charts.code_bundle import (
    BUILD_CODE_CONFIG_MAP,
    CONFIG_PATH,
    archived_requirements,
    install_locked,
    job_code_env,
    job_code_mounts,
    job_code_volumes,
    unpack_command,
)
from charts.neuron_claim import gi, trn2_node_placement
from charts.pod_security import image_user
from config.labels import workload_labels
from config.schema import DeploymentConfig

STAGE_SERVICE_ACCOUNT = "checkpoints-stage"
HF_TOKEN_SECRET = "hf-token"  # optional Secret (key "token") for gated or private models
SCRATCH_PATH = "/scratch"
STAGE_SCRATCH_GIB = 300  # Qwen3-32B + Qwen3-1.7B are ~70 GB; room for a 100B+ model set (the node has 1 TiB)
STAGE_DEADLINE_HOURS = 4
STAGE_CPU = 8  # parallel download and upload streams; the services leave more than this free on the node
STAGE_MEMORY_GIB = 32


def stage_job_name(config: DeploymentConfig, keys: list[str]) -> str:
    """Named by the exact models and revisions it stages, so a re-run of the same set is the same Job."""
    pinned = ",".join(f"{config.models[k].hf_id}@{config.models[k].revision}" for k in sorted(keys))
    return f"stage-checkpoints-{hashlib.sha256(pinned.encode()).hexdigest()[:12]}"


def stage_script(keys: list[str], bucket_name: str) -> str:
    models = " ".join(f"--model {k}" for k in keys)
    return "\n".join(
        [
            "set -euo pipefail",
            f"trap 'rm -rf {SCRATCH_PATH}/hf {SCRATCH_PATH}/hf-home' EXIT",  # the node's disk is shared with the build and the services
            unpack_command(),
            install_locked(
                archived_requirements("stage"), unless_importable="boto3, huggingface_hub"
            ),  # hash-checked, only if missing
            f"python3 -m model_build --config {CONFIG_PATH}/config.yaml --bucket {bucket_name} "
            f"stage-checkpoints {models} --scratch {SCRATCH_PATH}/hf",
        ]
    )


class StageCheckpointsJob(Construct):
    """Download the pinned revisions and publish them to checkpoints/<hf_id>/<revision>/, manifest last."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: DeploymentConfig, keys: list[str], bucket_name: str
    ) -> None:
        super().__init__(scope, construct_id)
        self.name = stage_job_name(config, keys)
        labels = workload_labels("stage-checkpoints")
        fixed = {"cpu": k8s.Quantity.from_number(STAGE_CPU), "memory": gi(STAGE_MEMORY_GIB)}
        self.job = k8s.KubeJob(
            self,
            "Job",
            metadata=k8s.ObjectMeta(name=self.name, labels=labels),
            spec=k8s.JobSpec(
                backoff_limit=2,  # a retry resumes: finished files are skipped, partial uploads continue
                active_deadline_seconds=STAGE_DEADLINE_HOURS * 3600,
                ttl_seconds_after_finished=24 * 3600,
                template=k8s.PodTemplateSpec(
                    metadata=k8s.ObjectMeta(labels=labels),
                    spec=k8s.PodSpec(
                        restart_policy="Never",
                        service_account_name=STAGE_SERVICE_ACCOUNT,
                        **trn2_node_placement(),
                        containers=[
                            k8s.Container(
                                name="stage",
                                image=config.profiles[0].image.uri,
                                command=["/bin/bash", "-c", stage_script(keys, bucket_name)],
                                env=[
                                    *job_code_env(config.region),
                                    k8s.EnvVar(name="HF_HOME", value=f"{SCRATCH_PATH}/hf-home"),
                                    k8s.EnvVar(
                                        name="HF_TOKEN",
                                        value_from=k8s.EnvVarSource(
                                            secret_key_ref=k8s.SecretKeySelector(
                                                name=HF_TOKEN_SECRET, key="token", optional=True
                                            )
                                        ),
                                    ),
                                ],
                                resources=k8s.ResourceRequirements(requests=fixed, limits=fixed),
                                security_context=image_user(),
                                volume_mounts=[
                                    k8s.VolumeMount(name="scratch", mount_path=SCRATCH_PATH),
                                    *job_code_mounts(),
                                ],
                            )
                        ],
                        volumes=[
                            k8s.Volume(
                                name="scratch",
                                empty_dir=k8s.EmptyDirVolumeSource(size_limit=gi(STAGE_SCRATCH_GIB)),
                            ),
                            *job_code_volumes(BUILD_CODE_CONFIG_MAP),
                        ],
                    ),
                ),
            ),
        )


def render_stage_job(config: DeploymentConfig, keys: list[str], account: str) -> list[dict]:
    app = cdk8s.App()
    chart = cdk8s.Chart(app, "stage", namespace=config.namespace, disable_resource_name_hashes=True)
    StageCheckpointsJob(chart, "job", config=config, keys=keys, bucket_name=config.models_bucket_name(account))
    return chart.to_json()
