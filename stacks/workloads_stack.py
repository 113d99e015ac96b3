"""Workloads: the serving chart applied through the cluster's kubectl provider, plus each service's IAM role."""

from __future__ import annotations

from aws_cdk import Aws, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from charts.autoscaling import render_autoscaling
from charts.jobs.bench import BENCH_SERVICE_ACCOUNT
from charts.jobs.model_build import build_service_account
from charts.jobs.stage import STAGE_SERVICE_ACCOUNT
from charts.serving_chart import BASE, render_groups
from charts.vllm_service import service_account_name
from config.bucket_layout import RESULTS_PREFIX, artifact_prefix, checkpoint_prefix
from config.schema import DeploymentConfig, ServingProfile
from model_build.digest import profile_digest
from stacks.cluster_stack import ClusterStack
from stacks.constructs.pod_identity_role import PodIdentityRole
from stacks.nag import acknowledge


def checkpoint_prefixes(config: DeploymentConfig, keys: list[str]) -> list[str]:
    return [checkpoint_prefix(config.models[k].hf_id, config.models[k].revision) for k in keys]


def serving_read_prefixes(config: DeploymentConfig, profile: ServingProfile) -> list[str]:
    """The only bucket prefixes a service may read: its own artifact and the checkpoints it loads."""
    return [
        artifact_prefix(profile_digest(config, profile)),
        *checkpoint_prefixes(config, config.profile_models(profile)),
    ]


class WorkloadsStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: DeploymentConfig, cluster_stack: ClusterStack, **kwargs
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        cluster = cluster_stack.cluster
        bucket_name = config.models_bucket_name(Aws.ACCOUNT_ID)
        bucket = s3.Bucket.from_bucket_name(self, "ModelsBucket", bucket_name)

        nag_bucket = config.models_bucket_name("<AWS::AccountId>")
        endpoint_id = cluster_stack.s3_endpoint.endpoint_id
        self.serving_roles: dict[str, iam.Role] = {}
        self.build_roles: dict[str, iam.Role] = {}
        for profile in config.profiles:
            self.build_roles[profile.name] = self._build_role(config, profile, cluster, bucket, nag_bucket)
            _require_endpoint(self.build_roles[profile.name], bucket, endpoint_id)
            role = self._identity(
                config,
                cluster,
                service_account_name(profile),
                f"vLLM {profile.name}: read its own artifact and checkpoints from the models bucket",
            )
            prefixes = serving_read_prefixes(config, profile)
            _grant_reads(role, bucket, prefixes)
            _require_endpoint(role, bucket, endpoint_id)
            acknowledge(
                role,
                "IAM5",
                "GetObject is limited to this service's own content-addressed artifact prefix and the checkpoint "
                "prefixes of the models it loads; object ARNs under a prefix need a trailing wildcard.",
                tuple(f"[Resource::arn:<AWS::Partition>:s3:::{nag_bucket}/{p}*]" for p in prefixes),
            )
            self.serving_roles[profile.name] = role

        self.stage_role = self._stage_role(config, cluster, bucket, nag_bucket)
        self.bench_role = self._bench_role(config, cluster, bucket, nag_bucket)
        for writer in (self.stage_role, self.bench_role):
            _require_endpoint(writer, bucket, endpoint_id)

        # One manifest resource per chart group: each stays far below the kubectl handler's 256 KiB event
        # payload (an update carries old and new), and the groups apply after the base (the namespace).
        self.manifests: dict[str, eks.KubernetesManifest] = {}
        for group, objects in render_groups(config, bucket_name).items():
            manifest = eks.KubernetesManifest(self, f"k8s-{group}", cluster=cluster, manifest=objects, overwrite=True)
            if group != BASE:
                manifest.node.add_dependency(self.manifests[BASE])
            self.manifests[group] = manifest
        # DRA claims need the driver's DeviceClass; the S3 volumes need the CSI driver and Pod Identity agent.
        base = self.manifests[BASE]
        base.node.add_dependency(cluster_stack.neuron_dra)
        for addon in ("aws-mountpoint-s3-csi-driver", "eks-pod-identity-agent"):
            base.node.add_dependency(cluster_stack.addons[addon])
        # ScaledObjects (KEDA's CRDs) and the metrics scraper's RBAC, after the namespace and KEDA's chart.
        self.autoscaling = eks.KubernetesManifest(
            self,
            "k8s-autoscaling",
            cluster=cluster,
            manifest=render_autoscaling(config, cluster_stack.metrics.query_url),
            overwrite=True,
        )
        self.autoscaling.node.add_dependency(base, cluster_stack.keda.chart)

    def _build_role(
        self,
        config: DeploymentConfig,
        profile: ServingProfile,
        cluster: eks.ICluster,
        bucket: s3.IBucket,
        nag_bucket: str,
    ) -> iam.Role:
        """The model-build Job reads the checkpoints it compiles and writes only its own artifact prefix."""
        role = self._identity(
            config,
            cluster,
            build_service_account(profile),
            f"model build {profile.name}: read checkpoints, write artifacts/<digest>/ only",
        )
        artifact = artifact_prefix(profile_digest(config, profile))
        reads = checkpoint_prefixes(config, config.profile_models(profile))
        _grant_reads(role, bucket, reads)
        _grant_uploads(role, bucket, [artifact])
        acknowledge(
            role,
            "IAM5",
            "The build reads only the checkpoint prefixes of the models it compiles and writes only its own "
            "content-addressed artifact prefix; object ARNs under a prefix need a trailing wildcard.",
            tuple(f"[Resource::arn:<AWS::Partition>:s3:::{nag_bucket}/{p}*]" for p in [artifact, *reads]),
        )
        return role

    def _stage_role(
        self, config: DeploymentConfig, cluster: eks.ICluster, bucket: s3.IBucket, nag_bucket: str
    ) -> iam.Role:
        """The checkpoint-staging Job writes only the checkpoint prefixes of the models the profiles use."""
        role = self._identity(
            config,
            cluster,
            STAGE_SERVICE_ACCOUNT,
            "checkpoint staging: write checkpoints/<hf_id>/<revision>/ of the configured models only",
        )
        prefixes = checkpoint_prefixes(config, config.models_in_use())
        role.add_to_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn]))
        _grant_uploads(role, bucket, prefixes)
        acknowledge(
            role,
            "IAM5",
            "Staging reads and writes only the checkpoint prefixes (pinned model and revision) of the models the "
            "profiles use; object ARNs under a prefix need a trailing wildcard.",
            tuple(f"[Resource::arn:<AWS::Partition>:s3:::{nag_bucket}/{p}*]" for p in prefixes),
        )
        return role

    def _bench_role(
        self, config: DeploymentConfig, cluster: eks.ICluster, bucket: s3.IBucket, nag_bucket: str
    ) -> iam.Role:
        """The benchmark Job may publish metrics only in the configured namespace and write only results/."""
        role = self._identity(
            config,
            cluster,
            BENCH_SERVICE_ACCOUNT,
            "benchmark Job: PutMetricData in its namespace, write results/ in the models bucket",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],  # PutMetricData has no resource type; the namespace condition scopes it
                conditions={"StringEquals": {"cloudwatch:namespace": config.observability.metrics_namespace}},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=["s3:PutObject"], resources=[bucket.arn_for_objects(f"{RESULTS_PREFIX}*")])
        )
        acknowledge(
            role,
            "IAM5",
            "cloudwatch:PutMetricData supports no resource ARNs (only Resource *); it is scoped by the "
            "cloudwatch:namespace condition. s3:PutObject is limited to the results/ prefix.",
            ("[Resource::*]", f"[Resource::arn:<AWS::Partition>:s3:::{nag_bucket}/{RESULTS_PREFIX}*]"),
        )
        return role

    def _identity(
        self, config: DeploymentConfig, cluster: eks.ICluster, service_account: str, description: str
    ) -> iam.Role:
        """A role for one service account of the namespace, bound through EKS Pod Identity."""
        return PodIdentityRole(
            self,
            f"{service_account}-identity",
            cluster=cluster,
            namespace=config.namespace,
            service_account=service_account,
            description=description,
        ).role


