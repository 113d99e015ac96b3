"""Network, EKS cluster, node groups, managed add-ons and the Neuron DRA driver."""

from __future__ import annotations

import importlib

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from config.catalogue import NODE_ROLE_LABEL, PRIVATE_SUBNET_PREFIX, PUBLIC_SUBNET_PREFIX
from config.kubernetes import KUBECTL_LAYERS
from config.schema import DeploymentConfig
from config.versions import ADDONS, POD_IDENTITY_AGENT
from stacks.constructs.capacity_block_notice import CapacityBlockNotice
from stacks.constructs.cluster_autoscaler import ClusterAutoscaler
from stacks.constructs.grafana import Grafana
from stacks.constructs.keda import Keda
from stacks.constructs.managed_prometheus import ManagedPrometheus, serving_scrape_jobs
from stacks.constructs.neuron_dra_driver import NeuronDraDriver
from stacks.constructs.node_metadata import metadata_options
from stacks.constructs.pod_identity_role import PodIdentityRole
from stacks.constructs.s3_gateway_endpoint import S3GatewayEndpoint
from stacks.constructs.trn2_node_group import Trn2NodeGroup
from stacks.nag import acknowledge, acknowledge_node_role, managed_policy

CLOUDWATCH_SERVICE_ACCOUNT = ("amazon-cloudwatch", "cloudwatch-agent")


def endpoint_access(public_cidrs: list[str]) -> eks.EndpointAccess:
    """Private by default; public only to the CIDRs the config lists (an empty list must not mean open)."""
    if not public_cidrs:
        return eks.EndpointAccess.PRIVATE
    return eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*public_cidrs)


def kubectl_layer(scope: Construct, version: str) -> lambda_.ILayerVersion:
    module, cls = KUBECTL_LAYERS[version]
    return getattr(importlib.import_module(module), cls)(scope, "KubectlLayer")


# One public and one private subnet per zone; config.catalogue.smallest_vpc_prefix sizes the VPC for these masks.
VPC_SUBNETS = [
    ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=PUBLIC_SUBNET_PREFIX),
    ec2.SubnetConfiguration(
        name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=PRIVATE_SUBNET_PREFIX
    ),
]


