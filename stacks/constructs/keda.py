"""KEDA, from its Helm chart at a pinned version, with a Pod Identity role that may only query one Prometheus
workspace."""

from __future__ import annotations

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from config.catalogue import KEDA_NAMESPACE, NODE_ROLE_LABEL
from config.versions import CHARTS, KEDA
from stacks.constructs.pinned_chart import ChartRelease, SignedChart, SignedChartPrerequisites

# The pinned chart comes from the version map (config/versions.py, kedacore/charts keda 2.20.2 at cbb9bb8c). The
# values below and the ScaledObject/TriggerAuthentication schemas the tests check against are read at that commit
# (tests/charts/fixtures/keda_2_20_2.json).
KEDA_CHART = CHARTS[KEDA]
KEDA_OPERATOR_SERVICE_ACCOUNT = "keda-operator"  # the chart's serviceAccount.operator.name default, set explicitly
KEDA_RELEASE = ChartRelease(
    KEDA_CHART, "keda", KEDA_NAMESPACE, create_namespace=True, service_account=KEDA_OPERATOR_SERVICE_ACCOUNT
)
# The only call KEDA's prometheus scaler makes: GET <workspace>/api/v1/query, which AMP authorizes as
# aps:QueryMetrics (AMP user guide, "Amazon Managed Service for Prometheus permissions").
QUERY_ACTIONS = ("aps:QueryMetrics",)


class Keda(SignedChart):
    """KEDA's operator, metrics API server and admission webhooks on the system nodes.

    The operator signs its queries to the workspace with SigV4 as itself (TriggerAuthentication podIdentity provider
    `aws`, identityOwner keda): the AWS SDK's default chain finds the EKS Pod Identity credentials.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        workspace_arn: str,
        after: SignedChartPrerequisites,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            cluster=cluster,
            release=KEDA_RELEASE,
            role="KEDA operator: query the serving metrics workspace (aps:QueryMetrics), nothing else",
            statements=[iam.PolicyStatement(actions=list(QUERY_ACTIONS), resources=[workspace_arn])],
            values={
                "nodeSelector": {NODE_ROLE_LABEL: "system"},
                "serviceAccount": {"operator": {"name": KEDA_OPERATOR_SERVICE_ACCOUNT}},
            },
            after=after,
        )
