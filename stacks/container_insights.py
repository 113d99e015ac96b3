"""The Container Insights metrics the CloudWatch observability add-on publishes at the version the map pins.

The add-on's chart (aws-observability/helm-charts, charts/amazon-cloudwatch-observability) introduced OTel Container
Insights enabled by default in v6.0.0 and turned it off by default again in v6.2.0 ("Disable Otel Container Insights
by default", RELEASE_NOTES); at v6.4.0 (release commit 93a934e8) values.yaml has `containerInsights.enabled: true`
(the Classic pipeline, `logs.metrics_collected.kubernetes`) and `otelContainerInsights.enabled: false`. So the pinned
version publishes the Classic names below in namespace ContainerInsights, and no OTel names. The pinned add-on version
itself lives in the version map (config/versions.py); NAMES_READ_AT is the chart version these names were read at,
and tests/stacks/test_metrics_and_scaling.py checks that the synthesized add-on has it.

Names and dimension sets: CloudWatch User Guide, "Amazon EKS and Kubernetes Container Insights metrics". Alarms and
dashboard widgets may read only these (tests/stacks/test_observability_stack.py checks every one).

Leaf module: imports only the version map.
"""

from __future__ import annotations

from config.versions import CLOUDWATCH_OBSERVABILITY

ADDON_NAME = CLOUDWATCH_OBSERVABILITY
# EKS add-on versions are the chart version plus an EKS build (v6.4.0-eksbuild.1): the names below hold for this one.
NAMES_READ_AT = "v6.4.0"
NAMESPACE = "ContainerInsights"

# The metrics the dashboard and the alarms read, and the dimensions each is published with.
FAILED_NODES = "cluster_failed_node_count"  # ClusterName
RUNNING_PODS = "service_number_of_running_pods"  # ClusterName, Namespace, Service
POD_CPU = "pod_cpu_utilization"  # ClusterName, Namespace, PodName (among others)
CLUSTER_NAME = "ClusterName"
K8S_NAMESPACE = "Namespace"
SERVICE = "Service"
POD_NAME = "PodName"

_POD = ("ClusterName", "Namespace", "PodName")
_SERVICE = ("ClusterName", "Namespace", "Service")
_NAMESPACE = ("ClusterName", "Namespace")
_CLUSTER = ("ClusterName",)

# metric name -> the dimension sets it is published with (each a sorted tuple)
CLASSIC_METRICS: dict[str, tuple[tuple[str, ...], ...]] = {
    "cluster_failed_node_count": (_CLUSTER,),
    "cluster_node_count": (_CLUSTER,),
    "namespace_number_of_running_pods": (_NAMESPACE, _CLUSTER),
    "service_number_of_running_pods": (_SERVICE, _CLUSTER),
    "pod_cpu_utilization": (_POD, _NAMESPACE, _SERVICE, _CLUSTER),
    "pod_memory_utilization": (_POD, _NAMESPACE, _SERVICE, _CLUSTER),
    "pod_number_of_container_restarts": (_POD,),
}
