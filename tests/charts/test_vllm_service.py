"""The vLLM services: valid Kubernetes objects, identical except for the decoding method, placed on Trainium2."""

from __future__ import annotations

import copy
import itertools
import json
import re
from typing import Any

import kubernetes_validate
import pytest

from charts import render_serving
from charts.neuron_claim import node_share
from charts.serving_chart import render_groups
from charts.vllm_args import artifact_dir
from config import DeploymentConfig, parse_config
from model_build.digest import profile_digest
from tests.charts.conftest import TEST_BUCKET, of_kind, vllm_of_kind
from tests.conftest import default_config_dict


def k8s_version(config) -> str:
    return f"{config.kubernetes_version}.0"


def test_every_object_validates_against_the_clusters_kubernetes_schemas(serving_objects, default_config):
    assert {o["kind"] for o in serving_objects} >= {"Namespace", "ConfigMap", *SERVICE_KINDS}
    for obj in serving_objects:
        kubernetes_validate.validate(obj, k8s_version(default_config), strict=True)


def test_schema_validation_rejects_a_misspelt_field(serving_objects, default_config):
    """Guard that the validator is really strict: an unknown field in a DRA object must fail."""
    claim = copy.deepcopy(next(o for o in serving_objects if o["kind"] == "ResourceClaimTemplate"))
    claim["spec"]["spec"]["devices"]["requests"][0]["exactly"]["cout"] = 8
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(claim, k8s_version(default_config), strict=True)


def test_namespace_comes_first_so_kubectl_can_apply_in_order(serving_objects, default_config):
    assert serving_objects[0]["kind"] == "Namespace"
    namespaced = [o for o in serving_objects if o["kind"] not in {"Namespace", "PersistentVolume"}]
    assert {o["metadata"]["namespace"] for o in namespaced} == {default_config.namespace}


# "Identical except decoding", over each profile's whole service: the objects of its chart group (claim
# template, PV/PVC, service account, Deployment, Service) and its Pod Identity role in the Workloads template.
# These are the only differences allowed between two profiles; `_decoding_free` removes exactly these.
ALLOWED_DIFFERENCES = (
    "names, labels, selectors and the role's description derived from the profile name",
    "the label trn-specdec/decoding, which names the method",
    "vLLM's --speculative-config and enable_fused_speculation in --override-neuron-config",
    "the artifact digest: pod annotation, NEURON_COMPILED_ARTIFACTS, the init check's --dir, artifacts/<digest>/",
    "the init check's expected decoding inputs: decoding, draft, num_speculative_tokens and the NxDI keywords they "
    "set (the draft's config, the target's speculation_length and enable_fused_speculation)",
    "the role may read the draft's checkpoint prefix",
)
SERVICE_KINDS = {
    "ResourceClaimTemplate",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "ServiceAccount",
    "Deployment",
    "Service",
}


def _drop_decoding_args(pod: dict[str, Any]) -> None:
    (vllm,) = [c for c in pod["containers"] if c["name"] == "vllm"]
    args = vllm["args"]
    if "--speculative-config" in args:
        i = args.index("--speculative-config")
        del args[i : i + 2]
    i = args.index("--override-neuron-config")
    overrides = json.loads(args[i + 1])
    overrides.pop("enable_fused_speculation", None)
    args[i + 1] = json.dumps(overrides, sort_keys=True)
    (init,) = pod["initContainers"]
    i = init["command"].index("--expected-json")
    expected = json.loads(init["command"][i + 1])
    for key in ("decoding", "draft", "num_speculative_tokens"):
        expected["inputs"].pop(key)
    compiled = expected["inputs"]["neuron_config"]
    compiled.pop("draft")
    for key in ("speculation_length", "enable_fused_speculation"):
        compiled["target"].pop(key, None)
    init["command"][i + 1] = json.dumps(expected, sort_keys=True)