def _grant_reads(role: iam.Role, bucket: s3.IBucket, prefixes: list[str]) -> None:
    """GetObject under `prefixes` only. Mountpoint lists directories on the way down; ListBucket reveals key
    names, never content."""
    role.add_to_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn]))
    role.add_to_policy(
        iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{p}*") for p in prefixes])
    )


def _require_endpoint(role: iam.Role, bucket: s3.IBucket, endpoint_id: str) -> None:
    """Every Pod Identity role that touches the bucket (the services that read it; the stage, build and bench Jobs
    that write it) reaches it only through the VPC's S3 gateway endpoint, so its credentials are useless anywhere
    else and its bytes never cross the NAT gateway. In the role's own policy, not the bucket's: the bucket stack
    comes before the cluster (and may outlive it), and staging or verifying from a laptop with the deployer's own
    credentials must keep working."""
    role.add_to_policy(
        iam.PolicyStatement(
            sid="OnlyThroughTheVpcS3Endpoint",
            effect=iam.Effect.DENY,
            actions=["s3:*"],
            resources=[bucket.bucket_arn, bucket.arn_for_objects("*")],
            conditions={"StringNotEquals": {"aws:SourceVpce": endpoint_id}},
        )
    )


def _grant_uploads(role: iam.Role, bucket: s3.IBucket, prefixes: list[str]) -> None:
    """What model_build's uploader needs under `prefixes`: HeadObject/GetObject, PutObject and the multipart
    calls, plus ListMultipartUploads to find and resume interrupted uploads. That one is bucket-level (it shows
    in-progress keys and upload ids, never content)."""
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
            resources=[bucket.arn_for_objects(f"{p}*") for p in prefixes],
        )
    )
    role.add_to_policy(iam.PolicyStatement(actions=["s3:ListBucketMultipartUploads"], resources=[bucket.bucket_arn]))
