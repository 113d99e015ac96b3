"""The S3 gateway endpoint on the VPC's private route tables: S3 bytes stop crossing the NAT gateway.

Why: checkpoints (about 70 GB), compiled artifacts and every Mountpoint read of a new replica go to S3 from
private subnets. Without this endpoint they all cross the one NAT gateway, which bills per GB processed and
caps bandwidth; a gateway endpoint for S3 has no hourly or per-GB charge (docs/coldstart.md, Network path).
Container image layers of a private ECR repository are served from S3 too, so they would take this path as
well; the public registry our images come from has no VPC endpoint (docs/coldstart.md says what we chose).

Its policy (not the full-access default) lets through only the models bucket and the buckets the cluster itself must
read or write in this region. Every S3 request to this region from the private subnets takes the endpoint (the route
is S3's prefix list), so a bucket missing here is a failure at run time; each entry names who needs it and its source.
"""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

# What the Pod Identity roles of the Workloads stack may do in the models bucket (stacks/workloads_stack.py; the
# Mountpoint CSI driver reads with the serving roles): tests/stacks/test_s3_gateway_endpoint.py keeps these equal.
MODELS_BUCKET_ACTIONS = (
    "s3:ListBucket",
    "s3:GetObject",
    "s3:PutObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
    "s3:ListBucketMultipartUploads",
)

# registry.k8s.io (the Cluster Autoscaler's image) answers a layer request from an AWS address with a redirect to
# its copy in S3 in that address's region, through the NAT gateway's address here: this region's. The bucket names,
# kubernetes/registry.k8s.io cmd/archeio/internal/app/buckets.go awsRegionToHostURL (@012f74b4): prod-registry-k8s-io-
# <region>, except these; None where the copy is in another region (reached over the NAT gateway, not this endpoint).
REGISTRY_K8S_IO_BUCKETS: dict[str, str | None] = {
    "eu-west-2": "767373bbdcb8270361b96548387bf2a9ad0d48758c35-eu-west-2",
    "ap-east-2": None,
}


def registry_k8s_io_bucket(region: str) -> str | None:
    return REGISTRY_K8S_IO_BUCKETS.get(region, f"prod-registry-k8s-io-{region}")


def read_only_buckets(region: str) -> dict[str, str]:
    """Buckets of AWS and of the public registries that the nodes only read (GetObject), by who needs them."""
    buckets = {
        # Layers of every private ECR image, the EKS add-ons' among them (Amazon ECR user guide, "Minimum Amazon S3
        # bucket permissions for Amazon ECR").
        f"prod-{region}-starport-layer-bucket": "ECR image layers (the EKS add-ons' images)",
        # dnf on the nodes (AL2023 user guide, "Kernel Live Patching on AL2023", names the repository bucket). The
        # AMIs install nothing at boot; a patch or a debugging session does.
        f"al2023-repos-{region}-de612dc2": "Amazon Linux 2023 package repositories (dnf on the nodes)",
        # Docker Hub (Envoy's and Grafana's images) redirects a client at an AWS address to its own S3 buckets, named
        # docker-images-prod*, instead of its CDN (JFrog knowledge base, "What should we whitelist ... Docker Hub";
        # no Docker document names them): read-only, so a lookalike name reads at most.
        "docker-images-prod*": "Docker Hub's layer buckets (Envoy, Grafana)",
    }
    registry = registry_k8s_io_bucket(region)
    if registry:
        buckets[registry] = "registry.k8s.io's layer copy (the Cluster Autoscaler image)"
    return buckets


def custom_resource_response_bucket(region: str) -> str:
    """Where CloudFormation takes a custom resource's answer (a presigned PUT): the kubectl provider's Lambda
    functions run in the private subnets (private API endpoint), so their answers take this endpoint (CloudFormation
    user guide, "Setting up VPC endpoints for CloudFormation": cloudformation-custom-resource-response-<region without
    dashes>; without it every Kubernetes resource of a deploy waits for its one-hour timeout)."""
    return f"cloudformation-custom-resource-response-{region.replace('-', '')}"


def endpoint_statements(models_bucket: str, region: str, partition: str = "aws") -> list[iam.PolicyStatement]:
    """The endpoint's whole policy: the models bucket, AWS's and the registries' buckets read-only, and
    CloudFormation's response bucket write-only."""
    arn = f"arn:{partition}:s3:::"
    return [
        iam.PolicyStatement(
            sid="ModelsBucket",
            principals=[iam.AnyPrincipal()],
            actions=list(MODELS_BUCKET_ACTIONS),
            resources=[f"{arn}{models_bucket}", f"{arn}{models_bucket}/*"],
        ),
        iam.PolicyStatement(
            sid="ReadOnlyBucketsTheNodesPullFrom",
            principals=[iam.AnyPrincipal()],
            actions=["s3:GetObject"],
            resources=[f"{arn}{b}/*" for b in read_only_buckets(region)],
        ),
        iam.PolicyStatement(
            sid="CloudFormationCustomResourceResponses",
            principals=[iam.AnyPrincipal()],
            actions=["s3:PutObject"],
            resources=[f"{arn}{custom_resource_response_bucket(region)}/*"],
        ),
    ]


class S3GatewayEndpoint(Construct):
    """One gateway endpoint, routed from every private subnet's route table (the nodes and pods live there)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc, models_bucket: str, region: str, partition: str
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint = ec2.GatewayVpcEndpoint(
            self,
            "Endpoint",
            vpc=vpc,
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)],
        )
        for statement in endpoint_statements(models_bucket, region, partition):
            self.endpoint.add_to_policy(statement)

    @property
    def endpoint_id(self) -> str:
        """The endpoint id (vpce-...), which S3 sees as aws:SourceVpce on every request that came through it."""
        return self.endpoint.vpc_endpoint_id
