"""cdk-nag acknowledgments: each names the exact finding and why it is accepted."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct

PACK = "AwsSolutions::AwsSolutions-"

NODE_ROLE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly")


def acknowledge(scope: IConstruct, rule: str, reason: str, findings: tuple[str, ...] = ()) -> None:
    """Acknowledge `rule` (e.g. "IAM4") on `scope`; with `findings`, only those exact findings."""
    Validations.of(scope).acknowledge(
        *(Acknowledgment(id=f"{PACK}{rule}{finding}", reason=reason) for finding in findings or ("",))
    )


def managed_policy(name: str, path: str = "") -> str:
    return f"[Policy::arn:<AWS::Partition>:iam::aws:policy/{path}{name}]"


def acknowledge_node_role(nodegroup: IConstruct) -> None:
    acknowledge(
        nodegroup,
        "IAM4",
        "The EKS node IAM role docs list these AWS managed policies for managed node groups (worker node, ECR "
        "read, and the VPC CNI's ENI permissions, which aws-node needs before the Pod Identity agent runs). "
        "IMDSv2 with hop limit 1 keeps them away from pods on the pod network; workloads get their own Pod "
        "Identity roles, so nodes hold nothing project-specific.",
        tuple(managed_policy(p) for p in NODE_ROLE_POLICIES),
    )
