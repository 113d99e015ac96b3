"""A real Prometheus on loopback for the tests and the journey: the pinned 2.42 (tools/prometheus_tool.py) on a given
configuration, its storage in a scratch folder, queried through its HTTP API, stopped when the context ends; promtool
beside it. And the rendered scrape configuration made runnable here: Kubernetes service discovery swapped for static
targets that carry the labels discovery would give the same pods, so the rendered relabel and keep rules run as
rendered.

Sources, Prometheus v2.42.0:
- The pod role's meta labels: docs/configuration/configuration.md, `<kubernetes_sd_config>` > `pod` (lines 1842-1871),
  as discovery/kubernetes/pod.go sets them: the pod's labels in `podLabels` (216-250, label names through
  util/strutil SanitizeLabelName: every character not [a-zA-Z0-9_] becomes `_`), the namespace on the group (280),
  one target per declared container port and a port-free one per container without ports (`buildPod`, 270-329).
- Static targets may carry `__meta_*` labels: a `<static_config>`'s labels are a plain label set
  (discovery/targetgroup/targetgroup.go 40-56); scrape/target.go `TargetsFromGroup` joins them with the target's
  own (488-510) before `PopulateLabels` runs the relabel_configs on them (376) and drops the `__meta_*` labels only
  after relabelling (460-465), exactly as for a discovered target. docs/configuration/configuration.md 2959-2964:
  "Additional labels prefixed with `__meta_` may be available during the relabeling phase ... Labels starting with
  `__` will be removed from the label set after target relabeling is completed."

Debian's build of 2.42 has no Kubernetes service discovery at all (its promtool and prometheus refuse
`kubernetes_sd_configs`: "field kubernetes_sd_configs not found in type config.ScrapeConfig";
tests/test_prometheus.py shows it). So promtool checks the rendered configuration with those blocks set aside
(`without_kubernetes_sd`), the blocks themselves are read against v2.42's own rules (`kubernetes_sd_problems`), and
the runnable form replaces them with the static targets discovery would give.
"""

from __future__ import annotations

import http.server
import json
import re
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.ports import PortTaken, free_port, retry_on_taken_port
from tools.prometheus_tool import ensure

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
ADDRESS_IN_USE = "address already in use"
META = "__meta_kubernetes_"


class PrometheusError(Exception):
    """Prometheus did not start, or answered a query with an error; the message carries its own words."""


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The pinned promtool with `args`; the caller judges the exit code (stdout and stderr are captured)."""
    return subprocess.run(
        [str(ensure().promtool), *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=120
    )


@dataclass
class Prometheus:
    """One running server: its URL, process and log file (its stderr)."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def _get(self, path: str, params: Mapping[str, str]) -> Any:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = json.load(response)
        except urllib.error.HTTPError as e:  # a bad query is answered 400/422 with a JSON error body
            body = json.loads(e.read() or b"{}")
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {dict(params)}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query (/api/v1/query): the vector's samples as {"metric": {...}, "value": [t, "v"]}; a scalar
        comes back as one sample without labels."""
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        data = self._get("/api/v1/query", params)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """A range query (/api/v1/query_range): each series as {"metric": {...}, "values": [[t, "v"], ...]}."""
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step}"}
        return list(self._get("/api/v1/query_range", params)["result"])

    def rules(self) -> list[dict[str, Any]]:
        """Every loaded rule with its health and last error (/api/v1/rules)."""
        return [r for g in self._get("/api/v1/rules", {})["groups"] for r in g["rules"]]

    def active_targets(self) -> list[dict[str, Any]]:
        """The scrape targets after relabelling, each with its health (/api/v1/targets)."""
        return list(self._get("/api/v1/targets", {"state": "active"})["activeTargets"])

    def wait_for(
        self,
        expr: str,
        until: Callable[[list[dict[str, Any]]], bool] = bool,
        timeout_s: float = 20.0,
    ) -> list[dict[str, Any]]:
        """Query `expr` until `until(result)` holds (by default: a non-empty result); its last result, or an error
        naming the query and what it last returned."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = self.query(expr)
            if until(result):
                return result
            if time.monotonic() > deadline:
                raise PrometheusError(f"{expr} did not reach the expected result in {timeout_s:.0f} s: {result}")
            time.sleep(0.2)


