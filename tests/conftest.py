"""Shared fixtures: the app is synthesized once per test session (2-core machines) and its cloud assembly reused
across runs while no input changed (synthesize), S3/EC2 on loopback."""

from __future__ import annotations

import copy
import dataclasses
import functools
import io
import json
import os
import re
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from moto.core import DEFAULT_ACCOUNT_ID

from config import DEFAULT_CONFIG, DeploymentConfig, load_config, parse_config
from config.catalogue import PLACEHOLDER_ACCOUNT
from config.kubernetes import SUPPORTED_KUBERNETES_VERSIONS
from tests.ports import free_port
from tests.timeouts import pytest_configure, pytest_runtest_call, pytest_runtest_setup  # noqa: F401 (hooks)
from tools.test_shards import SHARED_SYNTH_DIR

ROOT = Path(__file__).resolve().parents[1]


MOTO_ACCOUNT = DEFAULT_ACCOUNT_ID  # what moto's STS GetCallerIdentity answers
EXAMPLE_ACCOUNT = PLACEHOLDER_ACCOUNT  # account ids in test ARNs: the placeholder, never a real one


def crossover_entry(
    *, kind: str = "structured", load: str = "concurrency", crossover: Any = 6, last_paying: Any = 3, grid: list[int]
) -> dict[str, Any]:
    """One crossovers[] entry for profile `speculative`, as the load sweep writes it (Any: tests feed bad values)."""
    return {
        "variant": "speculative",
        "kind": kind,
        "load": load,
        "crossover": crossover,
        "speedup": None,
        "last_paying": last_paying,
        "last_paying_speedup": None,
        "uncertain": False,
        "grid": grid,
    }


def crossover_file_dict(*entries: dict[str, Any]) -> dict[str, Any]:
    """A crossover.json body around `entries` (config.crossover.CrossoverFile validates it), baseline `baseline`."""
    return {
        "schema_version": 1,
        "created_at": "2026-11-26T00:00:00Z",
        "baseline": "baseline",
        "speedup_floor": 1.05,
        "max_num_seqs": 4,
        "slo_ttft_p99_ms": 200.0,
        "slo_tpot_p99_ms": 50.0,
        "crossovers": list(entries),
    }


@functools.cache
def _default_config_parsed() -> dict[str, Any]:
    return yaml.safe_load(DEFAULT_CONFIG.read_text())


def default_config_dict() -> dict[str, Any]:
    """config/default.yaml as a dict, a fresh deep copy each call (callers change it). Parsed once per process:
    PyYAML's pure-Python SafeLoader takes about 17 ms a parse, a deep copy 0.1 ms, and the fuzz and hypothesis
    tests ask for it once per case."""
    return copy.deepcopy(_default_config_parsed())


def variant_config_dict() -> dict[str, Any]:
    """A second deployment exercising the other branches: Capacity Block, retained bucket, K8s 1.34, TP 64,
    alarms that notify a topic, a cheaper root volume, a public API endpoint limited to one network."""
    data = default_config_dict()
    data["name"] = "specdec-cb"
    data["kubernetes_version"] = "1.34"
    data["trn2_nodes"].update(
        capacity_type="CAPACITY_BLOCK",
        capacity_reservation_id="cr-0123456789abcdef0",
        availability_zone="us-east-2b",
        min_size=2,
        desired_size=2,
        max_size=2,
        disk_iops=6000,
        disk_throughput_mibps=500,
    )
    data["bucket"]["retain_on_delete"] = True
    data["network"]["api_public_cidrs"] = ["203.0.113.0/24"]  # documentation range (RFC 5737)
    data["observability"]["alarm_topic_arn"] = f"arn:aws:sns:us-east-2:{EXAMPLE_ACCOUNT}:trn-alerts"
    data["serving"]["placement"] = {"devices": 16, "logical_neuron_cores": 2, "tensor_parallel_size": 64}
    return data


def readme_spec_k5_config_dict() -> dict[str, Any]:
    """The README's tuning example: a third profile with k=5, and a second node for its devices; with a node
    price (a made-up round one: only the arithmetic is tested), so the dashboard shows cost."""
    data = default_config_dict()
    data["trn2_nodes"]["max_size"] = 2
    data["trn2_nodes"]["hourly_price_usd"] = 40.0
    data["profiles"].append(
        {"name": "spec-k5", "decoding": {"method": "fused-draft", "draft": "qwen3-1-7b", "num_speculative_tokens": 5}}
    )
    return data


