"""The one live metrics store: an Amazon Managed Service for Prometheus workspace, filled by its agentless managed
scraper (AWS::APS::Scraper) with every vLLM pod's /metrics. KEDA, the alert rules and `make`'s checks read it.

Why this store and what it costs: docs/metrics-and-scaling.md. Both resources are CloudFormation's, so
`cdk destroy` removes them; the scraper's network interfaces in the private subnets go with it.
"""

from __future__ import annotations

from typing import Any

import yaml
from aws_cdk import CfnTag, Fn, Stack
from aws_cdk import aws_aps as aps
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from charts.endpoint import LABELS as ENDPOINT_POD_LABELS
from charts.endpoint import METRICS_PORT_NAME as ENDPOINT_METRICS_PORT_NAME
from charts.live_dashboard import ENVOY_CLUSTER_LABEL, ENVOY_METRICS
from charts.metrics_proxy import METRICS_PORT_NAME as METRICS_PROXY_PORT_NAME
from config.endpoint import CAPPED_SUFFIX
from config.endpoint import METRICS_PATH as ENDPOINT_METRICS_PATH
from config.labels import PROFILE as PROFILE_POD_LABEL
from config.labels import VLLM_POD_LABELS
from config.metrics import NAMESPACE_LABEL, POD_LABEL, PROFILE_LABEL, SCRAPE_JOB, VLLM_METRIC_PREFIXES
from config.schema import DeploymentConfig
from serving_stacks import stack_named
from serving_stacks.contract import ServingStack

# "The scraper config can't specify a scrape interval of less than 30 seconds" (AMP user guide, "Using an AWS managed
# collector", Scraper configuration: https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html);
# below it CreateScraper fails and `make deploy` rolls back. tests/stacks/test_metrics_and_scaling.py reads the rendered
# configuration against that number.
SCRAPE_INTERVAL_SECONDS = 30
# The EKS control plane's kube-scheduler metrics, which the API server serves to the scraper (EKS user guide,
# "Fetch control plane raw metrics in Prometheus format"): scheduler_pending_pods{queue="unschedulable"} is how demand
# above the static trn2 capacity shows.
SCHEDULER_JOB = "kube-scheduler"
SCHEDULER_METRICS_PATH = "/apis/metrics.eks.amazonaws.com/v1/ksh/container/metrics"
SCHEDULER_METRICS = ("scheduler_pending_pods",)
SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def _label(name: str) -> str:
    """A Kubernetes pod label as Prometheus service discovery names it (every character not [a-zA-Z0-9_] -> _)."""
    return "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def _keep_pods(pod_labels: dict[str, str]) -> list[dict[str, Any]]:
    """Relabel rules that keep only the pods carrying every one of `pod_labels`."""
    return [{"source_labels": [_label(k)], "regex": v, "action": "keep"} for k, v in sorted(pod_labels.items())]


def _keep_port(port_name: str) -> dict[str, Any]:
    """The relabel rule that keeps only the pod's container port named `port_name`."""
    return {"source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": port_name, "action": "keep"}


def _namespace_and_pod() -> list[dict[str, Any]]:
    """Relabel rules that label every series with the namespace and pod it was scraped from (new dicts each call:
    yaml.safe_dump would write a shared one as an anchor and aliases)."""
    return [
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": NAMESPACE_LABEL},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": POD_LABEL},
    ]


def vllm_scrape_job(
    *, job: str, namespace: str, pod_labels: dict[str, str], profiles: list[str], metrics_path: str, port_name: str
) -> dict[str, Any]:
    """One scrape job: the vLLM pods of `profiles` in `namespace`, on their named port and path, keeping only vLLM's
    own series (each kept series is billed), labelled with the serving profile, namespace and pod."""
    return {
        "job_name": job,
        "metrics_path": metrics_path,
        "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [namespace]}}],
        "relabel_configs": [
            *_keep_pods(pod_labels),
            {"source_labels": [_label(PROFILE_POD_LABEL)], "regex": "|".join(profiles), "action": "keep"},
            _keep_port(port_name),
            {"source_labels": [_label(PROFILE_POD_LABEL)], "target_label": PROFILE_LABEL},
            *_namespace_and_pod(),
        ],
        "metric_relabel_configs": [
            {
                "source_labels": ["__name__"],
                "regex": "(" + "|".join(VLLM_METRIC_PREFIXES) + ").*",
                "action": "keep",
            }
        ],
    }


def scheduler_scrape_job() -> dict[str, Any]:
    """The kube-scheduler's pending-pod gauge from the EKS API server (the `kubernetes` Service in `default`), as AWS's
    sample `ksh-metrics` job has it: a bearer token file and no `tls_config`. The guide's complete list of allowed
    sections (global, scrape_config, static_config, relabel_config, metric_relabel_configs, kubernetes_sd_config) has
    no tls_config, so the CA file it named is left out."""
    return {
        "job_name": SCHEDULER_JOB,
        "scheme": "https",
        "metrics_path": SCHEDULER_METRICS_PATH,
        "bearer_token_file": SERVICE_ACCOUNT_TOKEN,
        "kubernetes_sd_configs": [{"role": "endpoints", "namespaces": {"names": ["default"]}}],
        "relabel_configs": [
            {
                "source_labels": [
                    "__meta_kubernetes_namespace",
                    "__meta_kubernetes_service_name",
                    "__meta_kubernetes_endpoint_port_name",
                ],
                "regex": "default;kubernetes;https",
                "action": "keep",
            }
        ],
        "metric_relabel_configs": [
            {"source_labels": ["__name__"], "regex": "|".join(SCHEDULER_METRICS), "action": "keep"}
        ],
    }


