"""One vLLM service on Trainium2: the baseline and the speculative service are this construct, two profiles."""

from __future__ import annotations

from cdk8s_plus_34 import k8s
from constructs import Construct

from charts.code_bundle import CODE_PATH, CodeBundle
from charts.metrics_proxy import metrics_proxy_container
from charts.models_volume import ModelsVolume
from charts.neuron_claim import NeuronClaimTemplate, gi, trn2_placement, trn2_resources
from charts.pod_security import image_user, non_root
from charts.vllm_args import vllm_args, vllm_env
from config import labels as k8s_labels
from config.api_key import API_KEY_ENV, API_KEY_SECRET_KEY
from config.bucket_layout import MOUNT_PATH
from config.node_scaling import SAFE_TO_EVICT_ANNOTATION
from config.profiles import ServingProfile
from config.schema import DeploymentConfig
from model_build.artifact_plan import artifact_base
from model_build.digest import profile_digest
from serving_stacks import stack_named
from serving_stacks.contract import LocalCache

SHM_GIB = 128  # as the reference deployment: NxDI stages tensors through shared memory


def service_account_name(profile: ServingProfile) -> str:
    return f"{profile.name}-vllm"


def labels(profile: ServingProfile) -> dict[str, str]:
    return {
        **k8s_labels.vllm_selector(profile.name),
        k8s_labels.PART_OF: k8s_labels.PROJECT,
        k8s_labels.PROFILE: profile.name,
        k8s_labels.MODEL: profile.target,
        k8s_labels.DECODING: profile.decoding.method,
    }


