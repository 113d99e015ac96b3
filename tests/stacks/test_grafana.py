"""The viewer, read from the synthesized Cluster template: the pinned Grafana chart with only values that chart has,
closed to every pod and every VPC address but its own node's by its namespace's NetworkPolicy (evaluated with every
policy we render), a Pod Identity role that reads one workspace and one region's CloudWatch metrics, the workspace as
its data source and the live dashboard provisioned."""

from __future__ import annotations

import copy
import ipaddress
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

from charts.endpoint import LABELS as ENDPOINT_LABELS
from charts.jobs.bench import BENCH_LABELS
from charts.live_dashboard import PROMETHEUS_UID, live_dashboard
from config.catalogue import GRAFANA_NAMESPACE
from stacks.constructs.grafana import CLOUDWATCH_ACTIONS, GRAFANA_CHART, GRAFANA_RELEASE, PORT_FORWARD, QUERY_ACTIONS
from tests.charts.conftest import of_kind
from tests.charts.network_policy import Pod, Source, admitted
from tests.charts.test_pod_security import everything_rendered
from tests.conftest import EXAMPLE_ACCOUNT
from tests.iam_check import allowed

GRAFANA_CHART_VERSION = GRAFANA_CHART.version

CHART = json.loads((Path(__file__).parents[1] / "charts" / "fixtures" / "grafana_12_11_1.json").read_text())
ROOT = Path(__file__).parents[2]


def values(synth) -> dict[str, Any]:
    """The chart's values; the workspace URL is a CloudFormation join, so the values are a JSON-with-tokens string."""
    raw = synth.helm_chart("grafana")["Values"]
    text = raw if isinstance(raw, str) else "".join(p if isinstance(p, str) else "TOKEN" for p in raw["Fn::Join"][1])
    return json.loads(text)


def test_grafana_is_the_pinned_chart_and_sets_only_values_that_chart_has(synth):
    chart = synth.helm_chart("grafana")
    assert chart["Version"] == GRAFANA_CHART_VERSION and GRAFANA_CHART_VERSION in CHART["source"]
    assert chart["Repository"] == "https://grafana-community.github.io/helm-charts"
    ours = values(synth)
    for key, value in ours.items():
        assert key in CHART["values"], f"{key} is not a value of the grafana chart {GRAFANA_CHART_VERSION}"
        theirs = CHART["values"][key]
        # An empty default map takes any keys; grafana.ini's sections are free-form (the chart's _config.tpl
        # renders every section it is given into grafana.ini).
        if isinstance(value, dict) and theirs and key != "grafana.ini":
            assert set(value) <= set(theirs), (key, set(value) - set(theirs))


def _grafana_statements(synth) -> tuple[str, list[dict[str, Any]]]:
    """The Grafana role's statements, the workspace's ARN token replaced by a concrete ARN of this region."""
    template = synth.template("Cluster")
    (workspace_id,) = synth.resources("Cluster", "AWS::APS::Workspace")
    (assoc,) = [
        r["Properties"]
        for r in synth.resources("Cluster", "AWS::EKS::PodIdentityAssociation").values()
        if r["Properties"]["Namespace"] == GRAFANA_NAMESPACE
    ]
    assert assoc["ServiceAccount"] == values(synth)["serviceAccount"]["name"]
    role_id = assoc["RoleArn"]["Fn::GetAtt"][0]
    assert "ManagedPolicyArns" not in template["Resources"][role_id]["Properties"]
    ours = f"arn:aws:aps:{synth.config.region}:{EXAMPLE_ACCOUNT}:workspace/ws-ours"
    token = {"Fn::GetAtt": [workspace_id, "Arn"]}
    statements = copy.deepcopy(synth.role_statements(role_id))
    for s in statements:
        if s["Resource"] == token:
            s["Resource"] = ours
    return ours, statements


def test_grafana_reads_only_the_metrics_workspace_and_this_regions_cloudwatch_metrics(synth):
    ours, statements = _grafana_statements(synth)
    region = synth.config.region
    here = {"aws:RequestedRegion": region}
    for action in QUERY_ACTIONS:
        assert allowed(statements, action, ours, here), action
        for other in (ours.replace("ws-ours", "ws-other"), ours.replace(region, "us-west-2")):
            assert not allowed(statements, action, other, here), (action, other)
    for action in CLOUDWATCH_ACTIONS:
        assert allowed(statements, action, "*", here), action
        for elsewhere in ({"aws:RequestedRegion": "us-west-2"}, {"aws:RequestedRegion": "eu-west-1"}, {}):
            assert not allowed(statements, action, "*", elsewhere), (action, elsewhere)
    # Nothing that writes or changes anything, in this region either.
    for action in ("aps:RemoteWrite", "aps:DeleteWorkspace", "cloudwatch:PutMetricData", "cloudwatch:PutDashboard"):
        assert not allowed(statements, action, ours, here) and not allowed(statements, action, "*", here), action
    # Every statement names its resource or carries the region condition.
    assert all(s["Resource"] == ours or s.get("Condition") == {"StringEquals": here} for s in statements)


