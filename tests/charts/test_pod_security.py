"""Who every rendered pod runs as, and which pods may connect to which: read from the rendered objects."""

from __future__ import annotations

import copy
import ipaddress
import shlex
from typing import Any

import kubernetes_validate
import pytest
import yaml

from charts.autoscaling import render_autoscaling
from charts.jobs.bench import render_bench_job
from charts.jobs.model_build import render_build_job
from charts.jobs.stage import render_stage_job
from charts.serving_chart import render_groups
from config import parse_config
from stacks.constructs.managed_prometheus import serving_scrape_jobs
from tests.charts.conftest import QUERY_URL, TEST_BUCKET, of_kind, vllm_of_kind
from tests.charts.network_policy import Pod, Source, admitted
from tests.conftest import EXAMPLE_ACCOUNT, ROOT, THREE_PROFILE_CONFIGS, default_config_dict, variant_config_dict

ACCOUNT = EXAMPLE_ACCOUNT
ROOT_IN_IMAGE = {"vllm", "build", "stage"}  # the Neuron images' own user; see charts/pod_security.py
NON_ROOT = {"verify-artifact", "bench", "envoy", "metrics-proxy"}


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

V1_ROUTES = ("/v1/chat/completions", "/v1/completions", "/v1/models")


def _internal_load_balancer() -> dict[str, Any]:
    data = default_config_dict()
    data["endpoint"]["internal_load_balancer"] = True
    return data


NETWORK_CONFIGS = {
    "default": default_config_dict,
    "variant": variant_config_dict,
    "vllm-neuron": lambda: yaml.safe_load((ROOT / "config" / "vllm-neuron.yaml").read_text()),
    "internal-load-balancer": _internal_load_balancer,
    **THREE_PROFILE_CONFIGS,
}


def everything_rendered(config) -> list[dict[str, Any]]:
    """Every object of every chart: the serving groups, the autoscaling chart, and the Jobs `make` applies."""
    objects = [o for group in render_groups(config, TEST_BUCKET).values() for o in group]
    objects += render_autoscaling(config, QUERY_URL)
    objects += render_build_job(config, config.profiles[0].name, ACCOUNT)
    objects += render_stage_job(config, sorted(config.models), ACCOUNT)
    objects += render_bench_job(config, ACCOUNT, "run1", [])
    return objects


