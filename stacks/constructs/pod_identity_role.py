"""An IAM role bound to one Kubernetes service account through EKS Pod Identity."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct


class PodIdentityRole(Construct):
    """Role trusted by pods.eks.amazonaws.com for one cluster/namespace/service account, plus the association.

    We associate explicitly (CfnPodIdentityAssociation) instead of `cluster.add_service_account`,
    because the latter adds the eks-pod-identity-agent add-on a second time, which fails deploy.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        namespace: str,
        service_account: str,
        description: str,
    ) -> None:
        super().__init__(scope, construct_id)
        # Only EKS Pod Identity, only for this cluster, namespace and service account: EKS sets these session
        # tags when it assumes the role (EKS user guide, "Create IAM role with trust policy required by EKS
        # Pod Identity", Setting Conditions), so another association in the account cannot borrow the role.
        principal = (
            iam.ServicePrincipal("pods.eks.amazonaws.com")
            .with_conditions(
                {
                    "StringEquals": {
                        "aws:RequestTag/eks-cluster-arn": Stack.of(self).format_arn(
                            service="eks", resource="cluster", resource_name=cluster.cluster_name
                        ),
                        "aws:RequestTag/kubernetes-namespace": namespace,
                        "aws:RequestTag/kubernetes-service-account": service_account,
                    }
                }
            )
            .with_session_tags()
        )
        self.role = iam.Role(self, "Role", description=description, assumed_by=principal)
        self.association = eks.CfnPodIdentityAssociation(
            self,
            "Association",
            cluster_name=cluster.cluster_name,
            namespace=namespace,
            service_account=service_account,
            role_arn=self.role.role_arn,
        )
