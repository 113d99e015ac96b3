"""make versions: offline, every pin of the map per Kubernetes version with its source; without credentials one line
and exit 0 after it; with credentials each add-on beside what EKS offers, from botocore's Stubber (every request and
answer checked against botocore's EKS model)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.stub import Stubber

from cloud import aws as config_aws
from config.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from config.profiles import Image
from config.versions import ADDONS, CHARTS, CLUSTER_AUTOSCALER_IMAGES, IMAGES, PLUGINS
from ops import versions_report
from ops.versions_report import NO_CREDENTIALS, Offer, main, pinned_lines, version_key
from serving_stacks import STACKS
from tests.conftest import ROOT

REGION = "us-east-2"


def run(argv: list[str], **kwargs: Any) -> tuple[int, list[str]]:
    out = io.StringIO()
    code = main(argv, stream=out, **kwargs)
    return code, out.getvalue().splitlines()


def test_offline_every_pin_of_every_kubernetes_version_with_its_source():
    code, lines = run(["--offline"])
    assert code == EXIT_OK and lines == pinned_lines("1.35")
    text = "\n".join(lines)
    sections = text.split("Kubernetes ")
    for k8s, addons in ADDONS.items():
        (section,) = [s for s in sections if s.startswith(k8s)]
        for name, pin in addons.items():
            assert f"add-on  {name} {pin.version}  [{pin.source}]" in section
        assert f":{CLUSTER_AUTOSCALER_IMAGES[k8s].version}  [{CLUSTER_AUTOSCALER_IMAGES[k8s].source}]" in section
    for chart in CHARTS.values():
        assert f"chart   {chart.chart} {chart.version} from {chart.repository}  [{chart.source}]" in text
    for pin in [*IMAGES.values(), *PLUGINS.values()]:
        assert f"{pin.version}  [{pin.source}]" in text
    for stack in STACKS:
        assert f"{Image.model_fields['repository'].default}:{stack.IMAGE_TAG}  [the {stack.NAME} stack's" in text


def test_offline_marks_the_configs_kubernetes_version(tmp_path):
    config = tmp_path / "c.yaml"
    text = (ROOT / "config" / "default.yaml").read_text()
    config.write_text(re.sub(r"^kubernetes_version: .*$", 'kubernetes_version: "1.34"', text, count=1, flags=re.M))
    _, lines = run(["--offline", "--config", str(config)])
    assert "Kubernetes 1.34 (this config's):" in lines and "Kubernetes 1.35:" in lines


def _env_without_credentials(tmp_path: Any, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return env | {
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
        **extra,
    }


def test_without_credentials_one_line_after_the_map_and_exit_0(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "ops.versions_report"],
        cwd=ROOT,
        env=_env_without_credentials(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == EXIT_OK and done.stderr == ""
    assert done.stdout.splitlines() == [*pinned_lines("1.35"), NO_CREDENTIALS]


def test_a_profile_that_does_not_exist_is_one_sentence_and_the_usage_exit_code(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "ops.versions_report"],
        cwd=ROOT,
        env=_env_without_credentials(tmp_path, AWS_PROFILE="nope"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == EXIT_USAGE and "Traceback" not in done.stderr
    assert done.stderr.startswith("versions: AWS_PROFILE='nope' names no profile in the AWS config")


@pytest.fixture
def eks() -> Iterator[tuple[Any, Stubber]]:
    client = config_aws.client("eks", REGION)
    stubber = Stubber(client)
    stubber.activate()
    yield client, stubber
    stubber.assert_no_pending_responses()
    stubber.deactivate()


def answer(name: str, k8s: str, *versions: str, default: str | None = None, token: str | None = None) -> dict:
    page: dict[str, Any] = {
        "addons": [
            {
                "addonName": name,
                "type": "networking",
                "addonVersions": [
                    {
                        "addonVersion": v,
                        "architecture": ["amd64", "arm64"],
                        "compatibilities": [
                            {"clusterVersion": k8s, "platformVersions": ["*"], "defaultVersion": v == default}
                        ],
                        "requiresConfiguration": False,
                    }
                    for v in versions
                ],
            }
        ]
    }
    return page | ({"nextToken": token} if token else {})


def expect_every_addon(stubber: Stubber, offered: Any) -> None:
    """One DescribeAddonVersions answer per pinned add-on and Kubernetes version, in the map's order."""
    for k8s, addons in ADDONS.items():
        for name, pin in addons.items():
            versions, default = offered(name, k8s, pin.version)
            params = {"addonName": name, "kubernetesVersion": k8s}
            stubber.add_response("describe_addon_versions", answer(name, k8s, *versions, default=default), params)


