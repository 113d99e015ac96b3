"""Yardstick for `make synth`: the smallest aws_eks_v2 app with the same kubectl layer, nothing else."""

from aws_cdk import App, Environment, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer

app = App()
stack = Stack(app, "MinimalEks", env=Environment(region="us-east-2"))
eks.Cluster(
    stack,
    "Cluster",
    version=eks.KubernetesVersion.V1_35,
    default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
    default_capacity=0,
    kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV35Layer(stack, "KubectlLayer")),
)
app.synth()
