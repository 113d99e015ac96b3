"""The S3 gateway endpoint on the VPC's private route tables: S3 bytes stop crossing the NAT gateway.

Why: checkpoints (about 70 GB), compiled artifacts and every Mountpoint read of a new replica go to S3 from
private subnets. Without this endpoint they all cross the one NAT gateway, which bills per GB processed and
caps bandwidth; a gateway endpoint for S3 has no hourly or per-GB charge (docs/coldstart.md, Network path).
Container image layers of a private ECR repository are served from S3 too, so they would take this path as
well; the public registry our images come from has no VPC endpoint (docs/coldstart.md says what we chose).
"""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct


class S3GatewayEndpoint(Construct):
    """One gateway endpoint, routed from every private subnet's route table (the nodes and pods live there)."""

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc) -> None:
        super().__init__(scope, construct_id)
        self.endpoint = ec2.GatewayVpcEndpoint(
            self,
            "Endpoint",
            vpc=vpc,
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)],
        )

    @property
    def endpoint_id(self) -> str:
        """The endpoint id (vpce-...), which S3 sees as aws:SourceVpce on every request that came through it."""
        return self.endpoint.vpc_endpoint_id