def two_baselines_one_speculative_config_dict() -> dict[str, Any]:
    """The first profile without speculation is the baseline; a second one is just another variant. On the newest
    supported Kubernetes version, so that it is synthesized without a synth of its own (NEWEST_KUBERNETES_SYNTH)."""
    data = default_config_dict()
    data["kubernetes_version"] = SUPPORTED_KUBERNETES_VERSIONS[-1]
    data["trn2_nodes"]["max_size"] = 2
    baseline, speculative = data["profiles"]
    data["profiles"] = [baseline, {"name": "baseline-b", "decoding": {"method": "none"}}, speculative]
    return data


THREE_PROFILE_CONFIGS = {
    "readme-spec-k5": readme_spec_k5_config_dict,
    "two-baselines-one-speculative": two_baselines_one_speculative_config_dict,
}
# The synthesized config on the newest supported Kubernetes version (the default is on DEFAULT_KUBERNETES_VERSION and
# the variant on the oldest): tests/config/test_versions.py checks that together they cover every supported version.
NEWEST_KUBERNETES_SYNTH = "two-baselines-one-speculative"


# Written beside the templates at synthesis: each construct's dependencies and each resource's construct, by path. A
# dependency between stacks leaves no DependsOn in either template (CDK orders the stacks instead), so the construct
# tree is where "the services wait for the DRA driver" can be read.
CONSTRUCT_DEPENDENCIES = "construct-dependencies.json"


@dataclass(frozen=True)
class Constructs:
    dependencies: dict[str, list[str]]  # construct path -> the paths of the constructs it depends on
    paths: dict[str, dict[str, str]]  # stack name -> logical id -> the path of the construct that is that resource

    @classmethod
    def of(cls, app: Any) -> Constructs:
        from aws_cdk import CfnElement, Stack

        everything = app.node.find_all()
        paths: dict[str, dict[str, str]] = {}
        for c in everything:
            if isinstance(c, CfnElement):
                stack = Stack.of(c)
                paths.setdefault(stack.stack_name, {})[stack.resolve(c.logical_id)] = c.node.path
        dependencies = {
            c.node.path: [d.node.path for d in c.node.dependencies] for c in everything if c.node.dependencies
        }
        return cls(dependencies=dependencies, paths=paths)


