"""The viewer, read from the synthesized Cluster template: the pinned Grafana chart with only values that chart has,
a Pod Identity role that reads one workspace and CloudWatch metrics, the workspace as its data source and the live
dashboard provisioned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from charts.live_dashboard import PROMETHEUS_UID, live_dashboard
from stacks.constructs.grafana import GRAFANA_CHART, PORT_FORWARD, QUERY_ACTIONS

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


def test_grafana_reads_only_the_metrics_workspace_and_cloudwatch_metrics(synth):
    template = synth.template("Cluster")
    (workspace_id,) = synth.resources("Cluster", "AWS::APS::Workspace")
    (assoc,) = [
        r["Properties"]
        for r in synth.resources("Cluster", "AWS::EKS::PodIdentityAssociation").values()
        if r["Properties"]["Namespace"] == "grafana"
    ]
    assert assoc["ServiceAccount"] == values(synth)["serviceAccount"]["name"]
    role_id = assoc["RoleArn"]["Fn::GetAtt"][0]
    statements = synth.role_statements(role_id)
    by_resource = {json.dumps(s["Resource"]): sorted(s["Action"]) for s in statements}
    assert by_resource == {
        json.dumps({"Fn::GetAtt": [workspace_id, "Arn"]}): sorted(QUERY_ACTIONS),
        '"*"': ["cloudwatch:DescribeAlarmsForMetric", "cloudwatch:GetMetricData", "cloudwatch:ListMetrics"],
    }
    assert all(not a.endswith(("Put", "Delete")) for s in statements for a in s["Action"])
    assert "ManagedPolicyArns" not in template["Resources"][role_id]["Properties"]


def test_the_data_source_is_the_workspace_signed_with_the_pods_identity(synth):
    raw = json.dumps(synth.helm_chart("grafana")["Values"])
    (workspace_id,) = synth.resources("Cluster", "AWS::APS::Workspace")
    assert workspace_id in raw and "aps-workspaces." in raw  # the workspace's query root, joined by CloudFormation
    (amp,) = [d for d in values(synth)["datasources"]["datasources.yaml"]["datasources"] if d["uid"] == PROMETHEUS_UID]
    assert amp["jsonData"]["sigV4Auth"] is True and amp["jsonData"]["sigV4AuthType"] == "default"
    assert values(synth)["grafana.ini"]["aws"]["allowed_auth_providers"] == "default"


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
