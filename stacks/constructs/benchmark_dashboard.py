"""The CloudWatch dashboard of the side-by-side benchmark: baseline vs speculative, per test case."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from constructs import Construct

from config.cost import NO_PRICE, per_million_tokens_factor

# Metric names as bench/cloudwatch.py writes them: raw values (CloudWatch computes the percentiles).
from config.metrics import E2E, ITL, RUN_THROUGHPUT, TEST_CASE, TTFT, VARIANT
from stacks import container_insights as ci

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
        hourly_cost_usd: dict[str, float] | None = None,
    ) -> None:
        """`hourly_cost_usd`: each variant's share of the node price (config/cost.py); None: a note instead of
        the cost graphs."""
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
        self.dashboard.add_widgets(*self._cost_widgets(namespace, variants, test_cases, hourly_cost_usd))

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
    def _cost_widgets(
        namespace: str, variants: list[str], test_cases: list[tuple[str, str]], hourly: dict[str, float] | None
    ) -> list[cw.IWidget]:
        """Per variant, USD per 1M output tokens for each test case: metric math on the run throughput,
        factor / tok/s with factor = USD/h x 1e6 / 3600 (one id per metric in each graph)."""
        if hourly is None:
            return [
                cw.TextWidget(
                    markdown=f"**Cost per 1M output tokens**: {NO_PRICE} (USD per node-hour, in the config).",
                    width=24,
                    height=1,
                )
            ]
        width = max(6, 24 // len(variants))
        widgets: list[cw.IWidget] = []
        for v in variants:
            factor = per_million_tokens_factor(hourly[v])
            series = [
                cw.MathExpression(
                    expression=f"{factor:.6g} / tput{i}",
                    using_metrics={
                        f"tput{i}": cw.Metric(
                            namespace=namespace,
                            metric_name=RUN_THROUGHPUT,
                            dimensions_map={VARIANT: v, TEST_CASE: case},
                            statistic="Average",
                            period=PERIOD,
                        )
                    },
                    label=case,
                    period=PERIOD,
                )
                for i, (case, _) in enumerate(test_cases, start=1)
            ]
            title = f"{v}: USD per 1M output tokens at {hourly[v]:.2f} USD/h"
            widgets.append(cw.GraphWidget(title=title, width=width, left=series))
        return widgets

    @staticmethod
    def _serving_widgets(*, cluster_name: str, k8s_namespace: str, services: list[str]) -> list[cw.IWidget]:
        """Running pods behind each serving Service (the series the not-serving alarms watch) and CPU of
        every pod in the namespace, found by SEARCH so pod names need not be known at synth time."""
        running = [
            cw.Metric(
                namespace=ci.NAMESPACE,
                metric_name=ci.RUNNING_PODS,
                dimensions_map={ci.CLUSTER_NAME: cluster_name, ci.K8S_NAMESPACE: k8s_namespace, ci.SERVICE: s},
                statistic="Minimum",
                period=Duration.minutes(1),
                label=s,
            )
            for s in services
        ]
        pod_cpu = cw.MathExpression(
            expression=(
                f"SEARCH('{{{ci.NAMESPACE},{ci.CLUSTER_NAME},{ci.K8S_NAMESPACE},{ci.POD_NAME}}} "
                f'MetricName="{ci.POD_CPU}" {ci.CLUSTER_NAME}="{cluster_name}" {ci.K8S_NAMESPACE}="{k8s_namespace}"\', '
                "'Average', 60)"
            ),
            label="",
            period=Duration.minutes(1),
        )
        return [
            cw.GraphWidget(title="Running serving pods per Service (Container Insights)", width=12, left=running),
            cw.GraphWidget(title=f"Pod CPU % in {k8s_namespace} (Container Insights)", width=12, left=[pod_cpu]),
        ]
