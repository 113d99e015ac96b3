"""The CloudWatch dashboard of the side-by-side benchmark: baseline vs speculative, per test case."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from constructs import Construct

# Metric names as bench/cloudwatch.py writes them: raw values (CloudWatch computes the percentiles).
from config.metrics import E2E, ITL, RUN_THROUGHPUT, TEST_CASE, TTFT, VARIANT

PERIOD = Duration.hours(1)


class BenchmarkDashboard(Construct):
    """One row per test case: token-weighted ITL p50/p90 of every variant, the ITL speedup of each
    speculative variant over the baseline as metric math, TTFT, end-to-end latency and output throughput;
    on top, the serving pods from Container Insights.

    No NeuronCore series: neuron-monitor "does not currently support environments using the Neuron DRA
    Driver" (Neuron docs, containers/tutorials/k8s-neuron-monitor.rst), and this cluster allocates devices
    with DRA, so `node_neuroncore_utilization` would stay empty. The series shown instead are ones
    Container Insights derives from the Kubernetes API and cgroups, which do not depend on the device
    plugin (CloudWatch docs, "Amazon EKS and Kubernetes Container Insights metrics")."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        dashboard_name: str,
        namespace: str,
        cluster_name: str,
        k8s_namespace: str,
        baseline: str,
        variants: list[str],
        test_cases: list[tuple[str, str]],
    ) -> None:
        super().__init__(scope, construct_id)
        self.dashboard = cw.Dashboard(
            self, "Dashboard", dashboard_name=dashboard_name, default_interval=Duration.days(1)
        )
        self.dashboard.add_widgets(
            cw.TextWidget(
                markdown=(
                    f"# {dashboard_name}\nSpeedup = baseline ITL p50 / variant ITL p50 (above 1 is faster). "
                    "Latencies are token-weighted, from `python -m bench run --cloudwatch`."
                ),
                width=24,
                height=2,
            ),
            *self._serving_widgets(cluster_name=cluster_name, k8s_namespace=k8s_namespace, services=variants),
        )
        others = [v for v in variants if v != baseline]

        def metric(name: str, variant: str, case: str, stat: str) -> cw.Metric:
            return cw.Metric(
                namespace=namespace,
                metric_name=name,
                dimensions_map={VARIANT: variant, TEST_CASE: case},
                statistic=stat,
                period=PERIOD,
                label=f"{variant} {stat}",
            )

        for case, kind in test_cases:
            itl = [metric(ITL, v, case, s) for v in variants for s in ("p50", "p90")]
            # Metric-math ids are unique per graph: "base" is the same metric in every expression, each
            # variant gets its own id (CloudWatch rejects one id naming two metrics in one widget).
            speedups = [
                cw.MathExpression(
                    expression=f"base / spec{i}",
                    using_metrics={"base": metric(ITL, baseline, case, "p50"), f"spec{i}": metric(ITL, v, case, "p50")},
                    label=f"{v} speedup",
                    period=PERIOD,
                )
                for i, v in enumerate(others, start=1)
            ]
            self.dashboard.add_widgets(
                cw.GraphWidget(title=f"{case} ({kind}): ITL ms", width=8, left=itl),
                cw.GraphWidget(title=f"{case}: ITL speedup vs {baseline}", width=4, left=speedups),
                cw.GraphWidget(
                    title=f"{case}: TTFT / E2E ms (p50)",
                    width=8,
                    left=[metric(TTFT, v, case, "p50") for v in variants],
                    right=[metric(E2E, v, case, "p50") for v in variants],
                ),
                cw.GraphWidget(
                    title=f"{case}: output tok/s",
                    width=4,
                    left=[metric(RUN_THROUGHPUT, v, case, "Average") for v in variants],
                ),
            )

    @staticmethod
    def _serving_widgets(*, cluster_name: str, k8s_namespace: str, services: list[str]) -> list[cw.IWidget]:
        """Running pods behind each serving Service (the series the not-serving alarms watch) and CPU of
        every pod in the namespace, found by SEARCH so pod names need not be known at synth time."""
        running = [
            cw.Metric(
                namespace="ContainerInsights",
                metric_name="service_number_of_running_pods",
                dimensions_map={"ClusterName": cluster_name, "Namespace": k8s_namespace, "Service": s},
                statistic="Minimum",
                period=Duration.minutes(1),
                label=s,
            )
            for s in services
        ]
        pod_cpu = cw.MathExpression(
            expression=(
                "SEARCH('{ContainerInsights,ClusterName,Namespace,PodName} "
                f'MetricName="pod_cpu_utilization" ClusterName="{cluster_name}" Namespace="{k8s_namespace}"\', '
                "'Average', 60)"
            ),
            label="",
            period=Duration.minutes(1),
        )
        return [
            cw.GraphWidget(title="Running serving pods per Service (Container Insights)", width=12, left=running),
            cw.GraphWidget(title=f"Pod CPU % in {k8s_namespace} (Container Insights)", width=12, left=[pod_cpu]),
        ]
