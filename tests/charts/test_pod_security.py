"""Who every rendered pod runs as, and which pods may connect to which: read from the rendered objects."""

from __future__ import annotations

import copy
import shlex
from typing import Any

import kubernetes_validate
import pytest

from charts.bench_job import render_bench_job
from charts.model_build_job import render_build_job
from charts.serving_chart import render_groups
from charts.stage_job import render_stage_job
from config import parse_config
from tests.charts.conftest import TEST_BUCKET, of_kind, vllm_of_kind
from tests.conftest import EXAMPLE_ACCOUNT, default_config_dict

ACCOUNT = EXAMPLE_ACCOUNT
ROOT_IN_IMAGE = {"vllm", "build", "stage"}  # the Neuron images' own user; see charts/pod_security.py
NON_ROOT = {"verify-artifact", "bench", "envoy"}


@pytest.fixture(scope="module")
def pods(default_config, serving_objects) -> dict[str, dict[str, Any]]:
    """Every pod template we render, by workload: the services, and the Jobs `make build/stage/bench` apply."""
    found = {f"deployment/{n}": d["spec"]["template"] for n, d in of_kind(serving_objects, "Deployment").items()}
    for objects in (
        render_build_job(default_config, "speculative", ACCOUNT),
        render_stage_job(default_config, sorted(default_config.models), ACCOUNT),
        render_bench_job(default_config, ACCOUNT, "run1", []),
    ):
        for name, job in of_kind(objects, "Job").items():
            found[f"job/{name}"] = job["spec"]["template"]
    return found


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]


def test_every_container_drops_all_capabilities_and_cannot_escalate(pods):
    seen = set()
    for workload, pod in pods.items():
        for c in containers(pod):
            ctx = c.get("securityContext", {})
            assert ctx.get("allowPrivilegeEscalation") is False, (workload, c["name"])
            assert ctx.get("privileged") is False, (workload, c["name"])
            assert ctx.get("capabilities") == {"drop": ["ALL"]}, (workload, c["name"])
            assert ctx.get("seccompProfile") == {"type": "RuntimeDefault"}, (workload, c["name"])
            seen.add(c["name"])
    assert seen == ROOT_IN_IMAGE | NON_ROOT  # a new container must be placed in one of the two kinds


def test_the_init_check_and_the_benchmark_run_non_root_on_a_read_only_root(pods):
    for workload, pod in pods.items():
        for c in containers(pod):
            ctx = c["securityContext"]
            if c["name"] in NON_ROOT:
                assert ctx["runAsNonRoot"] is True and ctx["runAsUser"] > 0, (workload, c["name"])
                assert ctx["readOnlyRootFilesystem"] is True, (workload, c["name"])
            else:
                assert "runAsNonRoot" not in ctx and ctx["readOnlyRootFilesystem"] is False, (workload, c["name"])


def test_the_benchmark_writes_only_to_its_empty_dirs(pods):
    """Read-only root: the unpacked code, the pip target, HOME and the results must all be on emptyDirs."""
    (pod,) = [p for w, p in pods.items() if w.startswith("job/bench-")]
    (c,) = pod["spec"]["containers"]
    empty = {v["name"] for v in pod["spec"]["volumes"] if "emptyDir" in v}
    writable = [m["mountPath"] for m in c["volumeMounts"] if m["name"] in empty and not m.get("readOnly")]
    env = {e["name"]: e.get("value") for e in c["env"]}
    run = shlex.split(c["command"][-1].splitlines()[-1])
    pip = shlex.split(next(line for line in c["command"][-1].splitlines() if line.startswith("pip install")))
    written = [env["HOME"], *env["PYTHONPATH"].split(":"), run[run.index("--out") + 1], pip[pip.index("--target") + 1]]
    for path in written:
        assert any(path == w or path.startswith(w.rstrip("/") + "/") for w in writable), (path, writable)


# --- NetworkPolicy ---------------------------------------------------------------------------


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, "this evaluator knows matchLabels only"
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def admitted(
    policies: list[dict], ns: str, *, src_ns: str, src: dict[str, str], dst: dict[str, str], port: int
) -> bool:
    """Kubernetes NetworkPolicy ingress semantics (the subset we render): a pod selected by no Ingress policy
    accepts everything; otherwise a connection needs one rule of one selecting policy that admits it."""
    selecting = [
        p for p in policies if "Ingress" in p["spec"]["policyTypes"] and _selects(p["spec"]["podSelector"], dst)
    ]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress", []):
            ports = rule.get("ports")
            port_ok = ports is None or any(p["port"] == port and p.get("protocol", "TCP") == "TCP" for p in ports)
            peers = rule.get("from")
            peer_ok = peers is None or any(
                set(peer) == {"podSelector"} and src_ns == ns and _selects(peer["podSelector"], src) for peer in peers
            )
            if port_ok and peer_ok:
                return True
    return False


