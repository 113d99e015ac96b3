"""Every synthesized template passes cfn-lint (us-east-2) and cdk-nag AwsSolutions with reasons on record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CFN_LINT = Path(sys.executable).with_name("cfn-lint")


@pytest.mark.parametrize("which", ["synth", "variant_synth"])
def test_cfn_lint_reports_no_errors(which, request):
    s = request.getfixturevalue(which)
    files = sorted(str(p) for p in s.outdir.glob("*.template.json"))
    assert len(files) == len(s.templates)
    result = subprocess.run(
        [str(CFN_LINT), "--regions", "us-east-2", "--format", "json", "--", *files],
        capture_output=True,
        text=True,
        timeout=300,
    )
    findings = json.loads(result.stdout or "[]")
    errors = [f for f in findings if f["Level"] == "Error"]
    assert not errors, json.dumps(errors, indent=1)[:4000]
    assert result.returncode in (0, 4), result.stderr  # 4 = warnings only


@pytest.mark.parametrize("which", ["synth", "variant_synth"])
def test_cdk_nag_has_no_unacknowledged_findings(which, request):
    report = request.getfixturevalue(which).validation_report
    (nag,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    assert nag["conclusion"] == "success"
    assert nag["violations"] == []
    for suppressed in nag["suppressedViolations"]:
        assert len(suppressed["reason"]) > 40, suppressed
        if suppressed["ruleName"].split("[")[0] in {"AwsSolutions-IAM4", "AwsSolutions-IAM5"}:
            assert "[" in suppressed["acknowledgedId"], f"blanket IAM acknowledgment: {suppressed['acknowledgedId']}"