def _drop_draft_checkpoint(policy: dict[str, Any], draft: str | None) -> None:
    """Remove the GetObject grant on the draft's checkpoint prefix (checkpoints/<hf_id>/<revision>/)."""
    if draft is None:
        return
    tail = f"/checkpoints/{draft}/*"
    for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        kept = [r for r in resources if not _arn_text(r).endswith(tail)]
        statement["Resource"] = kept if len(kept) > 1 else kept[0]


def _arn_text(arn: str | dict[str, Any]) -> str:
    """The literal tail of an ARN, which CloudFormation may join from parts (partition, account)."""
    return arn if isinstance(arn, str) else arn["Fn::Join"][1][-1]


def _decoding_free(objects: list[dict[str, Any]], profile: str, draft: str | None) -> dict[str, Any]:
    """One profile's service with exactly the ALLOWED_DIFFERENCES neutralised, keyed by kind and name.

    `objects` are its chart group, plus its role resources from the Workloads template (keyed by type alone:
    one of each); `draft` is the draft's "<hf_id>/<revision>" or None."""
    objects = copy.deepcopy(objects)
    (deployment,) = [o for o in objects if o.get("kind") == "Deployment"]
    digest = deployment["spec"]["template"]["metadata"]["annotations"]["trn-specdec/artifact-digest"]
    _drop_decoding_args(deployment["spec"]["template"]["spec"])
    for o in objects:
        if o.get("Type") == "AWS::IAM::Policy":
            _drop_draft_checkpoint(o, draft)
        for labels in (o.get("metadata", {}).get("labels"), deployment["spec"]["template"]["metadata"]["labels"]):
            if labels:
                labels.pop("trn-specdec/decoding", None)
    text = json.dumps(objects, sort_keys=True).replace(digest, "<digest>")
    text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(profile)}(?![A-Za-z0-9])", "<profile>", text)
    return {f"{o.get('kind') or o['Type']} {o.get('metadata', {}).get('name', '')}": o for o in json.loads(text)}


