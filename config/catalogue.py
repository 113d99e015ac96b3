"""The Neuron catalogue and the config's fixed vocabulary: what a Trainium2 instance offers, the taint, labels and
device class the node groups and claims share, and the limits the config's rules check against.

Leaf module: imports nothing of ours, so stacks, charts and ops read these names without the config's models.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

NEURON_TAINT_KEY = "aws.amazon.com/neuron"
NEURON_TAINT_VALUE = "true"
NEURON_DEVICE_CLASS = "neuron.aws.com"  # created by the Neuron DRA driver chart
NODE_ROLE_LABEL = "trn-specdec/node-role"  # "system" or "trn2", set on the node groups
PLACEHOLDER_ACCOUNT = "000000000000"
PLACEHOLDER_ADMIN_ARN = f"arn:aws:iam::{PLACEHOLDER_ACCOUNT}:role/REPLACE-WITH-YOUR-ADMIN-ROLE"


class NeuronInstance(BaseModel):
    """What one Neuron instance type offers (AWS instance type docs)."""

    model_config = ConfigDict(frozen=True)
    devices: int
    physical_cores_per_device: int
    default_lnc: int
    efa_interfaces: int
    vcpus: int
    memory_gib: int


NEURON_INSTANCES: dict[str, NeuronInstance] = {
    "trn2.48xlarge": NeuronInstance(
        devices=16, physical_cores_per_device=8, default_lnc=2, efa_interfaces=16, vcpus=192, memory_gib=2048
    ),
    "trn2u.48xlarge": NeuronInstance(
        devices=16, physical_cores_per_device=8, default_lnc=2, efa_interfaces=16, vcpus=192, memory_gib=2048
    ),
    "trn2.3xlarge": NeuronInstance(
        devices=1, physical_cores_per_device=8, default_lnc=2, efa_interfaces=1, vcpus=12, memory_gib=128
    ),
}

DRA_DEVICE_GROUP_SIZES = (1, 4, 8, 16)
# Namespaces of Kubernetes itself and of the add-ons this cluster installs (amazon-cloudwatch: the CloudWatch
# observability add-on; the Neuron DRA driver and the Mountpoint CSI driver live in kube-system).
KEDA_NAMESPACE = "keda"  # where stacks/constructs/keda.py installs the autoscaler
GRAFANA_NAMESPACE = "grafana"  # where stacks/constructs/grafana.py installs the live dashboard's viewer
SYSTEM_NAMESPACES = (
    "default",
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "amazon-cloudwatch",
    KEDA_NAMESPACE,
    GRAFANA_NAMESPACE,
)
# CloudFormation refuses a template body over 1,000,000 bytes (CloudFormation quotas, "Template body size in an
# S3 object"). Measured 2026-11-26 (aws-cdk-lib 2.275, template files as `cdk synth` writes them): the Workloads
# template is 415 kB with the default two profiles and grows by 28.5 kB per profile (its Deployment with the metrics
# sidecar, Service, claim, role, ScaledObject and endpoint routes); with 25% for 24-character names and longer model
# ids, 16 profiles need about 914 kB (18 would need 985 kB: too close to grow). tests/stacks/test_workloads_stack.py re-measures it on every run; app.py checks the real size after
# synth.
CLOUDFORMATION_TEMPLATE_BYTES = 1_000_000
MAX_PROFILES = 16
# The largest batch (vLLM --max-num-seqs) a profile may compile: config/profiles.py bounds max_num_seqs with it, and
# `bench sweep --max-num-seqs` with it too (its concurrency grid goes to 4x the batch: requests in flight on trn2).
MAX_NUM_SEQS = 256
GP3_IOPS_PER_MIBPS = 4  # gp3 throughput is at most 0.25 MiB/s per provisioned IOPS (Amazon EBS volume types)

# <vllm x.y.z>[.<plugin x.y.z>]-neuronx-py<NN>-sdk<x.y.z>-ubuntu<NN.NN>: three version parts on the legacy fork's
# images, six (vLLM + plugin) on the vllm-neuron plugin's, e.g. 0.29.0.1.2.0-neuronx-py314-sdk2.33.0-ubuntu26.04.
IMAGE_TAG_PATTERN = re.compile(
    r"^(?P<vllm>\d+\.\d+\.\d+)(?:\.(?P<plugin>\d+\.\d+\.\d+))?-neuronx-py(?P<py>\d+)-sdk(?P<sdk>\d+\.\d+\.\d+)"
    r"-ubuntu\d+\.\d+$"
)


# Each availability zone gets one public /24 and one private /20 (stacks/constructs/network.py); CDK allocates
# all public subnets first, then the private ones aligned to a /20 boundary.
PUBLIC_SUBNET_PREFIX = 24
PRIVATE_SUBNET_PREFIX = 20


def smallest_vpc_prefix(zones: int) -> int:
    """The longest VPC prefix whose addresses hold the subnets of `zones` availability zones."""
    public = zones * 2 ** (32 - PUBLIC_SUBNET_PREFIX)
    private_block = 2 ** (32 - PRIVATE_SUBNET_PREFIX)
    needed = -(-public // private_block) * private_block + zones * private_block
    return 32 - (needed - 1).bit_length()
