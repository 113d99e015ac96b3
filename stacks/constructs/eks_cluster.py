"""The EKS cluster: private API endpoint, control-plane logs, secrets encrypted with its own key, one admin."""

from __future__ import annotations

import importlib

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from config.kubernetes import KUBECTL_LAYERS
from config.schema import DeploymentConfig
from stacks.constructs.part import Part
from stacks.nag import acknowledge, managed_policy


def endpoint_access(public_cidrs: list[str]) -> eks.EndpointAccess:
    """Private by default; public only to the CIDRs the config lists (an empty list must not mean open)."""
    if not public_cidrs:
        return eks.EndpointAccess.PRIVATE
    return eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*public_cidrs)


def kubectl_layer(scope: Construct, version: str) -> lambda_.ILayerVersion:
    module, cls = KUBECTL_LAYERS[version]
    return getattr(importlib.import_module(module), cls)(scope, "KubectlLayer")


class EksCluster(Part):
    """The control plane in the VPC's private subnets, no default capacity (each node group is a construct of its own),
    and cluster admin for the principal the config names.

    The cluster itself is created in the stack's scope rather than this part's: aws-cdk-lib writes its construct path
    into the template (the description of its kubectl provider's function), which a move would change.
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig, vpc: ec2.IVpc) -> None:
        super().__init__(scope, construct_id)
        secrets_key = kms.Key(
            self,
            "SecretsKey",
            description=f"{config.cluster_name}: envelope encryption of Kubernetes secrets",
            enable_key_rotation=True,
            pending_window=Duration.days(7),
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.cluster = eks.Cluster(
            Stack.of(self),
            "Cluster",
            cluster_name=config.cluster_name,
            version=eks.KubernetesVersion.of(config.kubernetes_version),
            vpc=vpc,
            vpc_subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)],
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            endpoint_access=endpoint_access(config.network.api_public_cidrs),
            cluster_logging=[
                eks.ClusterLoggingTypes.API,
                eks.ClusterLoggingTypes.AUDIT,
                eks.ClusterLoggingTypes.AUTHENTICATOR,
                eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
                eks.ClusterLoggingTypes.SCHEDULER,
            ],
            secrets_encryption_key=secrets_key,
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=kubectl_layer(self, config.kubernetes_version)
            ),
            tags=config.tags,
        )
        self.cluster.grant_access(
            "Admin",
            config.admin_principal_arn,
            [
                eks.AccessPolicy.from_access_policy_name(
                    "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER
                )
            ],
        )
        self._acknowledge_cdk_internals()

    def _acknowledge_cdk_internals(self) -> None:
        """Findings on resources aws-cdk-lib creates for EKS itself (the cluster role, the kubectl handler)."""
        acknowledge(
            self.cluster.role,
            "IAM4",
            "AmazonEKSClusterPolicy is the policy EKS documents for the cluster service role.",
            (managed_policy("AmazonEKSClusterPolicy"),),
        )
        provider = self.cluster.node.find_child("KubectlProvider")
        acknowledge(
            provider,
            "IAM4",
            "The kubectl handler that aws-cdk-lib creates uses Lambda's basic/VPC execution policies and "
            "read-only ECR access to pull chart images; we do not control its role.",
            (
                managed_policy("AWSLambdaBasicExecutionRole", "service-role/"),
                managed_policy("AWSLambdaVPCAccessExecutionRole", "service-role/"),
                managed_policy("AmazonEC2ContainerRegistryReadOnly"),
                '[Policy::{"Fn::If":["ClusterKubectlProviderHandlerHasEcrPublic69E09706",{"Fn::Join":["",'
                '["arn:",{"Ref":"AWS::Partition"},":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},'
                '{"Ref":"AWS::NoValue"}]}]',
            ),
        )
        acknowledge(
            provider,
            "L1",
            "The kubectl handler runtime is pinned by aws-cdk-lib to the runtime its bundled kubectl/helm support.",
        )
        acknowledge(
            provider,
            "IAM5",
            "The custom-resource framework may invoke any version of its own kubectl handler function.",
            ("[Resource::<ClusterKubectlProviderHandler2E05C68A.Arn>:*]",),
        )