def _start(binary: Path, config_file: Path, workdir: Path, port: int) -> tuple[subprocess.Popen[bytes], Path]:
    log = workdir / f"prometheus-{port}.log"
    with log.open("wb") as err:
        process = subprocess.Popen(
            [
                str(binary),
                f"--config.file={config_file}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=info",
            ],
            cwd=workdir,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    return process, log


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (Prometheus shuts down cleanly on it: TSDB closed, lock released), SIGKILL if it hangs."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def running_prometheus(
    config: Mapping[str, Any], workdir: Path, *, rule_files: Mapping[str, Mapping[str, Any]] | None = None
) -> Iterator[Prometheus]:
    """Prometheus on 127.0.0.1 with `config` (a prometheus.yml as data), its storage and log in `workdir`, ready
    (/-/ready answers 200) when the context starts and stopped when it ends. `rule_files`: file name -> rule file
    content, written into `workdir` and listed in the configuration's rule_files.

    The port is picked free and then bound by Prometheus itself; if another process took it in between, Prometheus
    exits with "address already in use" and it is started again on another port (tests/ports.py)."""
    workdir.mkdir(parents=True, exist_ok=True)
    body = dict(config)
    for name, rules in (rule_files or {}).items():
        (workdir / name).write_text(yaml.safe_dump(dict(rules), sort_keys=False))
        body["rule_files"] = [*body.get("rule_files", []), name]
    config_file = workdir / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(body, sort_keys=False))
    binary = ensure().prometheus

    def start() -> tuple[str, subprocess.Popen[bytes], Path]:
        port = free_port()
        process, log = _start(binary, config_file, workdir, port)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT_S
        while process.poll() is None and not _ready(url) and time.monotonic() < deadline:
            time.sleep(0.05)
        if process.poll() is None and _ready(url):
            return url, process, log
        _stop(process)
        said = log.read_text(errors="replace")
        if ADDRESS_IN_USE in said:
            raise PortTaken(f"prometheus on {url}: the port was taken by the time it bound it")
        tail = "\n".join(said.splitlines()[-15:])
        raise PrometheusError(f"prometheus did not become ready on {url} (exit code {process.returncode}):\n{tail}")

    url, process, log = retry_on_taken_port(start)
    try:
        yield Prometheus(url=url, process=process, log=log)
    finally:
        _stop(process)


# discovery/kubernetes/kubernetes.go at v2.42.0: the roles `Role.UnmarshalYAML` accepts (110-120), `NamespaceDiscovery`'s
# fields (251-254). Of `SDConfig`'s fields (123-131: api_server, role, kubeconfig_file, namespaces, selectors,
# attach_metadata and the inline HTTP client settings) only the two the managed collector allows are modelled here.
KUBERNETES_SD_ROLES = ("node", "pod", "service", "endpoints", "endpointslice", "ingress")
KUBERNETES_SD_FIELDS = {"role", "namespaces"}
NAMESPACE_DISCOVERY_FIELDS = {"names", "own_namespace"}


def kubernetes_sd_problems(config: Mapping[str, Any]) -> list[str]:
    """Each kubernetes_sd_configs entry Prometheus 2.42 would refuse (or that uses a field not modelled here)."""
    problems = []
    for job in config["scrape_configs"]:
        for sd in job.get("kubernetes_sd_configs", []):
            where = f"{job['job_name']}: kubernetes_sd_configs {sd}"
            if sd.keys() - KUBERNETES_SD_FIELDS:
                problems.append(f"{where}: fields {sorted(sd.keys() - KUBERNETES_SD_FIELDS)} are not modelled")
            if sd.get("role") not in KUBERNETES_SD_ROLES:
                problems.append(f"{where}: role must be one of {KUBERNETES_SD_ROLES}")
            namespaces = sd.get("namespaces", {})
            names = namespaces.get("names", [])
            if namespaces.keys() - NAMESPACE_DISCOVERY_FIELDS or not all(isinstance(n, str) for n in names):
                problems.append(f"{where}: namespaces takes names (a list of strings) and own_namespace")
    return problems


