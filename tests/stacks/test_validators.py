"""Every synthesized template passes cfn-lint (us-east-2) and cdk-nag AwsSolutions with reasons on record."""

from __future__ import annotations

import json

import pytest

from tests.conftest import THREE_PROFILE_CONFIGS, cfn_lint_errors


def test_cfn_lint_reports_no_errors(synth, variant_synth, three_profile_synths, plugin_synth):
    synths = [synth, variant_synth, *three_profile_synths.values(), plugin_synth]
    for s in synths:
        assert len(list(s.outdir.glob("*.template.json"))) == len(s.templates)
    errors = cfn_lint_errors(*(s.outdir for s in synths))  # one cfn-lint run: its start-up costs seconds
    assert not errors, json.dumps(errors, indent=1)[:4000]


@pytest.mark.parametrize("which", ["synth", "variant_synth", "plugin_synth", *THREE_PROFILE_CONFIGS])
def test_cdk_nag_has_no_unacknowledged_findings(which, request):
    s = (
        request.getfixturevalue("three_profile_synths")[which]
        if which in THREE_PROFILE_CONFIGS
        else request.getfixturevalue(which)
    )
    report = s.validation_report
    (nag,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    assert nag["conclusion"] == "success"
    assert nag["violations"] == []
    for suppressed in nag["suppressedViolations"]:
        assert len(suppressed["reason"]) > 40, suppressed
        if suppressed["ruleName"].split("[")[0] in {"AwsSolutions-IAM4", "AwsSolutions-IAM5"}:
            assert "[" in suppressed["acknowledgedId"], f"blanket IAM acknowledgment: {suppressed['acknowledgedId']}"


# CloudFormation quotas (AWS CloudFormation user guide, "CloudFormation quotas"): a template body uploaded through S3
# is at most 1 MB (1,000,000 bytes read strictly) and a stack has at most 500 resources. Read here as the guide says,
# from the template files the CLI uploads, for every synthesized config.
CFN_TEMPLATE_BYTES = 1_000_000
CFN_RESOURCES_PER_STACK = 500


def test_every_template_fits_cloudformations_size_and_resource_quotas(
    synth, variant_synth, plugin_synth, three_profile_synths
):
    for s in (synth, variant_synth, plugin_synth, *three_profile_synths.values()):
        files = {p.name.removesuffix(".template.json"): p for p in s.outdir.glob("*.template.json")}
        assert set(s.templates) <= set(files)
        for stack in s.templates:
            size = files[stack].stat().st_size
            resources = len(json.loads(files[stack].read_text())["Resources"])
            assert size <= CFN_TEMPLATE_BYTES, f"{stack}: {size:,} bytes"
            assert resources <= CFN_RESOURCES_PER_STACK, f"{stack}: {resources} resources"
