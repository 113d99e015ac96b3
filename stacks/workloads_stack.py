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
from config.profiles import ServingProfile
from config.schema import DeploymentConfig
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

        self._cluster, self._bucket, self._namespace = cluster, bucket, config.namespace
        self._nag_bucket = config.models_bucket_name("<AWS::AccountId>")
        self._endpoint_id = cluster_stack.s3_endpoint.endpoint_id
        self.serving_roles: dict[str, iam.Role] = {}
        self.build_roles: dict[str, iam.Role] = {}
        for profile in config.profiles:
            artifact = artifact_prefix(profile_digest(config, profile))
            self.build_roles[profile.name] = self._bucket_role(
                build_service_account(profile),
                f"model build {profile.name}: read checkpoints, write artifacts/<digest>/ only",
                reads=checkpoint_prefixes(config, config.profile_models(profile)),
                writes=[artifact],
                why="The build reads only the checkpoint prefixes of the models it compiles and writes only its own "
                "content-addressed artifact prefix",
            )
            self.serving_roles[profile.name] = self._bucket_role(
                service_account_name(profile),
                f"vLLM {profile.name}: read its own artifact and checkpoints from the models bucket",
                reads=serving_read_prefixes(config, profile),
                writes=[],
                why="GetObject is limited to this service's own content-addressed artifact prefix and the checkpoint "
                "prefixes of the models it loads",
            )
        self.stage_role = self._bucket_role(
            STAGE_SERVICE_ACCOUNT,
            "checkpoint staging: write checkpoints/<hf_id>/<revision>/ of the configured models only",
            reads=[],
            writes=checkpoint_prefixes(config, config.models_in_use()),
            why="Staging reads and writes only the checkpoint prefixes (pinned model and revision) of the models the "
            "profiles use",
        )
        self.bench_role = self._bench_role(config.observability.metrics_namespace)

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
        base.node.add_dependency(
            cluster_stack.neuron_dra,
            cluster_stack.addons.mountpoint_s3_csi_driver,
            cluster_stack.addons.pod_identity_agent,
        )
        # ScaledObjects (KEDA's CRDs) and the metrics scraper's RBAC, after the namespace and KEDA's chart.
        self.autoscaling = eks.KubernetesManifest(
            self,
            "k8s-autoscaling",
            cluster=cluster,
            manifest=render_autoscaling(config, cluster_stack.metrics.query_url),
            overwrite=True,
        )
        self.autoscaling.node.add_dependency(base, cluster_stack.keda.chart)

    def _bucket_role(
        self, service_account: str, description: str, *, reads: list[str], writes: list[str], why: str
    ) -> iam.Role:
        """A role that lists the bucket, reads objects under `reads` and uploads under `writes` (prefixes), only
        through the VPC's S3 endpoint; `why` the prefixes are these, for cdk-nag."""
        role = self._identity(service_account, description)
        role.add_to_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[self._bucket.bucket_arn]))
        if reads:
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["s3:GetObject"], resources=[self._bucket.arn_for_objects(f"{p}*") for p in reads]
                )
            )
        if writes:
            _grant_uploads(role, self._bucket, writes)
        _require_endpoint(role, self._bucket, self._endpoint_id)
        acknowledge(
            role,
            "IAM5",
            f"{why}; object ARNs under a prefix need a trailing wildcard.",
            tuple(_nag_objects(self._nag_bucket, p) for p in [*writes, *reads]),
        )
        return role

    def _bench_role(self, metrics_namespace: str) -> iam.Role:
        """The benchmark Job may publish metrics only in the configured namespace and write only results/."""
        role = self._identity(
            BENCH_SERVICE_ACCOUNT, "benchmark Job: PutMetricData in its namespace, write results/ in the models bucket"
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],  # PutMetricData has no resource type; the namespace condition scopes it
                conditions={"StringEquals": {"cloudwatch:namespace": metrics_namespace}},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"], resources=[self._bucket.arn_for_objects(f"{RESULTS_PREFIX}*")]
            )
        )
        _require_endpoint(role, self._bucket, self._endpoint_id)
        acknowledge(
            role,
            "IAM5",
            "cloudwatch:PutMetricData supports no resource ARNs (only Resource *); it is scoped by the "
            "cloudwatch:namespace condition. s3:PutObject is limited to the results/ prefix.",
            ("[Resource::*]", _nag_objects(self._nag_bucket, RESULTS_PREFIX)),
        )
        return role

    def _identity(self, service_account: str, description: str) -> iam.Role:
        """A role for one service account of the namespace, bound through EKS Pod Identity."""
        return PodIdentityRole(
            self,
            f"{service_account}-identity",
            cluster=self._cluster,
            namespace=self._namespace,
            service_account=service_account,
            description=description,
        ).role


def _nag_objects(nag_bucket: str, prefix: str) -> str:
    """The finding cdk-nag reports for the object ARN `<prefix>*` (the bucket named with the account's token)."""
    return f"[Resource::arn:<AWS::Partition>:s3:::{nag_bucket}/{prefix}*]"


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
