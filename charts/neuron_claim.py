"""The Neuron DRA claim: N connected Trainium devices at one logical-core size, shared by serving and build."""

from __future__ import annotations

from cdk8s_plus_34 import k8s
from constructs import Construct

from config.catalogue import NEURON_DEVICE_CLASS, NEURON_TAINT_KEY, NEURON_TAINT_VALUE, NODE_ROLE_LABEL, NeuronInstance
from config.profiles import Placement

NEURON_DRIVER = "neuron.aws.com"
REQUEST_NAME = "neurons"
CLAIM_NAME = "neuron"


def device_group_attribute(devices: int) -> str | None:
    """Connected groups are published as resource.aws.com/devicegroup{4,8,16}_id (EFA-enabled instances)."""
    return None if devices == 1 else f"resource.aws.com/devicegroup{devices}_id"


class NeuronClaimTemplate(Construct):
    """A resource.k8s.io/v1 ResourceClaimTemplate; each pod that references it gets its own claim."""

    def __init__(
        self, scope: Construct, construct_id: str, *, name: str, placement: Placement, instance_type: str
    ) -> None:
        super().__init__(scope, construct_id)
        self.name = name
        group = device_group_attribute(placement.devices)
        self.resource = k8s.KubeResourceClaimTemplate(
            self,
            "Resource",
            metadata=k8s.ObjectMeta(name=name),
            spec=k8s.ResourceClaimTemplateSpec(
                spec=k8s.ResourceClaimSpec(
                    devices=k8s.DeviceClaim(
                        requests=[
                            k8s.DeviceRequest(
                                name=REQUEST_NAME,
                                exactly=k8s.ExactDeviceRequest(
                                    device_class_name=NEURON_DEVICE_CLASS,
                                    allocation_mode="ExactCount",
                                    count=placement.devices,
                                    selectors=[
                                        k8s.DeviceSelector(
                                            cel=k8s.CelDeviceSelector(
                                                expression=(
                                                    f"device.attributes['{NEURON_DRIVER}'].instanceType "
                                                    f"== '{instance_type}'"
                                                )
                                            )
                                        )
                                    ],
                                ),
                            )
                        ],
                        constraints=(
                            [k8s.DeviceConstraint(requests=[REQUEST_NAME], match_attribute=group)] if group else None
                        ),
                        config=[
                            k8s.DeviceClaimConfiguration(
                                requests=[REQUEST_NAME],
                                opaque=k8s.OpaqueDeviceConfiguration(
                                    driver=NEURON_DRIVER,
                                    parameters={
                                        "apiVersion": "neuron.aws.com/v1",
                                        "kind": "NeuronConfig",
                                        "logicalNeuronCore": placement.logical_neuron_cores,
                                    },
                                ),
                            )
                        ],
                    )
                )
            ),
        )


def node_share(instance: NeuronInstance, devices: int) -> tuple[int, int]:
    """(vCPU, memory GiB) in proportion to the devices claimed, leaving 10% CPU / 20% memory for the node.

    Two 8-device services on a trn2.48xlarge get 86 vCPU and 819 GiB each and fit side by side.
    """
    share = devices / instance.devices
    return int(instance.vcpus * 0.9 * share), int(instance.memory_gib * 0.8 * share)


def gi(n: int) -> k8s.Quantity:
    return k8s.Quantity.from_string(f"{n}Gi")


def trn2_node_placement() -> dict:
    """PodSpec fields that put a pod on the Trainium2 nodes without devices: node selector, taint toleration."""
    return {
        "node_selector": {NODE_ROLE_LABEL: "trn2"},
        "tolerations": [
            k8s.Toleration(key=NEURON_TAINT_KEY, operator="Equal", value=NEURON_TAINT_VALUE, effect="NoSchedule")
        ],
    }


def trn2_placement(claim_template: str) -> dict:
    """PodSpec fields that put a pod on the Trainium2 nodes with its devices: node selector, taint toleration,
    DRA claim. Serving pods and build Jobs use the same ones."""
    return {
        **trn2_node_placement(),
        "resource_claims": [k8s.PodResourceClaim(name=CLAIM_NAME, resource_claim_template_name=claim_template)],
    }


def trn2_resources(instance: NeuronInstance, devices: int) -> k8s.ResourceRequirements:
    """Guaranteed CPU/memory in proportion to the devices, plus the DRA claim."""
    cpu, memory_gib = node_share(instance, devices)
    fixed = {"cpu": k8s.Quantity.from_number(cpu), "memory": gi(memory_gib)}
    return k8s.ResourceRequirements(requests=fixed, limits=fixed, claims=[k8s.ResourceClaim(name=CLAIM_NAME)])
