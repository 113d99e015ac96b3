"""Workloads stack: the serving chart goes through the cluster's kubectl provider, after DRA and the CSI driver,
and each service's role reads only its own prefixes."""

from __future__ import annotations

import json

from model_build.digest import profile_digest
from stacks.constructs.neuron_dra_driver import NEURON_RELEASE
from tests.iam_check import statements_by_service_account


def _manifests(synth) -> dict[str, dict]:
    return {k: r for k, r in synth.resources("Workloads", "Custom::AWSCDK-EKS-KubernetesResource").items()}


def test_every_group_is_applied_through_the_kubectl_provider_after_the_base(synth):
    manifests = _manifests(synth)
    names = {k.split("k8s")[1].rstrip("0123456789ABCDEF") for k in manifests}
    assert names == {
        "base",
        "servicebaseline",
        "servicespeculative",
        "endpoint",
        "sharedcode",
        "modelbuildcode",
        "modelbuild",
        "bench",
        "benchrequirements",
        "autoscaling",
    }
    (base_id,) = [k for k in manifests if k.startswith("k8sbase")]
    for logical_id, resource in manifests.items():
        assert resource["Properties"]["Overwrite"] is True
        if logical_id != base_id:
            assert base_id in resource.get("DependsOn", []), logical_id


def test_each_manifest_fits_the_kubectl_handlers_payload_limit(synth):
    """The handler is invoked as an event (256 KiB) and an update carries the old and the new manifest."""
    for logical_id, resource in _manifests(synth).items():
        size = len(json.dumps(resource["Properties"]["Manifest"]))
        assert 2 * size < 200_000, f"{logical_id} is {size} bytes"


def test_workloads_deploy_after_the_cluster_stack(synth):
    manifest = json.loads((synth.outdir / "manifest.json").read_text())
    deps = manifest["artifacts"]["TrnSpecdec-Workloads"]["dependencies"]
    assert "TrnSpecdec-Cluster" in deps


def depends_on(dependencies: dict[str, list[str]], source: str, target: str) -> bool:
    """Whether the construct at path `source` waits for the resource at path `target`, following the constructs'
    dependencies transitively (CDK semantics: a construct's dependencies hold for every resource below it, and a
    dependency on a construct is one on every resource below that)."""

    def below(path: str, scope: str) -> bool:
        return path == scope or path.startswith(scope + "/")

    seen: set[str] = set()
    frontier = [source]
    while frontier:
        path = frontier.pop()
        # what this subtree and the scopes above it depend on
        for holder, deps in dependencies.items():
            if not (below(holder, path) or below(path, holder)):
                continue
            for dep in deps:
                if below(target, dep):
                    return True
                if dep not in seen:
                    seen.add(dep)
                    frontier.append(dep)
    return False


def _claiming_devices(synth) -> list[str]:
    """The construct paths of the Workloads manifests whose pods claim devices through DRA: the services."""
    return [
        synth.path("Workloads", logical_id)
        for logical_id, r in _manifests(synth).items()
        if "resourceClaimTemplateName" in json.dumps(r["Properties"])
    ]


def test_the_serving_objects_wait_for_the_dra_drivers_release(synth):
    """A DRA ResourceClaimTemplate needs the driver's DeviceClass: every manifest that claims Trainium devices must
    depend on the Neuron DRA driver's Helm release. Across stacks this leaves no DependsOn (CDK orders the stacks), so
    it is read from the construct dependencies recorded at synthesis (tests/conftest.py)."""
    charts = synth.resources("Cluster", "Custom::AWSCDK-EKS-HelmChart").items()
    releases = [
        synth.path("Cluster", logical_id)
        for logical_id, r in charts
        if (r["Properties"]["Chart"], r["Properties"]["Release"]) == (NEURON_RELEASE.pin.chart, NEURON_RELEASE.name)
    ]
    assert len(releases) == 1, f"the Cluster stack installs the Neuron DRA driver's chart {len(releases)} times"
    (release,) = releases
    claiming = _claiming_devices(synth)
    assert len(claiming) == len(synth.config.profiles)
    early = [path for path in claiming if not depends_on(synth.constructs.dependencies, path, release)]
    assert not early, f"{early} may be applied before the DRA driver ({release}) is installed"
    assert (
        "TrnSpecdec-Cluster"
        in json.loads((synth.outdir / "manifest.json").read_text())["artifacts"]["TrnSpecdec-Workloads"]["dependencies"]
    )


