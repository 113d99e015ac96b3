"""The Container Insights names the dashboard and the alarms read: what the CloudWatch observability add-on
publishes ("Amazon EKS and Kubernetes Container Insights metrics", CloudWatch User Guide).

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

NAMESPACE = "ContainerInsights"
# Metrics, and the dimensions each is published with.
FAILED_NODES = "cluster_failed_node_count"  # ClusterName
RUNNING_PODS = "service_number_of_running_pods"  # ClusterName, Namespace, Service
POD_CPU = "pod_cpu_utilization"  # ClusterName, Namespace, PodName (among others)
# Dimensions.
CLUSTER_NAME = "ClusterName"
K8S_NAMESPACE = "Namespace"
SERVICE = "Service"
POD_NAME = "PodName"
