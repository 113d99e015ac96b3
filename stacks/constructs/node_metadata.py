"""Instance metadata settings shared by every node group: IMDSv2 only, reachable from the node alone.

Hop limit 1 means a pod on the pod network cannot complete the IMDSv2 token PUT, so it cannot take the
node role's credentials. Nothing we run needs more (checked against each component's source or docs):
- VPC CNI (aws-node), kube-proxy, the Pod Identity agent and the CloudWatch agent run with
  `hostNetwork: true` (CloudWatch: aws-observability/helm-charts, amazon-cloudwatch-observability
  templates/linux/cloudwatch-agent-custom-resource.yaml), so they reach IMDS in one hop.
- Mountpoint S3 CSI v2 pods use IMDS only for driver-level node credentials (we use pod-level Pod
  Identity) and for region/bandwidth auto-detection; our PVs pass `region` explicitly
  (awslabs/mountpoint-s3-csi-driver docs/UPGRADING_TO_V2.md, "IMDS ... hop limit").
- vLLM and the Jobs get AWS credentials from EKS Pod Identity (169.254.170.23), not IMDS.
"""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2

IMDS_HOP_LIMIT = 1


def metadata_options() -> ec2.CfnLaunchTemplate.MetadataOptionsProperty:
    return ec2.CfnLaunchTemplate.MetadataOptionsProperty(
        http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=IMDS_HOP_LIMIT
    )