ENDPOINT_JOB = "endpoint"


def endpoint_scrape_job(*, namespace: str, profiles: list[str]) -> dict[str, Any]:
    """The endpoint's Envoy on its metrics port, keeping only the cluster counters the dashboard and the spill alert
    read, and only for the profiles' own and capped clusters (Envoy serves hundreds of series per pod otherwise)."""
    clusters = "(" + "|".join(profiles) + f")({CAPPED_SUFFIX})?"
    return {
        "job_name": ENDPOINT_JOB,
        "metrics_path": ENDPOINT_METRICS_PATH,
        "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [namespace]}}],
        "relabel_configs": [
            *_keep_pods(ENDPOINT_POD_LABELS),
            _keep_port(ENDPOINT_METRICS_PORT_NAME),
            *_namespace_and_pod(),
        ],
        "metric_relabel_configs": [
            {"source_labels": ["__name__"], "regex": "|".join(ENVOY_METRICS), "action": "keep"},
            {"source_labels": [ENVOY_CLUSTER_LABEL], "regex": clusters, "action": "keep"},
        ],
    }


def serving_scrape_jobs(config: DeploymentConfig) -> list[dict[str, Any]]:
    """One vLLM job per serving stack in use (each stack says where its metrics are), then the scheduler's."""
    by_stack: dict[ServingStack, list[str]] = {}
    for p in config.profiles:
        by_stack.setdefault(stack_named(p.image.stack), []).append(p.name)
    jobs = []
    for stack, profiles in sorted(by_stack.items(), key=lambda item: item[0].NAME):
        jobs.append(
            vllm_scrape_job(
                job=SCRAPE_JOB if len(by_stack) == 1 else f"{SCRAPE_JOB}-{stack.NAME}",
                namespace=config.namespace,
                pod_labels=VLLM_POD_LABELS,
                profiles=profiles,
                metrics_path=stack.METRICS_PATH,
                # vLLM's port also serves the unauthenticated API: the scraper reads the pod's metrics-only sidecar.
                port_name=METRICS_PROXY_PORT_NAME,
            )
        )
    if config.endpoint.enabled:
        jobs.append(endpoint_scrape_job(namespace=config.namespace, profiles=[p.name for p in config.profiles]))
    return [*jobs, scheduler_scrape_job()]


def scrape_configuration(jobs: list[dict[str, Any]]) -> str:
    """The Prometheus configuration the managed scraper runs (Prometheus `scrape_config` syntax)."""
    return yaml.safe_dump(
        {"global": {"scrape_interval": f"{SCRAPE_INTERVAL_SECONDS}s"}, "scrape_configs": jobs}, sort_keys=False
    )


def alert_manager_definition(topic_arn: str, region: str) -> str:
    """Every firing alert to one SNS topic (AMP user guide, "Alert manager configuration": sns_configs with sigv4).
    The topic's policy must let aps.amazonaws.com publish (the topic is yours, not this app's)."""
    config = {
        "route": {"receiver": "sns"},
        "receivers": [{"name": "sns", "sns_configs": [{"topic_arn": topic_arn, "sigv4": {"region": region}}]}],
    }
    body = yaml.safe_dump(config, sort_keys=False)
    return "alertmanager_config: |\n" + "".join(f"  {line}\n" for line in body.splitlines())


class ManagedPrometheus(Construct):
    """Workspace + managed scraper for one cluster. The scraper reaches the pods from the cluster's private subnets
    with the cluster security group (which the nodes carry); it needs no RBAC of ours: in the cluster's API
    authentication mode AMP creates its access entry itself (charts/autoscaling.py ScraperAccess says why)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        alias: str,
        cluster: eks.ICluster,
        vpc: ec2.IVpc,
        jobs: list[dict[str, Any]],
        alert_topic_arn: str | None,
        tags: dict[str, str],
    ) -> None:
        super().__init__(scope, construct_id)
        cfn_tags = [CfnTag(key=k, value=v) for k, v in sorted(tags.items())]
        self.workspace = aps.CfnWorkspace(
            self,
            "Workspace",
            alias=alias,
            alert_manager_definition=alert_manager_definition(alert_topic_arn, Stack.of(self).region)
            if alert_topic_arn
            else None,
            tags=cfn_tags,
        )
        self.configuration = scrape_configuration(jobs)
        self.scraper = aps.CfnScraper(
            self,
            "Scraper",
            alias=alias,
            source=aps.CfnScraper.SourceProperty(
                eks_configuration=aps.CfnScraper.EksConfigurationProperty(
                    cluster_arn=cluster.cluster_arn,
                    subnet_ids=vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnet_ids,
                    security_group_ids=[cluster.cluster_security_group_id],
                )
            ),
            destination=aps.CfnScraper.DestinationProperty(
                amp_configuration=aps.CfnScraper.AmpConfigurationProperty(workspace_arn=self.workspace.attr_arn)
            ),
            # "Prometheus compatible scrape configuration in base64 encoded blob format" (resource schema).
            scrape_configuration=aps.CfnScraper.ScrapeConfigurationProperty(
                configuration_blob=Fn.base64(self.configuration)
            ),
            tags=cfn_tags,
        )

    @property
    def query_url(self) -> str:
        """The workspace's Prometheus query root; clients append /api/v1/query (KEDA's prometheus scaler does)."""
        region = Stack.of(self).region
        return f"https://aps-workspaces.{region}.amazonaws.com/workspaces/{self.workspace.attr_workspace_id}"