def without_kubernetes_sd(config: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration with every job's kubernetes_sd_configs set aside (a job may have no discovery at all), for
    promtool: everything else is checked by Prometheus's own loader."""
    jobs = [{k: v for k, v in job.items() if k != "kubernetes_sd_configs"} for job in config["scrape_configs"]]
    return {**config, "scrape_configs": jobs}


@dataclass(frozen=True)
class DiscoveredPod:
    """A running pod of a rendered template, as the pod role of kubernetes_sd_configs would see it, and where each of
    its named container ports is served here (host:port on loopback). A port not listed gets the pod's IP and its
    container port, as discovery gives it."""

    name: str
    namespace: str
    template: Mapping[str, Any]  # a Deployment's spec.template: metadata.labels/annotations, spec.containers
    addresses: Mapping[str, str] = field(default_factory=dict)
    ip: str = "127.0.0.1"
    node: str = "trn2-node-0"
    ready: bool = True
    controller: tuple[str, str] | None = None  # (kind, name) of the pod's controller owner, e.g. a ReplicaSet


def sanitize_label_name(name: str) -> str:
    """util/strutil SanitizeLabelName at v2.42.0: every character not [a-zA-Z0-9_] becomes `_`."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def pod_group_labels(pod: DiscoveredPod) -> dict[str, str]:
    """The labels the pod role puts on every target of the pod (pod.go `podLabels` and the namespace)."""
    meta = pod.template.get("metadata", {})
    labels = {
        f"{META}namespace": pod.namespace,
        f"{META}pod_name": pod.name,
        f"{META}pod_ip": pod.ip,
        f"{META}pod_ready": "true" if pod.ready else "false",
        f"{META}pod_phase": "Running",
        f"{META}pod_node_name": pod.node,
        f"{META}pod_host_ip": pod.ip,
        f"{META}pod_uid": f"uid-{pod.namespace}-{pod.name}",
    }
    if pod.controller is not None:
        labels[f"{META}pod_controller_kind"], labels[f"{META}pod_controller_name"] = pod.controller
    for kind in ("label", "annotation"):
        for key, value in (meta.get(f"{kind}s") or {}).items():
            labels[f"{META}pod_{kind}_{sanitize_label_name(key)}"] = str(value)
            labels[f"{META}pod_{kind}present_{sanitize_label_name(key)}"] = "true"
    return labels


def pod_static_configs(pod: DiscoveredPod) -> list[dict[str, Any]]:
    """One static_config per target the pod role would discover for the pod: each declared port of each container
    (init containers after the others), a port-free target for a container without ports."""
    spec = pod.template["spec"]
    group = pod_group_labels(pod)
    containers = [(c, False) for c in spec.get("containers", [])]
    containers += [(c, True) for c in spec.get("initContainers", [])]
    out = []
    for container, init in containers:
        per_container = {
            f"{META}pod_container_name": container["name"],
            f"{META}pod_container_id": f"containerd://{pod.name}-{container['name']}",
            f"{META}pod_container_image": container.get("image", ""),
            f"{META}pod_container_init": "true" if init else "false",
        }
        if not container.get("ports"):
            out.append({"targets": [pod.ip], "labels": {**group, **per_container}})
            continue
        for port in container["ports"]:
            name = port.get("name", "")
            address = pod.addresses.get(name, f"{pod.ip}:{port['containerPort']}")
            per_port = {
                f"{META}pod_container_port_name": name,
                f"{META}pod_container_port_number": str(port["containerPort"]),
                f"{META}pod_container_port_protocol": port.get("protocol", "TCP"),  # the API server's default
            }
            out.append({"targets": [address], "labels": {**group, **per_container, **per_port}})
    return out


def runnable_scrape_config(
    rendered: Mapping[str, Any],
    pods: Collection[DiscoveredPod],
    *,
    jobs: Collection[str] | None = None,
    scrape_interval: str = "1s",
) -> dict[str, Any]:
    """The rendered scrape configuration as Prometheus can run it here: each job's `kubernetes_sd_configs` (role pod)
    replaced by static_configs for the `pods` in its discovery namespaces; metrics_path, scheme, relabel_configs and
    metric_relabel_configs stay as rendered. `jobs`: the job names to keep (default: every job that discovers pods;
    the scheduler's job discovers the EKS API server's endpoints, which do not exist here). Only the timing changes:
    every scrape and rule evaluation every `scrape_interval` (a timeout no longer than it, as Prometheus requires),
    so a test waits seconds, not the managed collector's 30 s."""
    out_jobs = []
    for job in rendered["scrape_configs"]:
        roles = {sd["role"] for sd in job.get("kubernetes_sd_configs", [])}
        if jobs is None and roles != {"pod"}:
            continue
        if jobs is not None and job["job_name"] not in jobs:
            continue
        if roles != {"pod"}:
            raise ValueError(f"job {job['job_name']} discovers {sorted(roles)}, not pods: it cannot run here")
        namespaces: set[str] = set()
        for sd in job["kubernetes_sd_configs"]:
            namespaces |= set(sd.get("namespaces", {}).get("names", []))
        static = [c for pod in pods if not namespaces or pod.namespace in namespaces for c in pod_static_configs(pod)]
        runnable = {
            k: v for k, v in job.items() if k not in ("kubernetes_sd_configs", "scrape_interval", "scrape_timeout")
        }
        out_jobs.append({**runnable, "static_configs": static})
    missing = set(jobs or ()) - {j["job_name"] for j in out_jobs}
    if missing:
        raise ValueError(f"no job named {sorted(missing)} in the rendered scrape configuration")
    timing = {"scrape_interval": scrape_interval, "scrape_timeout": scrape_interval}
    return {
        "global": {**rendered.get("global", {}), **timing, "evaluation_interval": scrape_interval},
        "scrape_configs": out_jobs,
    }


@contextmanager
def exposition_server(path: str, text: str) -> Iterator[str]:
    """A loopback HTTP server answering GET `path` with `text` in Prometheus's text exposition format (404
    elsewhere), as an exporter would; yields its host:port. Port 0: the kernel picks it, so nothing can race it."""
    body = text.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if urllib.parse.urlsplit(self.path).path != path:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def vector_selectors(expr: Any) -> list[Any]:
    """Every vector selector of an expression parsed by the pinned promql-parser (matrix selectors and subqueries wrap
    one): what the dashboard, alert and journey checks read series names and labels from."""
    import promql_parser as promql

    if isinstance(expr, promql.VectorSelector):
        return [expr]
    if isinstance(expr, promql.MatrixSelector):
        return [expr.vector_selector]
    children = [getattr(expr, a) for a in ("lhs", "rhs", "expr", "param") if getattr(expr, a, None) is not None]
    children += list(getattr(expr, "args", None) or [])
    return [s for child in children for s in vector_selectors(child)]