@dataclass(frozen=True)
class Synth:
    """One synthesized app: templates by stack name, cdk-nag's validation report and the constructs' dependencies."""

    config: DeploymentConfig
    outdir: Path
    templates: dict[str, dict[str, Any]]
    validation_report: dict[str, Any]
    constructs: Constructs

    def path(self, suffix: str, logical_id: str) -> str:
        """The construct path of a resource of the stack whose name ends with `suffix`."""
        (name,) = [n for n in self.templates if n.endswith(suffix)]
        return self.constructs.paths[name][logical_id]

    def template(self, suffix: str) -> dict[str, Any]:
        (name,) = [n for n in self.templates if n.endswith(suffix)]
        return self.templates[name]

    def resources(self, suffix: str, type_: str) -> dict[str, dict[str, Any]]:
        res = self.template(suffix)["Resources"]
        return {k: v for k, v in res.items() if v["Type"] == type_}

    def trn2_launch_template(self) -> dict[str, Any]:
        """LaunchTemplateData of the Trainium node group's template: the one that names an instance type (the
        system node group's template sets only its disk and metadata options)."""
        (data,) = [
            t["Properties"]["LaunchTemplateData"]
            for t in self.resources("Cluster", "AWS::EC2::LaunchTemplate").values()
            if "InstanceType" in t["Properties"]["LaunchTemplateData"]
        ]
        return data

    def helm_chart(self, chart: str) -> dict[str, Any]:
        """Properties of the one Helm chart resource of the Cluster stack that installs `chart` (its chart name)."""
        (props,) = [
            r["Properties"]
            for r in self.resources("Cluster", "Custom::AWSCDK-EKS-HelmChart").values()
            if r["Properties"]["Chart"] == chart
        ]
        return props

    def role_statements(self, role_id: str, suffix: str = "Cluster") -> list[dict[str, Any]]:
        """Every statement of the AWS::IAM::Policy resources CDK attached to the role with logical id `role_id`."""
        return [
            s
            for p in self.resources(suffix, "AWS::IAM::Policy").values()
            if {"Ref": role_id} in p["Properties"]["Roles"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        ]


def synthesize_cold(config: DeploymentConfig, outdir: Path) -> Synth:
    """The app synthesized now, with cdk-nag, into `outdir`; the construct tree's dependencies written beside."""
    from aws_cdk import App, Validations
    from cdk_nag import AwsSolutionsChecks

    from stacks import add_stacks

    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    app = App(outdir=str(outdir), context=context)
    add_stacks(app, config)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    assembly = app.synth()
    templates = {s.stack_name: s.template for s in assembly.stacks}
    report = json.loads((outdir / "validation-report.json").read_text())
    constructs = Constructs.of(app)
    (outdir / CONSTRUCT_DEPENDENCIES).write_text(json.dumps(dataclasses.asdict(constructs)))
    return Synth(config=config, outdir=outdir, templates=templates, validation_report=report, constructs=constructs)


def read_synth(config: DeploymentConfig, outdir: Path) -> Synth:
    """A cloud assembly synthesize_cold wrote, read back from its files."""
    manifest = json.loads((outdir / "manifest.json").read_text())
    templates = {
        artifact["properties"].get("stackName", name): json.loads(
            (outdir / artifact["properties"]["templateFile"]).read_text()
        )
        for name, artifact in manifest["artifacts"].items()
        if artifact["type"] == "aws:cloudformation:stack"
    }
    report = json.loads((outdir / "validation-report.json").read_text())
    constructs = Constructs(**json.loads((outdir / CONSTRUCT_DEPENDENCIES).read_text()))
    return Synth(config=config, outdir=outdir, templates=templates, validation_report=report, constructs=constructs)


SYNTH_CACHE_KIND = "cloud-assembly"


def synth_key(config: DeploymentConfig) -> str | None:
    """What a synth depends on: the config (as validated, crossover file folded in) and every input of the app
    (result_cache.app_inputs_key: the repository's files but tests, docs and perf, this module among them, the
    installed packages, Node.js, CDK's environment variables). None: not reusable (no git)."""
    from tests import result_cache

    inputs = result_cache.app_inputs_key()
    return None if inputs is None else result_cache.key(SYNTH_CACHE_KIND, config.model_dump_json(), inputs)


def _pack(outdir: Path) -> bytes:
    """The cloud assembly without its asset.* files (content-addressed: the templates name their hashes; no test
    reads them, and they are 58 MB of bundled Lambda layers)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(outdir.iterdir()):
            if not path.name.startswith("asset."):
                tar.add(path, arcname=path.name)
    return buffer.getvalue()


def synthesize(config: DeploymentConfig, outdir: Path, *, reuse: bool = True) -> Synth:
    """The app synthesized into `outdir`, or, with `reuse`, the cloud assembly an earlier run synthesized from
    exactly these inputs (synth_key; tests/result_cache.py, switched off by TRN_SPECDEC_TEST_CACHE=0), unpacked
    there. Either way the Synth is read back from the files, so a reused one is read as a fresh one is."""
    from tests import result_cache

    entry_key = synth_key(config) if reuse else None
    packed = result_cache.load(SYNTH_CACHE_KIND, entry_key) if entry_key else None
    if packed is not None:
        outdir.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(packed)) as tar:
            tar.extractall(outdir, filter="data")
        return read_synth(config, outdir)
    fresh = synthesize_cold(config, outdir)
    read = read_synth(config, outdir)
    assert read == fresh, "the cloud assembly's files do not read back as the synthesized app: fix read_synth"
    if entry_key:
        result_cache.store(SYNTH_CACHE_KIND, entry_key, _pack(outdir))
    return read


def cfn_lint_errors(*outdirs: Path, reuse: bool = True) -> list[dict[str, Any]]:
    """cfn-lint's error-level findings for every template of these cloud assemblies; us-east-2 only, because
    other regions' schemas reject trn2.48xlarge (E3628). With `reuse`, the findings of exactly these templates from
    an earlier run are reused (key: every template's folder position, name and bytes, this module, and the installed
    packages, which hold cfn-lint's version and its rules)."""
    from tests import result_cache

    files = sorted((p for d in outdirs for p in d.glob("*.template.json")), key=str)
    assert len(files) >= 4 * len(outdirs), f"missing templates in {outdirs}"
    # A finding names its file by the position of its folder among `outdirs` in the cache, by its path here.
    relative = {str(p): f"{outdirs.index(p.parent)}/{p.name}" for p in files}
    here = {name: path for path, name in relative.items()}
    entry_key = result_cache.key(
        CFN_LINT_CACHE_KIND,
        result_cache.environment_key(),
        Path(__file__).read_bytes(),  # this module: what cfn-lint is asked and which findings count
        *(part for p in files for part in (relative[str(p)], p.read_bytes())),
    )
    if reuse and (cached := result_cache.load(CFN_LINT_CACHE_KIND, entry_key)) is not None:
        return [{**finding, "file": here[finding["file"]]} for finding in json.loads(cached)]
    findings = _cfn_lint_cold(files)
    if reuse:
        stored = [{**finding, "file": relative[finding["file"]]} for finding in findings]
        result_cache.store(CFN_LINT_CACHE_KIND, entry_key, json.dumps(stored).encode())
    return findings


CFN_LINT_CACHE_KIND = "cfn-lint"


def _cfn_lint_cold(files: list[Path]) -> list[dict[str, Any]]:
    """cfn-lint run now. In-process: cfn-lint's start-up is paid once per session, not once per call (0.6 s of CPU
    with the venv's bytecode compiled by `make setup`, 2.2 s without)."""
    from cfnlint.api import ManualArgs, lint_by_config

    matches = lint_by_config(ManualArgs(templates=[str(p) for p in files], regions=["us-east-2"]))
    return [
        {"rule": m.rule.id, "file": m.filename, "line": m.linenumber, "message": m.message}
        for m in matches
        if m.rule.severity == "error"
    ]


@pytest.fixture(scope="session")
def default_config() -> DeploymentConfig:
    return load_config()


@pytest.fixture(scope="session")
def variant_config() -> DeploymentConfig:
    return parse_config(variant_config_dict())


@pytest.fixture(scope="session")
def synth(default_config: DeploymentConfig, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """With SHARED_SYNTH_DIR (tools/test_shards.py sets it for its concurrent pytest processes), the first process
    synthesizes the default config there and the others read that cloud assembly instead of synthesizing again."""
    shared = os.environ.get(SHARED_SYNTH_DIR)
    if not shared:
        return synthesize(default_config, tmp_path_factory.mktemp("cdk.out"))
    import fcntl

    outdir = Path(shared)
    outdir.mkdir(parents=True, exist_ok=True)
    with (outdir.parent / f"{outdir.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = outdir / "synthesized"
        if not done.exists():
            result = synthesize(default_config, outdir)
            done.touch()
            return result
    return read_synth(default_config, outdir)


@pytest.fixture(scope="session")
def variant_synth(variant_config: DeploymentConfig, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(variant_config, tmp_path_factory.mktemp("cdk.out.variant"))


@pytest.fixture(scope="session")
def plugin_config() -> DeploymentConfig:
    """The vllm-neuron stack's example (config/vllm-neuron.yaml), as the README shows it."""
    return load_config(ROOT / "config" / "vllm-neuron.yaml")


@pytest.fixture(scope="session")
def plugin_synth(plugin_config: DeploymentConfig, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(plugin_config, tmp_path_factory.mktemp("cdk.out.plugin"))


@pytest.fixture(scope="session")
def three_profile_synth(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Synth]:
    """One three-profile config's synth by name, each synthesized once per session and only when asked for."""

    @functools.cache
    def get(name: str) -> Synth:
        return synthesize(parse_config(THREE_PROFILE_CONFIGS[name]()), tmp_path_factory.mktemp(f"cdk.out.{name}"))

    return get


@pytest.fixture(scope="session")
def three_profile_synths(three_profile_synth: Callable[[str], Synth]) -> dict[str, Synth]:
    """The fixed three-profile configs: before issue 9 a third profile failed synth on the dashboard's metric ids."""
    return {name: three_profile_synth(name) for name in THREE_PROFILE_CONFIGS}


@pytest.fixture(scope="session")
def newest_kubernetes_synth(three_profile_synth: Callable[[str], Synth]) -> Synth:
    """The three-profile config on the newest supported Kubernetes version: no synth of its own."""
    return three_profile_synth(NEWEST_KUBERNETES_SYNTH)


_ASSET_HASH = re.compile(r"[0-9a-f]{64}")


def normalise_template(template: dict[str, Any]) -> dict[str, Any]:
    """Replace asset hashes so dependency bumps that only rebuild assets do not churn snapshots."""
    return json.loads(_ASSET_HASH.sub("<asset-hash>", json.dumps(template, sort_keys=True)))


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """A real AWS API (moto's server mode) on loopback; boto3 talks HTTP to it like to AWS."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def aws_env(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Fake credentials and the loopback endpoint; never a real account. Every S3 request our code sends during the
    test must name moto's account as the bucket owner (tests/expected_owner.py); the test fails at teardown if not."""
    import requests

    from tests.expected_owner import ExpectedOwnerCheck

    requests.post(f"{moto_endpoint}/moto-api/reset", timeout=10)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    owner = ExpectedOwnerCheck(MOTO_ACCOUNT)
    owner.install(monkeypatch)
    yield moto_endpoint
    assert not owner.missing, "S3 calls of ours without ExpectedBucketOwner: " + "; ".join(owner.missing[:5])


@pytest.fixture
def fast_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """cloud.aws's shipped attempts with the timeouts cut, so a test waits a second, not SILENT_BOUND_S; fake
    credentials, no instance metadata."""
    from cloud import aws

    monkeypatch.setattr(aws, "READ_S", 0.3)
    monkeypatch.setattr(aws, "CONNECT_S", 0.3)
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def silent_aws(fast_aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """AWS_ENDPOINT_URL on a loopback server that accepts connections and never answers (tests/silent_endpoint.py)."""
    from tests.silent_endpoint import silent_server

    with silent_server() as port:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        yield port
