"""An IAM role bound to one Kubernetes service account through EKS Pod Identity."""

from __future__ import annotations

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct


class PodIdentityRole(Construct):
    """Role trusted by pods.eks.amazonaws.com plus the association to `namespace/service_account`.

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
        self.role = iam.Role(
            self,
            "Role",
            description=description,
            assumed_by=iam.ServicePrincipal("pods.eks.amazonaws.com"),
        )
        trust = self.role.assume_role_policy
        if trust is not None:
            trust.add_statements(
                iam.PolicyStatement(
                    actions=["sts:TagSession"],
                    principals=[iam.ServicePrincipal("pods.eks.amazonaws.com")],
                )
            )
        self.association = eks.CfnPodIdentityAssociation(
            self,
            "Association",
            cluster_name=cluster.cluster_name,
            namespace=namespace,
            service_account=service_account,
            role_arn=self.role.role_arn,
        )