@pytest.fixture(scope="module")
def two_ports_config():
    raw = copy.deepcopy(default_config_dict())
    raw["profiles"][1]["port"] = 8001
    return parse_config(raw)


def test_network_policies_admit_the_bench_and_namespace_pods_to_vllm_only(two_ports_config):
    config = two_ports_config
    objects = [o for group in render_groups(config, TEST_BUCKET).values() for o in group]
    policies = list(of_kind(objects, "NetworkPolicy").values())
    for p in policies:
        kubernetes_validate.validate(p, f"{config.kubernetes_version}.0", strict=True)
        assert p["metadata"]["namespace"] == config.namespace
    ns = config.namespace
    deployments = vllm_of_kind(objects, "Deployment")
    bench_pod = of_kind(render_bench_job(config, ACCOUNT, "run1", []), "Job")["bench-run1"]["spec"]["template"]
    bench = bench_pod["metadata"]["labels"]
    build = of_kind(render_build_job(config, "baseline", ACCOUNT), "Job")
    (build_labels,) = [j["spec"]["template"]["metadata"]["labels"] for j in build.values()]
    stranger = {"app": "anything"}
    assert len(deployments) == 2
    for name, deployment in deployments.items():
        vllm = deployment["spec"]["template"]["metadata"]["labels"]
        port = config.profile(name).port
        assert admitted(policies, ns, src_ns=ns, src=bench, dst=vllm, port=port), name
        assert admitted(policies, ns, src_ns=ns, src=stranger, dst=vllm, port=port), name  # in-namespace caller
        assert not admitted(policies, ns, src_ns="default", src=bench, dst=vllm, port=port), name
        assert not admitted(policies, ns, src_ns="kube-system", src={}, dst=vllm, port=port), name
        assert not admitted(policies, ns, src_ns=ns, src=bench, dst=vllm, port=22), name
    # Nothing else in the namespace accepts connections, not even from its own pods.
    for dst in (bench, build_labels):
        assert not admitted(policies, ns, src_ns=ns, src=stranger, dst=dst, port=8000)


def test_the_cluster_enforces_network_policies(synth):
    (addon,) = [
        r for r in synth.resources("Cluster", "AWS::EKS::Addon").values() if r["Properties"]["AddonName"] == "vpc-cni"
    ]
    assert '"enableNetworkPolicy":"true"' in addon["Properties"]["ConfigurationValues"].replace(" ", "")


# --- API key -------------------------------------------------------------------------------------


def _api_key_envs(objects: list[dict]) -> list[tuple[str, dict | None]]:
    found = []
    for kind in ("Deployment", "Job"):
        for name, obj in of_kind(objects, kind).items():
            for c in containers(obj["spec"]["template"]):
                env = {e["name"]: e for e in c.get("env", [])}
                found.append((f"{name}/{c['name']}", env.get("VLLM_API_KEY")))
    return found


def test_no_api_key_by_default(default_config, serving_objects):
    objects = [*serving_objects, *render_bench_job(default_config, ACCOUNT, "run1", [])]
    assert all(env is None for _, env in _api_key_envs(objects))


def test_a_configured_api_key_reaches_every_vllm_and_the_bench_from_the_secret_only():
    raw = copy.deepcopy(default_config_dict())
    raw["api_key_secret"] = "vllm-api-key"
    config = parse_config(raw)
    objects = [o for group in render_groups(config, TEST_BUCKET).values() for o in group]
    objects += render_bench_job(config, ACCOUNT, "run1", [])
    envs = dict(_api_key_envs(objects))
    want = {"valueFrom": {"secretKeyRef": {"name": "vllm-api-key", "key": "api-key", "optional": False}}}
    carriers = {k for k, v in envs.items() if v is not None}
    assert carriers == {"baseline/vllm", "speculative/vllm", "bench-run1/bench"}
    for name in carriers:
        assert {k: v for k, v in envs[name].items() if k != "name"} == want, name
    for d in of_kind(objects, "Deployment").values():
        (c,) = d["spec"]["template"]["spec"]["containers"]
        assert not any("api-key" in a for a in c["args"])  # never on the command line
        kubernetes_validate.validate(d, f"{config.kubernetes_version}.0", strict=True)
