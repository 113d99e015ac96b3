"""The system node group: the x86 nodes every add-on, chart and the endpoint run on (label node-role=system)."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from config.catalogue import NODE_ROLE_LABEL
from config.schema import DeploymentConfig
from stacks.constructs.node_metadata import metadata_options
from stacks.constructs.part import Part
from stacks.nag import acknowledge_node_role


class SystemNodeGroup(Part):
    """A managed node group in the private subnets with its launch template. The group itself is the cluster's child
    (`add_nodegroup_capacity`, as it always was): `nodegroup` is what the add-ons and charts install after."""

    def __init__(self, scope: Construct, construct_id: str, *, cluster: eks.Cluster, config: DeploymentConfig) -> None:
        super().__init__(scope, construct_id)
        settings = config.system_nodes
        # A launch template only for what the node group API cannot set: IMDS hop limit 1 and an
        # encrypted root volume that does not depend on the account's EBS default encryption.
        self.launch_template = ec2.CfnLaunchTemplate(
            self,
            "SystemNodesLaunchTemplate",
            launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
                metadata_options=metadata_options(),
                block_device_mappings=[
                    ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
                        device_name="/dev/xvda",
                        ebs=ec2.CfnLaunchTemplate.EbsProperty(
                            volume_size=settings.disk_gib, volume_type="gp3", encrypted=True, delete_on_termination=True
                        ),
                    )
                ],
            ),
        )
        self.nodegroup = cluster.add_nodegroup_capacity(
            "SystemNodes",
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
            instance_types=[ec2.InstanceType(settings.instance_type)],
            min_size=settings.min_size,
            desired_size=settings.desired_size,
            max_size=settings.max_size,
            launch_template_spec=eks.LaunchTemplateSpec(
                id=self.launch_template.ref, version=self.launch_template.attr_latest_version_number
            ),
            labels={NODE_ROLE_LABEL: "system"},
            subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
        )
        acknowledge_node_role(self.nodegroup)
