"""The Neuron DRA driver, from AWS's OCI Helm chart, with the device plugin off."""

from __future__ import annotations

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from config.versions import CHARTS, NEURON
from stacks.constructs.pinned_chart import ChartRelease, pinned_chart

# The pinned chart comes from the version map (config/versions.py): the version the values below were written for
# (devicePlugin, npd, scheduler, draDriver).
NEURON_CHART = CHARTS[NEURON]
# The chart renders its own Namespace "neuron-dra-driver" for the driver; the release record lives in
# kube-system so Helm does not try to create that namespace a second time.
NEURON_RELEASE_NAMESPACE = "kube-system"
NEURON_RELEASE = ChartRelease(NEURON_CHART, "neuron-dra", NEURON_RELEASE_NAMESPACE, create_namespace=False)


class NeuronDraDriver(Construct):
    """Installs the DRA driver that publishes Trainium devices as ResourceSlices (DeviceClass neuron.aws.com).

    The device plugin and DRA must never run on the same node, so the chart's device plugin and its
    node problem detector are switched off (chart 1.9.0's templates refuse to render both). The chart's own affinity
    places the driver on Trainium instance types only, and its default tolerations cover the Neuron taint. It installs
    once the system nodes are there.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, cluster: eks.ICluster, system_nodes: eks.Nodegroup
    ) -> None:
        super().__init__(scope, construct_id)
        self.values = {
            "devicePlugin": {"enabled": False},
            "npd": {"enabled": False},
            "scheduler": {"enabled": False},
            # The chart's default draDriver tolerations already include aws.amazon.com/neuron (Exists).
            "draDriver": {"enabled": True},
        }
        self.chart = pinned_chart(
            self, cluster=cluster, release=NEURON_RELEASE, values=self.values, after=[system_nodes]
        )
