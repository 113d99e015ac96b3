"""Network, EKS cluster, node groups, managed add-ons and the Neuron DRA driver."""

from __future__ import annotations

from aws_cdk import Stack
from constructs import Construct

from config.schema import DeploymentConfig
from stacks.constructs.capacity_block_notice import CapacityBlockNotice
from stacks.constructs.cluster_autoscaler import ClusterAutoscaler
from stacks.constructs.eks_cluster import EksCluster
from stacks.constructs.grafana import Grafana
from stacks.constructs.keda import Keda
from stacks.constructs.managed_addons import ManagedAddons
from stacks.constructs.managed_prometheus import ManagedPrometheus, serving_scrape_jobs
from stacks.constructs.network import Network
from stacks.constructs.neuron_dra_driver import NeuronDraDriver
from stacks.constructs.pinned_chart import SignedChartPrerequisites
from stacks.constructs.system_node_group import SystemNodeGroup
from stacks.constructs.trn2_node_group import Trn2NodeGroup


class ClusterStack(Stack):
    """Everything the cluster needs before workloads: it deletes cleanly with `cdk destroy`."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        network = Network(self, "Network", config=config)
        self.vpc, self.s3_endpoint = network.vpc, network.s3_endpoint
        self.cluster = EksCluster(self, "EksCluster", config=config, vpc=self.vpc).cluster
        self.system_nodes = SystemNodeGroup(self, "SystemNodes", cluster=self.cluster, config=config).nodegroup
        self.trn2_nodes = Trn2NodeGroup(self, "Trn2Nodes", cluster=self.cluster, vpc=self.vpc, config=config)
        # A Capacity Block's end, announced by EC2 40 minutes before: to the alarm topic (docs/coldstart.md).
        CapacityBlockNotice.if_configured(self, "CapacityBlockNotice", config=config)
        self.addons = ManagedAddons(self, "Addons", cluster=self.cluster, system_nodes=self.system_nodes, config=config)
        self.neuron_dra = NeuronDraDriver(self, "NeuronDra", cluster=self.cluster, system_nodes=self.system_nodes)
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
        workspace_arn = self.metrics.workspace.attr_arn
        # Each signed chart runs on the system nodes and signs with Pod Identity: both are there before it installs.
        signed = SignedChartPrerequisites(
            system_nodes=self.system_nodes, pod_identity_agent=self.addons.pod_identity_agent
        )
        self.keda = Keda(self, "Keda", cluster=self.cluster, workspace_arn=workspace_arn, after=signed)
        # Trn2 nodes follow the replicas KEDA asks for, between the group's floor and ceiling (docs/elastic-capacity.md).
        self.cluster_autoscaler = ClusterAutoscaler(
            self, "ClusterAutoscaler", cluster=self.cluster, config=config, after=signed
        )
        # The viewer of the same series (docs/dashboard.md).
        self.grafana = Grafana(
            self,
            "Grafana",
            cluster=self.cluster,
            query_url=self.metrics.query_url,
            workspace_arn=workspace_arn,
            config=config,
            after=signed,
        )