def test_the_dependency_walk_follows_a_chain_and_nothing_else():
    """The check itself: service -> base -> driver holds; without the base's edge, or with the edge to another
    chart, the service does not wait for the driver."""
    driver = "Cluster/NeuronDra/Chart/Resource/Default"
    chain = {"Workloads/k8s-service": ["Workloads/k8s-base"], "Workloads/k8s-base": ["Cluster/NeuronDra"]}
    assert depends_on(chain, "Workloads/k8s-service/Resource/Default", driver)
    assert not depends_on({"Workloads/k8s-service": ["Workloads/k8s-base"]}, "Workloads/k8s-service", driver)
    other = {"Workloads/k8s-service": ["Workloads/k8s-base"], "Workloads/k8s-base": ["Cluster/Keda"]}
    assert not depends_on(other, "Workloads/k8s-service", driver)


def test_the_csi_driver_and_pod_identity_agent_come_before_the_services(synth):
    """The S3 volumes need the Mountpoint CSI driver and Pod Identity agent add-ons, as the base manifest depends."""
    addons = {
        r["Properties"]["AddonName"]: synth.path("Cluster", logical_id)
        for logical_id, r in synth.resources("Cluster", "AWS::EKS::Addon").items()
    }
    for path in _claiming_devices(synth):
        for addon in ("aws-mountpoint-s3-csi-driver", "eks-pod-identity-agent"):
            assert depends_on(synth.constructs.dependencies, path, addons[addon]), f"{path} may come before {addon}"


def _actions(statement: dict) -> list[str]:
    return [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]


def test_every_service_and_build_account_has_a_role(synth):
    names = {p.name for p in synth.config.profiles}
    expected = {f"{n}-vllm" for n in names} | {f"{n}-build" for n in names} | {"bench", "checkpoints-stage"}
    assert set(statements_by_service_account(synth)) == expected


def test_each_service_role_reads_only_its_artifact_and_checkpoints(synth):
    policies = statements_by_service_account(synth)
    for profile in synth.config.profiles:
        statements = policies[f"{profile.name}-vllm"]
        assert not [s for s in statements if any(a.startswith("s3:Put") for a in _actions(s))]
        (get,) = [s for s in statements if _actions(s) == ["s3:GetObject"]]
        resources = json.dumps(get["Resource"])
        assert f"artifacts/{profile_digest(synth.config, profile)}/*" in resources
        assert "Qwen/Qwen3-32B/" in resources
        assert ("Qwen/Qwen3-1.7B/" in resources) == (profile.decoding.method != "none")
        others = [profile_digest(synth.config, p) for p in synth.config.profiles if p is not profile]
        assert not any(d in resources for d in others)


def test_each_build_role_writes_only_its_own_artifact_prefix(synth):
    policies = statements_by_service_account(synth)
    for profile in synth.config.profiles:
        writes = [s for s in policies[f"{profile.name}-build"] if "s3:PutObject" in _actions(s)]
        (write,) = writes
        resources = json.dumps(write["Resource"])
        assert f"artifacts/{profile_digest(synth.config, profile)}/*" in resources
        assert "checkpoints/" not in resources and resources.count("artifacts/") == 1