def _role_resources(template: dict[str, Any], service_account: str) -> list[dict[str, Any]]:
    """The Pod Identity association of a service account, its role and the role's policies, following the
    template's own references; logical ids become placeholders (they carry a hash of the construct path)."""
    res = template["Resources"]
    (association,) = [
        r
        for r in res.values()
        if r["Type"] == "AWS::EKS::PodIdentityAssociation" and r["Properties"]["ServiceAccount"] == service_account
    ]
    role_id = association["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    policies = {k: r for k, r in res.items() if {"Ref": role_id} in r["Properties"].get("Roles", [])}
    assert policies and res[role_id]["Type"] == "AWS::IAM::Role"
    found = [association, res[role_id], *policies.values()]
    text = json.dumps(found).replace(role_id, "<role>")
    for policy_id in policies:
        text = text.replace(policy_id, "<policy>")
    return json.loads(text)


def _services(config: DeploymentConfig, template: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Each profile's whole service, decoding-free: chart group (+ role when a Workloads template is given)."""
    groups = render_groups(config, TEST_BUCKET)
    services = {}
    for p in config.profiles:
        objects = groups[f"service-{p.name}"]
        assert {o["kind"] for o in objects} == SERVICE_KINDS
        if template is not None:
            (account,) = [o["metadata"]["name"] for o in objects if o["kind"] == "ServiceAccount"]
            objects = objects + _role_resources(template, account)
        draft = getattr(p.decoding, "draft", None)
        checkpoint = f"{config.models[draft].hf_id}/{config.models[draft].revision}" if draft else None
        services[p.name] = _decoding_free(objects, p.name, checkpoint)
    return services


def test_baseline_and_speculative_services_differ_only_in_decoding(default_config, synth):
    """Everything a profile deploys, role included, equals the other profile's up to ALLOWED_DIFFERENCES."""
    services = _services(default_config, synth.template("Workloads"))
    kinds = {key.split()[0] for key in services["baseline"]}
    assert kinds == SERVICE_KINDS | {"AWS::EKS::PodIdentityAssociation", "AWS::IAM::Role", "AWS::IAM::Policy"}
    assert services["baseline"] == services["speculative"]


def test_every_pair_of_three_profiles_differs_only_in_decoding():
    """The README's third profile (spec-k5) is held to the same rule, against each of the other two."""
    data = default_config_dict()
    data["trn2_nodes"].update(max_size=2)
    data["profiles"].append(
        {"name": "spec-k5", "decoding": {"method": "fused-draft", "draft": "qwen3-1-7b", "num_speculative_tokens": 5}}
    )
    services = _services(parse_config(data), template=None)
    for a, b in itertools.combinations(services, 2):
        assert services[a] == services[b], (a, b)


def test_the_decoding_difference_is_exactly_the_speculative_flags(serving_objects):
    deployments = vllm_of_kind(serving_objects, "Deployment")
    base_args = deployments["baseline"]["spec"]["template"]["spec"]["containers"][0]["args"]
    spec_args = deployments["speculative"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--speculative-config" not in base_args
    spec = json.loads(spec_args[spec_args.index("--speculative-config") + 1])
    assert spec["num_speculative_tokens"] == 7 and spec["model"].startswith("/models/checkpoints/Qwen/Qwen3-1.7B/")
    assert json.loads(spec_args[spec_args.index("--override-neuron-config") + 1]) == {
        "enable_fused_speculation": True,
        "save_sharded_checkpoint": True,
    }
    assert json.loads(base_args[base_args.index("--override-neuron-config") + 1]) == {"save_sharded_checkpoint": True}


def test_tp_equals_claimed_devices_times_logical_cores(serving_objects, default_config):
    claims = of_kind(serving_objects, "ResourceClaimTemplate")
    deployments = vllm_of_kind(serving_objects, "Deployment")
    per_device = default_config.trn2_nodes.instance.physical_cores_per_device
    for p in default_config.profiles:
        devices = claims[f"{p.name}-neuron"]["spec"]["spec"]["devices"]
        (request,) = devices["requests"]
        lnc = devices["config"][0]["opaque"]["parameters"]["logicalNeuronCore"]
        args = deployments[p.name]["spec"]["template"]["spec"]["containers"][0]["args"]
        tp = int(args[args.index("--tensor-parallel-size") + 1])
        assert tp == request["exactly"]["count"] * per_device // lnc
        env = {e["name"]: e["value"] for e in deployments[p.name]["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env["NEURON_RT_VIRTUAL_CORE_SIZE"] == str(lnc)
        assert devices["constraints"] == [
            {"requests": ["neurons"], "matchAttribute": f"resource.aws.com/devicegroup{request['exactly']['count']}_id"}
        ]


def test_pods_tolerate_the_taint_the_stack_sets_and_select_trn2_nodes(serving_objects, synth):
    groups = synth.resources("Cluster", "AWS::EKS::Nodegroup").values()
    (trn2,) = [g["Properties"] for g in groups if g["Properties"]["AmiType"] == "AL2023_x86_64_NEURON"]
    (taint,) = trn2["Taints"]
    for d in vllm_of_kind(serving_objects, "Deployment").values():
        pod = d["spec"]["template"]["spec"]
        assert {
            "key": taint["Key"],
            "operator": "Equal",
            "value": taint["Value"],
            "effect": "NoSchedule",
        } in pod["tolerations"]
        assert taint["Effect"] == "NO_SCHEDULE"
        assert pod["nodeSelector"].items() <= trn2["Labels"].items()


def test_no_service_is_exposed_outside_the_cluster(serving_objects):
    services = vllm_of_kind(serving_objects, "Service")
    assert services and all(s["spec"]["type"] == "ClusterIP" for s in services.values())


def test_the_cluster_autoscaler_never_evicts_a_serving_replica_to_consolidate_nodes(serving_objects):
    """CA FAQ ("What types of pods can prevent CA from removing a node?"): a pod annotated safe-to-evict "false"
    keeps its node; KEDA removes replicas, then CA removes the empty node."""
    for d in vllm_of_kind(serving_objects, "Deployment").values():
        annotations = d["spec"]["template"]["metadata"]["annotations"]
        assert annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"


def test_two_services_fit_on_one_trn2_48xlarge(serving_objects, default_config):
    inst = default_config.trn2_nodes.instance
    cpu = mem = devices = 0
    for d in vllm_of_kind(serving_objects, "Deployment").values():
        res = d["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
        cpu += float(res["cpu"])
        mem += int(res["memory"].removesuffix("Gi"))
    claims = of_kind(serving_objects, "ResourceClaimTemplate")
    for d in vllm_of_kind(serving_objects, "Deployment").values():
        (ref,) = d["spec"]["template"]["spec"]["resourceClaims"]
        devices += claims[ref["resourceClaimTemplateName"]]["spec"]["spec"]["devices"]["requests"][0]["exactly"][
            "count"
        ]
    assert devices <= inst.devices and cpu < inst.vcpus and mem < inst.memory_gib
    assert node_share(inst, 8) == (86, 819)


def test_artifact_path_and_init_check_agree_on_the_digest(serving_objects, default_config):
    for p in default_config.profiles:
        d = vllm_of_kind(serving_objects, "Deployment")[p.name]
        pod = d["spec"]["template"]["spec"]
        env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
        digest = profile_digest(default_config, p)
        assert env["NEURON_COMPILED_ARTIFACTS"] == artifact_dir(default_config, p) == f"/models/artifacts/{digest}"
        cmd = pod["initContainers"][0]["command"]
        assert cmd[cmd.index("--dir") + 1] == env["NEURON_COMPILED_ARTIFACTS"]
        assert json.loads(cmd[cmd.index("--expected-json") + 1])["digest"] == digest
        assert pod["initContainers"][0]["image"] == pod["containers"][0]["image"]


def test_models_volume_is_read_only_with_pod_credentials(serving_objects):
    for pv in of_kind(serving_objects, "PersistentVolume").values():
        assert pv["spec"]["accessModes"] == ["ReadOnlyMany"] and pv["spec"]["csi"]["readOnly"] is True
        assert "read-only" in pv["spec"]["mountOptions"]
        attrs = pv["spec"]["csi"]["volumeAttributes"]
        assert attrs["bucketName"] == TEST_BUCKET and attrs["authenticationSource"] == "pod"
        # serving volumes cache on local disk; the build reads each checkpoint byte once and caches nothing
        assert ("cache" in attrs) == ("-build-" not in pv["metadata"]["name"])
    for d in vllm_of_kind(serving_objects, "Deployment").values():
        pod = d["spec"]["template"]["spec"]
        for c in pod["containers"] + pod["initContainers"]:
            models = [m for m in c.get("volumeMounts", []) if m["name"] == "models"]
            # the metrics sidecar reads nothing from disk; every other container mounts the models read-only
            assert (models and all(m["readOnly"] for m in models)) or c["name"] == "metrics-proxy"


@pytest.mark.parametrize("objects", ["serving_objects", "plugin_serving_objects"])
def test_no_kubernetes_api_token_is_mounted_into_a_vllm_pod(objects, request):
    """Nothing in the vLLM pod calls the Kubernetes API; its AWS credentials come without an API token (EKS Pod
    Identity's own projected token, audience pods.eks.amazonaws.com, which the cluster adds to the pod; the Mountpoint
    CSI driver's tokens, which the kubelet requests for the CSIDriver's tokenRequests at mount time)."""
    rendered = request.getfixturevalue(objects)
    accounts = of_kind(rendered, "ServiceAccount")
    deployments = vllm_of_kind(rendered, "Deployment")
    assert deployments
    for name, d in deployments.items():
        pod = d["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False, name
        assert accounts[pod["serviceAccountName"]]["automountServiceAccountToken"] is False, name
        tokens = [
            v
            for v in pod["volumes"]
            if any("serviceAccountToken" in p for p in v.get("projected", {}).get("sources", []))
        ]
        assert not tokens, name
        # The volume that carries its S3 credentials is the pod-credential Mountpoint volume.
        claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
        volumes = {pv["spec"]["claimRef"]["name"]: pv for pv in of_kind(rendered, "PersistentVolume").values()}
        assert all(volumes[c]["spec"]["csi"]["volumeAttributes"]["authenticationSource"] == "pod" for c in claims)


def test_a_third_profile_adds_a_third_service_without_code_changes():
    data = default_config_dict()
    data["trn2_nodes"].update(min_size=2, desired_size=2, max_size=2)
    data["profiles"].append(
        {"name": "spec-k5", "decoding": {"method": "fused-draft", "draft": "qwen3-0-6b", "num_speculative_tokens": 5}}
    )
    config = parse_config(data)
    objects = render_serving(config, TEST_BUCKET)
    assert set(vllm_of_kind(objects, "Deployment")) == {"baseline", "speculative", "spec-k5"}
    assert set(vllm_of_kind(objects, "Service")) == {"baseline", "speculative", "spec-k5"}
    digests = {profile_digest(config, p) for p in config.profiles}
    assert len(digests) == 3


def test_the_vllm_neuron_example_serves_eagle3_from_a_local_cache_that_must_hit(plugin_config, plugin_serving_objects):
    """make synth CONFIG=config/vllm-neuron.yaml: the 0.29 image, "method":"eagle3" with a local draft path, the
    compile cache copied from the mount to node-local disk after the check, the native route named, and vLLM run
    under the start-up guard that stops a compile."""
    objects = plugin_serving_objects
    for obj in objects:
        kubernetes_validate.validate(obj, k8s_version(plugin_config), strict=True)
    deployments = vllm_of_kind(objects, "Deployment")
    assert set(deployments) == {"baseline", "eagle3"}
    for deployment in deployments.values():
        pod = deployment["spec"]["template"]["spec"]
        (vllm,) = [c for c in pod["containers"] if c["name"] == "vllm"]
        (verify,) = pod["initContainers"]
        assert vllm["image"].endswith(":0.29.0.1.2.0-neuronx-py314-sdk2.33.0-ubuntu26.04")
        env = {e["name"]: e["value"] for e in vllm["env"]}
        assert env["VLLM_CACHE_ROOT"] == "/cache/vllm-cache"
        assert env["VLLM_NEURON_BACKEND"] == "neuron_native"
        assert not [k for k in env if k.startswith("NEURON_LIBTORCH_")]  # retired by the native route's direction
        assert "NEURON_COMPILED_ARTIFACTS" not in env and "VLLM_USE_V1" not in env
        assert verify["command"][-2:] == ["--copy-to", "/cache/vllm-cache"]
        serve_argv = json.loads(verify["command"][verify["command"].index("--serve-argv-json") + 1])
        assert vllm["command"][:2] == ["python3", "/opt/trn-specdec/serving_pod/startup_guard.py"]
        assert vllm["command"][vllm["command"].index("--watch") + 1] == "/cache/vllm-cache/neuron/compile_cache"
        assert serve_argv == vllm["command"][vllm["command"].index("--") + 1 :] + vllm["args"]
        for container in (vllm, verify):
            assert {"name": "vllm-cache", "mountPath": "/cache/vllm-cache"} in container["volumeMounts"]
        (cache,) = [v for v in pod["volumes"] if v["name"] == "vllm-cache"]
        assert cache["emptyDir"] == {"sizeLimit": "200Gi"}
    args = deployments["eagle3"]["spec"]["template"]["spec"]["containers"][0]["args"]
    spec = json.loads(args[args.index("--speculative-config") + 1])
    assert spec["method"] == "eagle3" and spec["num_speculative_tokens"] == 3
    assert (
        spec["model"]
        == "/models/checkpoints/RedHatAI/Qwen3-32B-speculator.eagle3/dc84fe7ff1db31efa824776f49c141fc8195eb47"
    )


def test_legacy_services_keep_reading_their_artifact_from_the_mount(serving_objects):
    for deployment in vllm_of_kind(serving_objects, "Deployment").values():
        pod = deployment["spec"]["template"]["spec"]
        assert "--copy-to" not in pod["initContainers"][0]["command"]
        assert all(v["name"] != "vllm-cache" for v in pod["volumes"])


def test_a_dflash_service_on_one_device_is_a_valid_kubernetes_object():
    """DFlash at TP 8 (one device, LNC 1), as the engine check's DFlash config renders it."""
    from tests.engine.command_lines import dflash_config

    config = dflash_config()
    objects = render_serving(config, TEST_BUCKET)
    for obj in objects:
        kubernetes_validate.validate(obj, k8s_version(config), strict=True)
    pod = vllm_of_kind(objects, "Deployment")["dflash"]["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["NEURON_LOGICAL_NC_CONFIG"] == "1"
    claim = of_kind(objects, "ResourceClaimTemplate")["dflash-neuron"]
    (request,) = claim["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["count"] == 1


def _one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def _vllm_arg(objects: list[dict[str, Any]], flag: str, value: str) -> None:
    args = _one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    args[args.index(flag) + 1] = value


# Differences the comparison must still see: each is outside ALLOWED_DIFFERENCES, so widening the allow-list
# to hide it (e.g. ignoring Service ports) fails its row.
NON_DECODING_CHANGES = {
    "Service port": lambda objs: _one(objs, "Service")["spec"]["ports"][0].update(port=8001),
    "vLLM image": lambda objs: _one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0].update(
        image="public.ecr.aws/neuron/other:1"
    ),
    "--max-num-seqs": lambda objs: _vllm_arg(objs, "--max-num-seqs", "8"),
    "claimed devices": lambda objs: _one(objs, "ResourceClaimTemplate")["spec"]["spec"]["devices"]["requests"][0][
        "exactly"
    ].update(count=16),
    "replicas": lambda objs: _one(objs, "Deployment")["spec"].update(replicas=2),
    "mount options": lambda objs: _one(objs, "PersistentVolume")["spec"]["mountOptions"].append("allow-other"),
    "container resources": lambda objs: _one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0][
        "resources"
    ]["requests"].update(cpu="90"),
}


@pytest.mark.parametrize("change", NON_DECODING_CHANGES)
def test_a_difference_outside_the_allowed_list_is_seen(default_config, change):
    groups = render_groups(default_config, TEST_BUCKET)
    baseline = _decoding_free(groups["service-baseline"], "baseline", None)
    draft = default_config.models[default_config.profiles[1].decoding.draft]
    changed = copy.deepcopy(groups["service-speculative"])
    NON_DECODING_CHANGES[change](changed)
    assert _decoding_free(changed, "speculative", f"{draft.hf_id}/{draft.revision}") != baseline


def test_the_service_and_the_probes_reach_vllm_on_the_port_its_stack_names(
    default_config, plugin_config, serving_objects, plugin_serving_objects
):
    """One port name per stack (ServingStack.METRICS_PORT_NAME): the container's port, the Service's target and the
    probes all use it, so the scraper that keeps pods by that name scrapes the port vLLM serves on."""
    from serving_stacks import stack_named

    for config, objects in ((default_config, serving_objects), (plugin_config, plugin_serving_objects)):
        services = vllm_of_kind(objects, "Service")
        for name, deployment in vllm_of_kind(objects, "Deployment").items():
            containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
            assert set(containers) == {"vllm", "metrics-proxy"}  # the sidecar serves only /metrics to the scraper
            container = containers["vllm"]
            port_name = stack_named(config.profile(name).image.stack).METRICS_PORT_NAME
            assert [p["name"] for p in container["ports"]] == [port_name]
            assert [p["targetPort"] for p in services[name]["spec"]["ports"]] == [port_name]
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                assert container[probe]["httpGet"]["port"] == port_name, (name, probe)
