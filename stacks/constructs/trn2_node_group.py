"""The Trainium2 managed node group: launch template, Neuron AMI, taint, optional EFA and Capacity Block."""

from __future__ import annotations

from aws_cdk import CfnTag, Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from config.catalogue import NEURON_TAINT_KEY, NEURON_TAINT_VALUE, NODE_ROLE_LABEL
from config.schema import DeploymentConfig
from stacks.constructs.node_metadata import metadata_options
from stacks.nag import acknowledge_node_role


class Trn2NodeGroup(Construct):
    """EKS managed node group of Trainium2 instances, ready for the Neuron DRA driver.

    The instance type lives in a launch template because CDK does not know trn2 and rejects it next
    to the Neuron AMI type (AmiTypeDoesNotMatchInstanceArchitecture). With EFA, every network card
    gets an EFA interface and the nodes share a cluster placement group: the DRA driver publishes the
    connected device-group attributes the service claims match on only on EFA-enabled instances.
    A Capacity Block is already placed in a cluster placement group by EC2, so with CAPACITY_BLOCK the
    template attaches none of its own (AWS ParallelCluster rejects the combination too).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.Cluster,
        vpc: ec2.IVpc,
        config: DeploymentConfig,
    ) -> None:
        super().__init__(scope, construct_id)
        # What the config decides for this group: its section, its zone (a Capacity Block's, or the first), whether the
        # claims need EFA, and the deployment's tags.
        settings, availability_zone = config.trn2_nodes, config.trn2_availability_zone
        efa, tags = config.efa_required, config.tags
        instance = settings.instance
        data: dict = {
            "instance_type": settings.instance_type,
            "block_device_mappings": [
                ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
                    device_name="/dev/xvda",
                    ebs=ec2.CfnLaunchTemplate.EbsProperty(
                        volume_size=settings.disk_gib,
                        volume_type="gp3",
                        iops=settings.disk_iops,
                        throughput=settings.disk_throughput_mibps,
                        encrypted=True,
                        delete_on_termination=True,
                    ),
                )
            ],
            "metadata_options": metadata_options(),
            "tag_specifications": [
                ec2.CfnLaunchTemplate.TagSpecificationProperty(
                    resource_type=kind,
                    tags=[CfnTag(key=k, value=v) for k, v in sorted(tags.items())],
                )
                for kind in ("instance", "volume", "network-interface")
            ],
        }
        capacity_block = settings.capacity_type == "CAPACITY_BLOCK"
        self.placement_group: ec2.CfnPlacementGroup | None = None
        if efa and not capacity_block:
            self.placement_group = ec2.CfnPlacementGroup(self, "PlacementGroup", strategy="cluster")
            data["placement"] = ec2.CfnLaunchTemplate.PlacementProperty(group_name=self.placement_group.attr_group_name)
        if efa:
            self.efa_security_group = ec2.SecurityGroup(
                self,
                "EfaSecurityGroup",
                vpc=vpc,
                description="EFA traffic between Trainium2 nodes (self-referencing, as EFA requires)",
                allow_all_outbound=False,
            )
            self.efa_security_group.add_ingress_rule(
                self.efa_security_group, ec2.Port.all_traffic(), "EFA from members of this group"
            )
            self.efa_security_group.add_egress_rule(
                self.efa_security_group, ec2.Port.all_traffic(), "EFA to members of this group"
            )
            groups = [cluster.cluster_security_group_id, self.efa_security_group.security_group_id]
            data["network_interfaces"] = [
                ec2.CfnLaunchTemplate.NetworkInterfaceProperty(
                    network_card_index=card,
                    device_index=0 if card == 0 else 1,
                    interface_type="efa" if card == 0 else "efa-only",
                    groups=groups,
                    delete_on_termination=True,
                )
                for card in range(instance.efa_interfaces)
            ]
        if capacity_block:
            data["instance_market_options"] = ec2.CfnLaunchTemplate.InstanceMarketOptionsProperty(
                market_type="capacity-block"
            )
            data["capacity_reservation_specification"] = ec2.CfnLaunchTemplate.CapacityReservationSpecificationProperty(
                capacity_reservation_target=ec2.CfnLaunchTemplate.CapacityReservationTargetProperty(
                    capacity_reservation_id=settings.capacity_reservation_id
                )
            )
        self.launch_template = ec2.CfnLaunchTemplate(
            self,
            "LaunchTemplate",
            launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(**data),
        )
        self.labels = {NODE_ROLE_LABEL: "trn2"}
        self.nodegroup = eks.Nodegroup(
            self,
            "NodeGroup",
            cluster=cluster,
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_NEURON,
            capacity_type=eks.CapacityType.CAPACITY_BLOCK if capacity_block else eks.CapacityType.ON_DEMAND,
            launch_template_spec=eks.LaunchTemplateSpec(
                id=self.launch_template.ref, version=self.launch_template.attr_latest_version_number
            ),
            min_size=settings.min_size,
            desired_size=settings.desired_size,
            max_size=settings.max_size,
            release_version=settings.ami_release_version,
            subnets=ec2.SubnetSelection(
                subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, availability_zones=[availability_zone]
            ),
            taints=[eks.TaintSpec(effect=eks.TaintEffect.NO_SCHEDULE, key=NEURON_TAINT_KEY, value=NEURON_TAINT_VALUE)],
            labels=self.labels,
        )
        for key, value in tags.items():
            Tags.of(self.nodegroup).add(key, value)
        acknowledge_node_role(self.nodegroup)