def test_each_addon_beside_eks_default_and_newest_build(eks):
    client, stubber = eks
    expect_every_addon(stubber, lambda name, k8s, pinned: (("v99.0.0-eksbuild.1", pinned, "v0.1.0-eksbuild.1"), pinned))
    code, lines = run([], eks=client)
    assert code == EXIT_OK
    at = lines.index(f"What EKS offers now (DescribeAddonVersions, {REGION}):")
    assert lines[:at] == pinned_lines("1.35")
    for k8s, addons in ADDONS.items():
        block = lines[lines.index(f"Kubernetes {k8s}:", at) :]
        for name, pin in addons.items():
            line = f"  {name} pinned {pin.version}: EKS default {pin.version}, newest v99.0.0-eksbuild.1; a newer build is offered"
            assert line in block[: len(addons) + 1]


def test_a_pin_eks_does_not_offer_is_named_and_one_it_offers_as_newest_says_so(eks):
    client, stubber = eks

    def offered(name: str, k8s: str, pinned: str) -> tuple[tuple[str, ...], str | None]:
        if (name, k8s) == ("coredns", "1.35"):
            return ("v1.14.9-eksbuild.1",), None
        return (pinned,), pinned

    expect_every_addon(stubber, offered)
    _, lines = run([], eks=client)
    pinned = ADDONS["1.35"]["coredns"].version
    assert (
        f"  coredns pinned {pinned}: EKS default none, newest v1.14.9-eksbuild.1; the pin is NOT OFFERED "
        "(make preflight fails on it)"
    ) in lines
    kube_proxy = ADDONS["1.34"]["kube-proxy"].version
    assert (
        f"  kube-proxy pinned {kube_proxy}: EKS default {kube_proxy}, newest {kube_proxy}; the pin is the newest"
        in lines
    )


def test_every_page_of_the_answer_is_read(eks):
    client, stubber = eks
    params = {"addonName": "coredns", "kubernetesVersion": "1.35"}
    stubber.add_response("describe_addon_versions", answer("coredns", "1.35", "v1.1.0-eksbuild.1", token="t"), params)
    last = answer("coredns", "1.35", "v1.2.0-eksbuild.1", default="v1.2.0-eksbuild.1")
    stubber.add_response("describe_addon_versions", last, params | {"nextToken": "t"})
    assert versions_report.offer(client, "coredns", "1.35") == Offer(
        ("v1.1.0-eksbuild.1", "v1.2.0-eksbuild.1"), "v1.2.0-eksbuild.1"
    )


def test_the_default_is_the_one_marked_for_the_asked_kubernetes_version(eks):
    client, stubber = eks
    page = answer("vpc-cni", "1.35", "v1.22.0-eksbuild.1", "v1.21.1-eksbuild.8")
    first, second = page["addons"][0]["addonVersions"]
    first["compatibilities"] = [{"clusterVersion": "1.35", "defaultVersion": True}]
    second["compatibilities"] = [{"clusterVersion": "1.34", "defaultVersion": True}, {"clusterVersion": "1.35"}]
    stubber.add_response("describe_addon_versions", page, {"addonName": "vpc-cni", "kubernetesVersion": "1.35"})
    assert versions_report.offer(client, "vpc-cni", "1.35").default == "v1.22.0-eksbuild.1"


def test_newest_compares_versions_as_numbers_not_as_text_or_answer_order():
    found = Offer(("v1.9.0-eksbuild.10", "v1.10.0-eksbuild.2", "v1.10.0-eksbuild.10", "v1.10.0-eksbuild.9"), None)
    assert found.newest == "v1.10.0-eksbuild.10"
    assert version_key("v1.34.6-eksbuild.13") == (1, 34, 6, 13)


def test_an_error_aws_answers_is_one_sentence_and_exit_1(eks, capsys):
    client, stubber = eks
    stubber.add_client_error("describe_addon_versions", "AccessDeniedException", "not allowed", 403)
    code, lines = run([], eks=client)
    assert code == EXIT_FAILED and lines == pinned_lines("1.35")
    err = capsys.readouterr().err
    assert err.startswith("versions: EKS DescribeAddonVersions: access denied") and "run make versions again" in err