def test_the_stage_role_writes_only_the_checkpoints_of_configured_models(synth):
    statements = statements_by_service_account(synth)["checkpoints-stage"]
    (write,) = [s for s in statements if "s3:PutObject" in _actions(s)]
    resources = json.dumps(write["Resource"])
    assert "artifacts/" not in resources and "results/" not in resources
    revisions = {m.revision for m in synth.config.models.values()}
    used = {synth.config.models[k].revision for k in ("qwen3-32b", "qwen3-1-7b")}
    assert all(r in resources for r in used) and not any(r in resources for r in revisions - used)


def test_bench_role_publishes_only_in_its_namespace_and_writes_only_results(synth):
    statements = statements_by_service_account(synth)["bench"]
    (metrics,) = [s for s in statements if "cloudwatch:PutMetricData" in _actions(s)]
    assert metrics["Condition"] == {
        "StringEquals": {"cloudwatch:namespace": synth.config.observability.metrics_namespace}
    }
    (put,) = [s for s in statements if "s3:PutObject" in _actions(s)]
    assert json.dumps(put["Resource"]).endswith('/results/*"]]}')
    allowed = [a for s in statements if s["Effect"] == "Allow" for a in _actions(s)]
    assert set(allowed) == {"cloudwatch:PutMetricData", "s3:PutObject"}


def _template_bytes(synth, suffix: str) -> int:
    (path,) = synth.outdir.glob(f"*{suffix}.template.json")
    return path.stat().st_size


def test_the_profile_cap_keeps_the_workloads_template_under_cloudformations_limit(synth, three_profile_synths):
    """Re-measures the bound behind MAX_PROFILES on the template files the CLI uploads: the default (2 profiles)
    plus the growth per profile (3 profiles - 2), with 25% for 24-character names and longer model ids."""
    from config.catalogue import CLOUDFORMATION_TEMPLATE_BYTES, MAX_PROFILES

    two = _template_bytes(synth, "Workloads")
    per_profile = _template_bytes(three_profile_synths["readme-spec-k5"], "Workloads") - two
    assert 15_000 < per_profile < 30_000, per_profile
    at_cap = two + (MAX_PROFILES - 2) * per_profile * 1.25
    assert at_cap < CLOUDFORMATION_TEMPLATE_BYTES, (
        f"{MAX_PROFILES} profiles need about {at_cap:,.0f} bytes (2 profiles: {two:,}; per profile: {per_profile:,})"
    )


def test_the_app_reports_a_template_over_the_limit_as_a_sentence(tmp_path):
    from app import oversized_templates

    (tmp_path / "A-Workloads.template.json").write_bytes(b" " * 1_000_001)
    (tmp_path / "A-Models.template.json").write_bytes(b"{}")
    (problem,) = oversized_templates(tmp_path)
    assert "stack A-Workloads synthesizes a 1,000,001-byte template" in problem and "remove profiles" in problem


def test_every_role_that_reads_or_writes_the_bucket_reaches_it_only_through_the_vpc_s3_endpoint(synth):
    """Serving, stage, build and bench roles: S3 calls from anywhere but the cluster's gateway endpoint are denied
    (the deployer's own credentials, which stage and verify from outside, are not these roles)."""
    (endpoint_id,) = synth.resources("Cluster", "AWS::EC2::VPCEndpoint")
    policies = statements_by_service_account(synth)
    bucket_users = {
        account
        for account, statements in policies.items()
        if any(a.startswith("s3:") for s in statements if s["Effect"] == "Allow" for a in _actions(s))
    }
    profiles = [p.name for p in synth.config.profiles]
    assert len(bucket_users) == 2 * len(profiles) + 2  # vLLM and build per profile, stage, bench
    for account in bucket_users:
        (deny,) = [s for s in policies[account] if s["Effect"] == "Deny"]
        assert _actions(deny) == ["s3:*"], account
        assert endpoint_id in json.dumps(deny["Condition"]["StringNotEquals"]["aws:SourceVpce"]), account
        assert len(deny["Resource"]) == 2  # the bucket and every object in it