class ClusterStack(Stack):
    """Everything the cluster needs before workloads: it deletes cleanly with `cdk destroy`."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        net = config.network
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(net.vpc_cidr),
            availability_zones=net.availability_zones,
            nat_gateways=net.nat_gateways,
            subnet_configuration=VPC_SUBNETS,
        )
        # S3 (checkpoints, artifacts, Mountpoint reads) off the NAT gateway: docs/coldstart.md, Network path.
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
                    self,
                    "FlowLogGroup",
                    retention=logs.RetentionDays.ONE_MONTH,
                    removal_policy=RemovalPolicy.DESTROY,
                )
            ),
        )
        # Confused-deputy guard (VPC Flow Logs user guide, "IAM role for publishing flow logs"): the service may
        # assume the role only for flow logs of this account and region. CDK's role trusts the service alone.
        flow_log_role = flow_log.node.find_child("IAMRole").node.default_child
        flow_log_role.add_property_override(
            "AssumeRolePolicyDocument.Statement.0.Condition",
            {
                "StringEquals": {"aws:SourceAccount": self.account},
                "ArnLike": {"aws:SourceArn": f"arn:{self.partition}:ec2:{self.region}:{self.account}:vpc-flow-log/*"},
            },
        )
        secrets_key = kms.Key(
            self,
            "SecretsKey",
            description=f"{config.cluster_name}: envelope encryption of Kubernetes secrets",
            enable_key_rotation=True,
            pending_window=Duration.days(7),
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.cluster = eks.Cluster(
            self,
            "Cluster",
            cluster_name=config.cluster_name,
            version=eks.KubernetesVersion.of(config.kubernetes_version),
            vpc=self.vpc,
            vpc_subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)],
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            endpoint_access=endpoint_access(net.api_public_cidrs),
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

        sys_cfg = config.system_nodes
        # A launch template only for what the node group API cannot set: IMDS hop limit 1 and an
        # encrypted root volume that does not depend on the account's EBS default encryption.
        system_template = ec2.CfnLaunchTemplate(
            self,
            "SystemNodesLaunchTemplate",
            launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
                metadata_options=metadata_options(),
                block_device_mappings=[
                    ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
                        device_name="/dev/xvda",
                        ebs=ec2.CfnLaunchTemplate.EbsProperty(
                            volume_size=sys_cfg.disk_gib, volume_type="gp3", encrypted=True, delete_on_termination=True
                        ),
                    )
                ],
            ),
        )
        self.system_nodes = self.cluster.add_nodegroup_capacity(
            "SystemNodes",
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
            instance_types=[ec2.InstanceType(sys_cfg.instance_type)],
            min_size=sys_cfg.min_size,
            desired_size=sys_cfg.desired_size,
            max_size=sys_cfg.max_size,
            launch_template_spec=eks.LaunchTemplateSpec(
                id=system_template.ref, version=system_template.attr_latest_version_number
            ),
            labels={NODE_ROLE_LABEL: "system"},
            subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
        )
        self.trn2_nodes = Trn2NodeGroup(self, "Trn2Nodes", cluster=self.cluster, vpc=self.vpc, config=config)
        # A Capacity Block's end, announced by EC2 40 minutes before: to the alarm topic (docs/coldstart.md).
        block, topic = config.trn2_nodes.capacity_reservation_id, config.observability.alarm_topic_arn
        if config.trn2_nodes.capacity_type == "CAPACITY_BLOCK" and block and topic:
            CapacityBlockNotice(self, "CapacityBlockNotice", reservation_id=block, topic_arn=topic)

        self.addons = self._managed_addons(config.kubernetes_version)
        self.neuron_dra = NeuronDraDriver(self, "NeuronDra", cluster=self.cluster)
        self.neuron_dra.node.add_dependency(self.system_nodes)
        # The live metrics store and the autoscaler that reads it (docs/metrics-and-scaling.md).
        self.metrics = ManagedPrometheus(
            self,
            "Metrics",
            alias=config.name,
            cluster=self.cluster,
            vpc=self.vpc,
            jobs=serving_scrape_jobs(config),
            alert_topic_arn=config.observability.alarm_topic_arn,
            tags=config.tags,
        )
        self.keda = Keda(self, "Keda", cluster=self.cluster, workspace_arn=self.metrics.workspace.attr_arn)
        # Trn2 nodes follow the replicas KEDA asks for, between the group's floor and ceiling (docs/elastic-capacity.md).
        self.cluster_autoscaler = ClusterAutoscaler(self, "ClusterAutoscaler", cluster=self.cluster, config=config)
        # The viewer of the same series (docs/dashboard.md).
        self.grafana = Grafana(
            self,
            "Grafana",
            cluster=self.cluster,
            config=config,
            workspace_arn=self.metrics.workspace.attr_arn,
            query_url=self.metrics.query_url,
        )
        # Each chart signs with Pod Identity and runs on the system nodes: both must be there before it installs.
        for signed in (self.keda, self.cluster_autoscaler, self.grafana):
            signed.chart.node.add_dependency(self.system_nodes, self.addons[POD_IDENTITY_AGENT])
        self._acknowledge_cdk_internals()

    def _acknowledge_cdk_internals(self) -> None:
        """Findings on resources aws-cdk-lib creates for EKS itself (cluster role, kubectl handler, nodes)."""
        acknowledge_node_role(self.system_nodes)
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

    def _managed_addons(self, kubernetes_version: str) -> dict[str, eks.Addon]:
        """EKS-managed add-ons, each at the version the map pins for this Kubernetes version (config/versions.py;
        `make preflight` asks EKS whether it is offered); the CloudWatch agent gets its own Pod Identity role."""
        pins = ADDONS[kubernetes_version]
        addons: dict[str, eks.Addon] = {}
        for name, values in (
            # Enforce Kubernetes NetworkPolicies (the workloads namespace ships some); off by default on EKS.
            ("vpc-cni", {"enableNetworkPolicy": "true"}),
            ("kube-proxy", None),
            ("coredns", None),
            ("eks-pod-identity-agent", None),
            # Its node DaemonSet must also run on the tainted Trainium2 nodes that mount the bucket.
            ("aws-mountpoint-s3-csi-driver", {"node": {"tolerateAllTaints": True}}),
            ("amazon-cloudwatch-observability", None),
        ):
            addon = eks.Addon(
                self,
                "Addon-" + name,
                cluster=self.cluster,
                addon_name=name,
                addon_version=pins[name].version,
                configuration_values=values,
                preserve_on_delete=False,
            )
            addon.node.add_dependency(self.system_nodes)
            addons[name] = addon

        # No driver-level role for the Mountpoint CSI driver: every volume we render uses
        # `authenticationSource: pod`, so S3 access comes from each workload's own Pod Identity role and a
        # driver role would only widen what a future PersistentVolume could read.
        cw = PodIdentityRole(
            self,
            "CloudWatchAgentIdentity",
            cluster=self.cluster,
            namespace=CLOUDWATCH_SERVICE_ACCOUNT[0],
            service_account=CLOUDWATCH_SERVICE_ACCOUNT[1],
            description="CloudWatch agent: Container Insights metrics and logs",
        )
        cw.role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name("CloudWatchAgentServerPolicy"))
        addons["amazon-cloudwatch-observability"].node.add_dependency(cw.association)
        acknowledge(
            cw.role,
            "IAM4",
            "CloudWatchAgentServerPolicy is the AWS-maintained least-privilege policy the CloudWatch "
            "observability add-on documents (PutMetricData, PutLogEvents, describe calls); not a FullAccess policy.",
            (managed_policy("CloudWatchAgentServerPolicy"),),
        )
        cw.association.node.add_dependency(addons["eks-pod-identity-agent"])
        return addons
