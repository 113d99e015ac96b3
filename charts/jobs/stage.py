"""The Job that stages Hugging Face checkpoints into the bucket from inside the cluster.

`make stage` (and `make build`, for the models its profile needs) renders it with `python -m ops.stage_checkpoints`.
It runs where the download is fast and nothing is copied twice: on the Trainium2 node, which is up anyway,
has a 1 TiB root volume and already holds the serving image (which ships huggingface_hub). It claims no
devices, so it runs next to the services. Its Pod Identity role can write only the checkpoint prefixes of
the configured models.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

import cdk8s
from cdk8s_plus_34 import k8s
from constructs import Construct

from charts.code_bundle import BUILD_CODE_CONFIG_MAP, CONFIG_PATH, archived_requirements
from charts.jobs.job import SCRATCH_PATH, ScriptJob, code_volumes, job_script, scratch_volume
from charts.neuron_claim import gi, trn2_node_placement
from charts.pod_security import image_user
from config.labels import workload_labels
from config.schema import DeploymentConfig

STAGE_SERVICE_ACCOUNT = "checkpoints-stage"
HF_TOKEN_SECRET = "hf-token"  # optional Secret (key "token") for gated or private models
STAGE_SCRATCH_GIB = 300  # Qwen3-32B + Qwen3-1.7B are ~70 GB; room for a 100B+ model set (the node has 1 TiB)
STAGE_DEADLINE = timedelta(hours=4)
STAGE_CPU = 8  # parallel download and upload streams; the services leave more than this free on the node
STAGE_MEMORY_GIB = 32


def stage_job_name(config: DeploymentConfig, keys: list[str]) -> str:
    """Named by the exact models and revisions it stages, so a re-run of the same set is the same Job."""
    pinned = ",".join(f"{config.models[k].hf_id}@{config.models[k].revision}" for k in sorted(keys))
    return f"stage-checkpoints-{hashlib.sha256(pinned.encode()).hexdigest()[:12]}"


def stage_script(keys: list[str], bucket_name: str) -> str:
    models = " ".join(f"--model {k}" for k in keys)
    return job_script(
        on_exit=f"rm -rf {SCRATCH_PATH}/hf {SCRATCH_PATH}/hf-home",  # the node's disk is shared with the build and the services
        requirements=archived_requirements("stage"),
        unless_importable="boto3, huggingface_hub",  # hash-checked, only if missing
        steps=[
            f"python3 -m model_build --config {CONFIG_PATH}/config.yaml --bucket {bucket_name} "
            f"stage-checkpoints {models} --scratch {SCRATCH_PATH}/hf"
        ],
    )


class StageCheckpointsJob(ScriptJob):
    """Download the pinned revisions and publish them to checkpoints/<hf_id>/<revision>/, manifest last."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: DeploymentConfig, keys: list[str], bucket_name: str
    ) -> None:
        fixed = {"cpu": k8s.Quantity.from_number(STAGE_CPU), "memory": gi(STAGE_MEMORY_GIB)}
        token = k8s.EnvVarSource(secret_key_ref=k8s.SecretKeySelector(name=HF_TOKEN_SECRET, key="token", optional=True))
        super().__init__(
            scope,
            construct_id,
            name=stage_job_name(config, keys),
            labels=workload_labels("stage-checkpoints"),
            container="stage",
            image=config.profiles[0].image.uri,
            script=stage_script(keys, bucket_name),
            region=config.region,
            service_account=STAGE_SERVICE_ACCOUNT,
            placement=trn2_node_placement(),
            resources=k8s.ResourceRequirements(requests=fixed, limits=fixed),
            security_context=image_user(),
            env=[
                k8s.EnvVar(name="HF_HOME", value=f"{SCRATCH_PATH}/hf-home"),
                k8s.EnvVar(name="HF_TOKEN", value_from=token),
            ],
            volumes=[scratch_volume(STAGE_SCRATCH_GIB), *code_volumes(BUILD_CODE_CONFIG_MAP)],
            retries=2,  # a retry resumes: finished files are skipped, partial uploads continue
            deadline=STAGE_DEADLINE,
            keep_finished=timedelta(days=1),
        )


def render_stage_job(config: DeploymentConfig, keys: list[str], account: str) -> list[dict]:
    app = cdk8s.App()
    chart = cdk8s.Chart(app, "stage", namespace=config.namespace, disable_resource_name_hashes=True)
    StageCheckpointsJob(chart, "job", config=config, keys=keys, bucket_name=config.models_bucket_name(account))
    return chart.to_json()