class VllmService(Construct):
    """Deployment + ClusterIP Service + DRA claim template + S3 volume + service account for one profile.

    The pod claims its Neuron devices through DRA, mounts the bucket read-only, and an init container
    checks the artifact manifest against the profile before vLLM starts, so vLLM never compiles on start.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        profile: ServingProfile,
        bucket_name: str,
        code: CodeBundle,
    ) -> None:
        super().__init__(scope, construct_id)
        self.profile = profile
        self.name = profile.name
        ns = config.namespace
        self.labels = labels(profile)

        self.claim_template = NeuronClaimTemplate(
            self,
            "Claim",
            name=f"{profile.name}-neuron",
            placement=profile.placement,
            instance_type=config.trn2_nodes.instance_type,
        )
        self.volume = ModelsVolume(
            self,
            "Models",
            name=f"{profile.name}-models",
            namespace=ns,
            bucket_name=bucket_name,
            region=config.region,
            cache_gib=profile.mount_cache_gib,
        )
        # No Kubernetes API token in the pod: nothing in it calls the API. Its AWS credentials do not need one: EKS Pod
        # Identity adds its own projected token (audience pods.eks.amazonaws.com) to the pod, and the Mountpoint CSI
        # driver gets the pod's tokens from the kubelet at mount time; automounting governs neither.
        self.service_account = k8s.KubeServiceAccount(
            self,
            "ServiceAccount",
            metadata=k8s.ObjectMeta(name=service_account_name(profile), labels=self.labels),
            automount_service_account_token=False,
        )

        digest = profile_digest(config, profile)
        self.deployment = k8s.KubeDeployment(
            self,
            "Deployment",
            metadata=k8s.ObjectMeta(name=profile.name, labels=self.labels),
            spec=k8s.DeploymentSpec(
                # With autoscaling the ScaledObject's HPA owns the count (at least profile.replicas): a replicas field
                # here would reset it on every apply (Kubernetes HPA docs, "Migrating Deployments to autoscaling").
                replicas=None if config.scaling.enabled else profile.replicas,
                # Recreate: a rolling update would need a second set of devices that the node does not have.
                strategy=k8s.DeploymentStrategy(type="Recreate"),
                selector=k8s.LabelSelector(match_labels=k8s_labels.vllm_selector(profile.name)),
                template=k8s.PodTemplateSpec(
                    # Never evicted by the Cluster Autoscaler to consolidate nodes: moving a replica costs a whole
                    # time-to-Ready; KEDA removes replicas and the autoscaler then removes the empty node
                    # (config/node_scaling.py).
                    metadata=k8s.ObjectMeta(
                        labels=self.labels,
                        annotations={k8s_labels.ARTIFACT_DIGEST: digest, SAFE_TO_EVICT_ANNOTATION: "false"},
                    ),
                    spec=k8s.PodSpec(
                        service_account_name=service_account_name(profile),
                        automount_service_account_token=False,
                        **trn2_placement(self.claim_template.name),
                        termination_grace_period_seconds=60,
                        init_containers=[verify_artifact_container(config, profile)],
                        containers=[
                            vllm_container(config, profile),
                            metrics_proxy_container(
                                vllm_port=profile.port, metrics_path=stack_named(profile.image.stack).METRICS_PATH
                            ),
                        ],
                        volumes=pod_volumes(self.volume.claim_name, code, profile),
                    ),
                ),
            ),
        )
        self.service = k8s.KubeService(
            self,
            "Service",
            metadata=k8s.ObjectMeta(name=profile.name, labels=self.labels),
            spec=k8s.ServiceSpec(
                type="ClusterIP",
                selector=k8s_labels.vllm_selector(profile.name),
                ports=[
                    k8s.ServicePort(
                        name="http", port=profile.port, target_port=k8s.IntOrString.from_string(port_name(profile))
                    )
                ],
            ),
        )


MODELS_MOUNT = k8s.VolumeMount(name="models", mount_path=MOUNT_PATH, read_only=True)


def verify_artifact_container(config: DeploymentConfig, profile: ServingProfile) -> k8s.Container:
    """The init container: the mounted artifact must match the profile before vLLM starts (never a compile); a
    stack with a local cache then gets the artifact copied there, built by this pod's own vLLM command line. The command is the artifact plan's, as
    `model_build plan` shows it."""
    return k8s.Container(
        name="verify-artifact",
        image=profile.image.uri,
        command=artifact_base(config, profile).check_mounted_argv(serve_argv=["vllm", *vllm_args(config, profile)]),
        env=[k8s.EnvVar(name="PYTHONPATH", value=CODE_PATH)],
        # Stdlib Python reading the mount needs no root: Mountpoint CSI driver v2 runs Mountpoint itself as non-root
        # and opens the mount to the workload's users (its docs/UPGRADING_TO_V2.md).
        security_context=non_root(),
        resources=k8s.ResourceRequirements(
            requests={"cpu": k8s.Quantity.from_string("500m"), "memory": gi(1)},
            limits={"cpu": k8s.Quantity.from_string("1"), "memory": gi(1)},
        ),
        volume_mounts=[
            MODELS_MOUNT,
            k8s.VolumeMount(name="code", mount_path=CODE_PATH, read_only=True),
            *local_cache_mounts(profile),
        ],
    )


def local_cache(profile: ServingProfile) -> LocalCache | None:
    return stack_named(profile.image.stack).LOCAL_CACHE


def local_cache_mounts(profile: ServingProfile) -> list[k8s.VolumeMount]:
    """The node-local cache of a stack that has one (an emptyDir, as AWS's DRA sample keeps it)."""
    cache = local_cache(profile)
    return [] if cache is None else [k8s.VolumeMount(name="vllm-cache", mount_path=cache.path)]


def vllm_container(config: DeploymentConfig, profile: ServingProfile) -> k8s.Container:
    """vLLM on the claimed devices, with the profile's command line and environment and health probes."""
    command = stack_named(profile.image.stack).serve_command(
        code_path=CODE_PATH, port=profile.port, profile_name=profile.name
    )
    return k8s.Container(
        name="vllm",
        image=profile.image.uri,
        command=command,
        args=vllm_args(config, profile),
        env=[
            *(k8s.EnvVar(name=k, value=v) for k, v in sorted(vllm_env(config, profile).items())),
            *api_key_env(config),
        ],
        security_context=image_user(),
        ports=[k8s.ContainerPort(name=port_name(profile), container_port=profile.port)],
        resources=trn2_resources(config.trn2_nodes.instance, profile.placement.devices),
        volume_mounts=[
            MODELS_MOUNT,
            k8s.VolumeMount(name="dshm", mount_path="/dev/shm"),
            k8s.VolumeMount(name="code", mount_path=CODE_PATH, read_only=True),  # the stack's start-up guard
            *local_cache_mounts(profile),
        ],
        **health_probes(profile),
    )


def port_name(profile: ServingProfile) -> str:
    """The vLLM container's one port (API, health and /metrics): named as the stack says. The managed scraper does
    not use it: it keeps the metrics-only sidecar's port (charts/metrics_proxy.py), since this port serves /v1 too."""
    return stack_named(profile.image.stack).METRICS_PORT_NAME


def api_key_env(config: DeploymentConfig) -> list[k8s.EnvVar]:
    """VLLM_API_KEY from the configured Secret: vLLM then requires `Authorization: Bearer <key>` on /v1 (an env
    var, not `--api-key`, so the key never shows in the pod's command line). None configured: no key."""
    if config.api_key_secret is None:
        return []
    ref = k8s.SecretKeySelector(name=config.api_key_secret, key=API_KEY_SECRET_KEY, optional=False)
    return [k8s.EnvVar(name=API_KEY_ENV, value_from=k8s.EnvVarSource(secret_key_ref=ref))]


def health_probes(profile: ServingProfile) -> dict[str, k8s.Probe]:
    """Startup allows `startup_timeout_minutes` to load the artifact (30 s periods); then readiness and liveness."""
    probe = k8s.HttpGetAction(path="/health", port=k8s.IntOrString.from_string(port_name(profile)))
    return {
        "startup_probe": k8s.Probe(
            http_get=probe, period_seconds=30, timeout_seconds=10, failure_threshold=profile.startup_timeout_minutes * 2
        ),
        "readiness_probe": k8s.Probe(http_get=probe, period_seconds=10, timeout_seconds=5, failure_threshold=3),
        "liveness_probe": k8s.Probe(http_get=probe, period_seconds=30, timeout_seconds=10, failure_threshold=4),
    }


def pod_volumes(models_claim: str, code: CodeBundle, profile: ServingProfile) -> list[k8s.Volume]:
    """The bucket (read-only), shared memory for NxDI, the verify script and the stack's local cache, if any."""
    cache = local_cache(profile)
    local = (
        []
        if cache is None
        else [k8s.Volume(name="vllm-cache", empty_dir=k8s.EmptyDirVolumeSource(size_limit=gi(cache.size_gib)))]
    )
    return [
        k8s.Volume(
            name="models",
            persistent_volume_claim=k8s.PersistentVolumeClaimVolumeSource(claim_name=models_claim, read_only=True),
        ),
        k8s.Volume(name="dshm", empty_dir=k8s.EmptyDirVolumeSource(medium="Memory", size_limit=gi(SHM_GIB))),
        code.volume(),
        *local,
    ]
