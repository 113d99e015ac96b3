"""The cluster's network: the VPC, its flow log and its S3 gateway endpoint."""

from __future__ import annotations

from aws_cdk import Aws, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from config.catalogue import PRIVATE_SUBNET_PREFIX, PUBLIC_SUBNET_PREFIX
from config.schema import DeploymentConfig
from stacks.constructs.part import Part
from stacks.constructs.s3_gateway_endpoint import S3GatewayEndpoint

# One public and one private subnet per zone; config.catalogue.smallest_vpc_prefix sizes the VPC for these masks.
VPC_SUBNETS = [
    ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=PUBLIC_SUBNET_PREFIX),
    ec2.SubnetConfiguration(
        name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=PRIVATE_SUBNET_PREFIX
    ),
]


class Network(Part):
    """The VPC (one NAT gateway by default), every flow of it logged for a month, and S3 (checkpoints, artifacts,
    Mountpoint reads) off the NAT gateway through a gateway endpoint (docs/coldstart.md, Network path)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig) -> None:
        super().__init__(scope, construct_id)
        net, stack = config.network, Stack.of(self)
        # Created in the stack's scope rather than this part's: ec2.Vpc tags the VPC, each subnet, route table and
        # gateway and the flow log with their construct paths ("Name"), which a move would change.
        self.vpc = ec2.Vpc(
            stack,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(net.vpc_cidr),
            availability_zones=net.availability_zones,
            nat_gateways=net.nat_gateways,
            subnet_configuration=VPC_SUBNETS,
        )
        self.s3_endpoint = S3GatewayEndpoint(
            self,
            "S3Endpoint",
            vpc=self.vpc,
            models_bucket=config.models_bucket_name(Aws.ACCOUNT_ID),
            region=config.region,
            partition=Aws.PARTITION,
        )
        flow_log = self.vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(
                logs.LogGroup(
                    self, "FlowLogGroup", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY
                )
            ),
        )
        # Confused-deputy guard (VPC Flow Logs user guide, "IAM role for publishing flow logs"): the service may
        # assume the role only for flow logs of this account and region. CDK's role trusts the service alone.
        flow_log_role = flow_log.node.find_child("IAMRole").node.default_child
        flow_log_role.add_property_override(
            "AssumeRolePolicyDocument.Statement.0.Condition",
            {
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnLike": {
                    "aws:SourceArn": f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}:vpc-flow-log/*"
                },
            },
        )