def pod_of(template: dict[str, Any], namespace: str) -> Pod:
    ports = {p["name"]: p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
    return Pod(namespace, template["metadata"]["labels"], ports)


def served_paths(template: dict[str, Any], port: int, paths: tuple[str, ...]) -> set[str]:
    """Which of `paths` a GET on the pod's `port` reaches vLLM with: vLLM's own port serves all of them; the
    metrics sidecar forwards only its exact-path routes (read from its rendered Envoy config), 404 for the rest."""
    served: set[str] = set()
    for container in template["spec"]["containers"]:
        if port not in [p["containerPort"] for p in container.get("ports", [])]:
            continue
        if container["name"] == "vllm":
            served |= set(paths)
        elif container["name"] == "metrics-proxy":
            args = container["args"]
            bootstrap = yaml.safe_load(args[args.index("--config-yaml") + 1])
            (listener,) = bootstrap["static_resources"]["listeners"]
            assert listener["address"]["socket_address"]["port_value"] == port
            (chain,) = listener["filter_chains"]
            (hcm,) = chain["filters"]
            for host in hcm["typed_config"]["route_config"]["virtual_hosts"]:
                forwarded = [r["match"] for r in host["routes"] if "route" in r]
                assert all(set(m) <= {"path", "headers"} for m in forwarded), forwarded  # exact paths only
                served |= {p for p in paths if any(m["path"] == p for m in forwarded)}
        else:
            pytest.fail(f"unknown container {container['name']} on port {port}")
    return served


def reaches(policies, src: Source, template: dict[str, Any], namespace: str, path: str) -> bool:
    """Some port of the pod admits `src` and answers `path` from vLLM."""
    dst = pod_of(template, namespace)
    return any(
        admitted(policies, src, dst, port) and path in served_paths(template, port, (path,))
        for port in dst.ports.values()
    )


@pytest.mark.parametrize("name", sorted(NETWORK_CONFIGS))
def test_only_the_endpoint_the_bench_and_the_pods_own_node_reach_vllms_api_and_the_scraper_reads_metrics(name):
    """What Kubernetes gives under every policy we render (tests/charts/network_policy.py has the rules and their
    sources): the endpoint and the bench reach vLLM's /v1 (their own egress allows it: nothing isolates them for
    egress); no other pod of any namespace and no VPC address but the pod's own node does; the node always does
    (its kubelet, its processes and its hostNetwork pods: the add-ons' node agents on that trn2 node), and so does the
    pod itself; the scraper's address reaches the metrics sidecar's port, which serves the metrics path only."""
    config = parse_config(NETWORK_CONFIGS[name]())
    objects = everything_rendered(config)
    policies = list(of_kind(objects, "NetworkPolicy").values())
    assert {p["metadata"]["name"] for p in policies} >= {"default-deny-ingress", "vllm-metrics-from-vpc"}
    for p in policies:
        kubernetes_validate.validate(p, f"{config.kubernetes_version}.0", strict=True)
    ns = config.namespace
    vpc = list(ipaddress.ip_network(config.network.vpc_cidr).hosts())
    templates = {f"{o['kind']}/{n}": o["spec"]["template"] for n, o in of_kind(objects, "Job").items()}
    templates |= {f"Deployment/{n}": o["spec"]["template"] for n, o in of_kind(objects, "Deployment").items()}
    bench = next(t for n, t in templates.items() if n.startswith("Job/bench-"))["metadata"]["labels"]
    stage = next(t for n, t in templates.items() if n.startswith("Job/stage-"))["metadata"]["labels"]
    endpoint = templates.get("Deployment/endpoint")
    callers = [Source(str(vpc[10]), ns, bench)]
    if endpoint is not None:
        callers.append(Source(str(vpc[11]), ns, endpoint["metadata"]["labels"]))
    strangers = [
        Source(str(vpc[20]), "default", bench),  # another namespace's pod, even one wearing the bench's labels
        Source(str(vpc[21]), "kube-system", {}),
        Source(str(vpc[22])),  # any other address in the VPC: an instance, a load balancer, another node
        Source(str(vpc[23]), ns, stage),  # a pod of our namespace that is no caller of vLLM
        Source(str(vpc[24]), ns, {"app": "anything"}),
    ]
    scraper = Source(str(vpc[30]))  # the managed scraper's ENI in a private subnet
    node = Source(str(vpc[40]), own_node=True)  # the node the vLLM pod runs on, from itself
    itself = Source(str(vpc[41]), own_pod=True)
    jobs = [j for j in serving_scrape_jobs(config) if j["job_name"].startswith("vllm")]
    deployments = vllm_of_kind(objects, "Deployment")
    assert len(deployments) == len([p for p in config.profiles if p.replicas > 0]) or len(deployments) == len(
        config.profiles
    )
    for name_, deployment in deployments.items():
        template = deployment["spec"]["template"]
        for route in V1_ROUTES:
            for src in strangers:
                assert not reaches(policies, src, template, ns, route), (name_, route, src)
            assert not reaches(policies, scraper, template, ns, route), (name_, route)
            for src in callers:
                assert reaches(policies, src, template, ns, route), (name_, route, src)
            # Not ours to close: Kubernetes always admits the pod's own node and the pod itself.
            assert reaches(policies, node, template, ns, route) and reaches(policies, itself, template, ns, route)
        # The scraper: the port its job keeps, by name, on the pod; the path its job asks for.
        (port_rule,) = [
            r
            for j in jobs
            for r in j["relabel_configs"]
            if r.get("source_labels") == ["__meta_kubernetes_pod_container_port_name"]
        ][:1]
        kept_port = pod_of(template, ns).ports[port_rule["regex"]]
        (path,) = {j["metrics_path"] for j in jobs}
        assert admitted(policies, scraper, pod_of(template, ns), kept_port), name_
        assert path in served_paths(template, kept_port, (path,)), name_
    # Nothing else in the namespace accepts connections from a stranger pod.
    for n, template in templates.items():
        if n.startswith("Job/"):
            assert not admitted(policies, strangers[4], pod_of(template, ns), 8000), n


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
        for c in d["spec"]["template"]["spec"]["containers"]:
            assert not any("api-key" in a for a in c.get("args", []))  # never on the command line
        kubernetes_validate.validate(d, f"{config.kubernetes_version}.0", strict=True)