# The Grafana pod as chart 12.11.1 renders it (grafana-community/helm-charts@864f7794 charts/grafana): its selector
# labels (templates/_helpers.tpl:81-84, release "grafana") and TCP container ports (templates/_pod.tpl:1402-1414:
# podPortName "grafana" on service.targetPort 3000, gossip 9094, profiling 6060).
GRAFANA_POD = Pod(
    GRAFANA_NAMESPACE,
    {"app.kubernetes.io/name": "grafana", "app.kubernetes.io/instance": GRAFANA_RELEASE},
    {"grafana": 3000, "gossip-tcp": 9094, "profiling": 6060},
)
# Namespaces with pods in the cluster: ours, the add-ons' and charts', and any a user adds.
NAMESPACES = ("trn-specdec", GRAFANA_NAMESPACE, "default", "kube-system", "keda", "amazon-cloudwatch", "mount-s3")


def _grafana_policies(synth) -> list[dict[str, Any]]:
    return [o for o in values(synth).get("extraObjects", []) if o["kind"] == "NetworkPolicy"]


def test_no_pod_of_any_namespace_and_no_vpc_address_but_its_own_nodes_reaches_grafana(synth):
    """Every policy we render (the serving namespace's, the Jobs', the autoscaling chart's) plus the viewer's own:
    pods of every namespace wearing any of our labels or Grafana's own, and addresses across the whole VPC, on every
    TCP port of the pod. What Kubernetes lets through whatever the policies say (tests/charts/network_policy.py):
    the node the pod runs on (the kubelet's probes, that system node's processes and hostNetwork pods) and the pod
    itself; `kubectl port-forward` connects over loopback inside the pod's network namespace, where no policy
    applies."""
    config = synth.config
    policies = [*of_kind(everything_rendered(config), "NetworkPolicy").values(), *_grafana_policies(synth)]
    label_sets = [{}, BENCH_LABELS, ENDPOINT_LABELS, dict(GRAFANA_POD.labels), {f"{GRAFANA_RELEASE}-client": "true"}]
    vpc = ipaddress.ip_network(config.network.vpc_cidr)
    step = max(1, vpc.num_addresses // 512)
    addresses = [str(vpc[i]) for i in range(1, vpc.num_addresses - 1, step)]
    pods = [Source(addresses[0], ns, labels) for ns in NAMESPACES for labels in label_sets]
    strangers = [*pods, *(Source(a) for a in addresses)]
    for port in GRAFANA_POD.ports.values():
        for src in strangers:
            assert not admitted(policies, src, GRAFANA_POD, port), (src, port)
        assert admitted(policies, Source(addresses[1], own_node=True), GRAFANA_POD, port)
        assert admitted(policies, Source(addresses[2], own_pod=True), GRAFANA_POD, port)


def test_grafanas_namespace_admits_nothing_and_its_policy_is_a_valid_object(synth):
    policies = _grafana_policies(synth)
    assert policies, "no NetworkPolicy in the viewer's namespace: every pod of the cluster reaches it"
    for p in policies:
        kubernetes_validate.validate(p, f"{synth.config.kubernetes_version}.0", strict=True)
        assert p["metadata"]["namespace"] == GRAFANA_NAMESPACE
        assert "Ingress" in p["spec"]["policyTypes"] and not p["spec"].get("ingress"), p
    assert any(p["spec"]["podSelector"] == {} for p in policies)  # every pod of the namespace, whatever its labels


def test_the_charts_own_policy_and_service_stay_at_their_defaults(synth):
    """The chart's own networkPolicy (allowExternal: true by default, no `from` at all) would add an allow rule the
    evaluation above does not see, and a Service other than its default ClusterIP would open a path from outside."""
    assert "networkPolicy" not in values(synth) and "service" not in values(synth)
    assert CHART["service"]["type"] == "ClusterIP"


def test_the_data_source_is_the_workspace_signed_with_the_pods_identity(synth):
    raw = json.dumps(synth.helm_chart("grafana")["Values"])
    (workspace_id,) = synth.resources("Cluster", "AWS::APS::Workspace")
    assert workspace_id in raw and "aps-workspaces." in raw  # the workspace's query root, joined by CloudFormation
    (amp,) = [d for d in values(synth)["datasources"]["datasources.yaml"]["datasources"] if d["uid"] == PROMETHEUS_UID]
    assert amp["jsonData"]["sigV4Auth"] is True and amp["jsonData"]["sigV4AuthType"] == "default"
    assert values(synth)["grafana.ini"]["aws"] == {"allowed_auth_providers": "default", "assume_role_enabled": False}


def test_the_provisioned_dashboard_is_the_one_built_from_the_config(synth):
    (provider,) = values(synth)["dashboards"].values()
    assert json.loads(provider["serving"]["json"]) == live_dashboard(synth.config)
    assert yaml.safe_dump(values(synth)["dashboardProviders"])  # a provider for that folder exists
    (p,) = values(synth)["dashboardProviders"]["dashboardproviders.yaml"]["providers"]
    assert p["folder"] in values(synth)["dashboards"]


def test_the_readme_and_docs_give_the_one_command_that_reaches_it():
    assert PORT_FORWARD in (ROOT / "README.md").read_text()
    assert PORT_FORWARD in (ROOT / "docs" / "dashboard.md").read_text()
    assert CHART["service"] == {"type": "ClusterIP", "port": 80}  # svc/grafana answers on 80
