"""The in-cluster benchmark: one Job that runs the suite against every ClusterIP service under identical load,
then writes the results to s3://<bucket>/results/ and to CloudWatch.

Static parts (service account, code, config) are applied by `cdk deploy` with the serving chart;
`make bench` renders the Job itself (render_bench_job, run by `python -m ops.run_benchmark`) once the services are
ready.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta

import cdk8s
from cdk8s_plus_34 import k8s
from constructs import Construct

from charts.code_bundle import (
    BENCH_CODE_CONFIG_MAP,
    CONFIG_PATH,
    SHARED_PACKAGES,
    CodeArchive,
    locked_requirements,
    own_code_files,
    python_files,
)
from charts.jobs.job import JobVolume, ScriptJob, code_volumes, job_script
from charts.neuron_claim import gi
from charts.pod_security import non_root
from charts.vllm_service import api_key_env
from config.bucket_layout import results_key, sweep_file_name, sweep_key, sweep_prefix
from config.catalogue import NODE_ROLE_LABEL
from config.labels import workload_labels
from config.schema import DeploymentConfig
from config.versions import BENCH, IMAGES

BENCH_LABELS = workload_labels("bench")  # the NetworkPolicy admits these pods to vLLM (charts/pod_security.py)

BENCH_SERVICE_ACCOUNT = "bench"
BENCH_REQUIREMENTS_CONFIG_MAP = "trn-specdec-bench-requirements"
REQUIREMENTS_PATH = "/etc/trn-specdec-requirements"
REQUIREMENTS_KEY = "requirements.txt"
BENCH_IMAGE = IMAGES[BENCH].version  # from the version map (config/versions.py)
RESULTS_PATH = "/results"
SCRATCH_TMP = "/tmp"  # UNPACKED_PATH and DEPS_PATH are under it
BENCH_DEADLINE = timedelta(hours=4)
# The default load sweep (two cases, ten load points, three runs each, both variants) takes about 6 h on a
# trn2.48xlarge at max_num_seqs 4 and 256 output tokens (docs/sweep.md); a wider one needs more.
SWEEP_DEADLINE = timedelta(hours=12)
# The client's runtime packages, pinned to the versions requirements.lock holds.
RUNTIME_PACKAGES = ("aiohttp", "pydantic", "pyyaml", "boto3")


def bench_code_files() -> list[str]:
    """What `python -m bench run` and `bench sweep --no-plots` need in the cluster (no plots, no test server; the
    tuner is in: the sweep's report.md carries its prediction, bench/sweep/report.py imports bench.tune): the
    archives must fit the kubectl handler's payload (tests/charts/test_code_bundle.py). The Job gets
    what every Job reads of config/ and serving_stacks/ from the shared archive, the rest from its own."""
    skip = {
        "bench/report.py",
        "bench/sweep/plots.py",
        "bench/standin/server.py",
        "bench/standin/selfcheck.py",
    }
    return [f for f in python_files("bench", *SHARED_PACKAGES) if f not in skip]


def endpoints(config: DeploymentConfig) -> list[str]:
    """Every profile's ClusterIP service, baseline first (speedups are measured against it)."""
    order = [config.baseline_profile, *(p for p in config.profiles if p is not config.baseline_profile)]
    return [f"{p.name}=http://{p.name}.{config.namespace}.svc.cluster.local:{p.port}" for p in order]


@dataclass(frozen=True)
class BenchMode:
    """One kind of benchmark Job, as data: which `python -m bench` command it runs, the flags that differ, where its
    results file goes in the bucket (and comes back from), how its run id starts, its time limit, and the report
    `make` draws locally from the downloaded file."""

    command: str
    run_id_prefix: str
    deadline: timedelta
    out_file: Callable[[str], str]  # run id -> file name under RESULTS_PATH
    flags: Callable[[str], list[str]]  # run id -> the flags that differ between modes
    upload: Callable[[str], str]  # run id -> where the Job uploads (bucket key or prefix)
    results_key: Callable[[str], str]  # run id -> the results file `make` downloads
    report: str  # the `python -m bench` command that reports the downloaded file
    report_reads_config: bool  # whether that report takes --config (the SLOs and the speedup floor)


# `bench run` once against every service, publishing to CloudWatch.
RUN = BenchMode(
    command="run",
    run_id_prefix="",
    deadline=BENCH_DEADLINE,
    out_file=lambda run_id: f"{run_id}.json",
    flags=lambda run_id: ["--cloudwatch"],
    upload=results_key,
    results_key=results_key,
    report="report",
    report_reads_config=False,
)
# The lossless check (`bench run --lossless`, batch size 1), which publishes nothing to CloudWatch, so its latencies
# never mix with the benchmark's on the dashboard.
LOSSLESS = replace(RUN, run_id_prefix="lossless-", flags=lambda run_id: ["--lossless"])
# The load sweep (`bench sweep`): the sweep file, report.md, crossover.json and the peer files go to
# s3://<bucket>/results/<run id>/ (crossover.json also to results/crossover.json, for the spill threshold), the
# crossovers and best goodput to CloudWatch. No plots there (matplotlib is not installed in the Job): `make
# bench-sweep` draws them from the downloaded sweep file.
SWEEP = BenchMode(
    command="sweep",
    run_id_prefix="sweep-",
    deadline=SWEEP_DEADLINE,
    out_file=sweep_file_name,
    flags=lambda run_id: ["--report-dir", f"{RESULTS_PATH}/{run_id}", "--no-plots", "--cloudwatch"],
    upload=sweep_prefix,
    results_key=sweep_key,
    report="sweep-report",
    report_reads_config=True,
)


def bench_run_argv(
    config: DeploymentConfig, bucket_name: str, run_id: str, extra_args: list[str], *, mode: BenchMode = RUN
) -> list[str]:
    """The arguments of the Job's `python3 -m bench` (ops/run_benchmark.py parses them before applying the Job)."""
    return [
        mode.command,
        *(a for e in endpoints(config) for a in ("--endpoint", e)),
        "--config",
        f"{CONFIG_PATH}/config.yaml",
        "--out",
        f"{RESULTS_PATH}/{mode.out_file(run_id)}",
        *mode.flags(run_id),
        "--upload",
        f"s3://{bucket_name}/{mode.upload(run_id)}",
        *extra_args,
    ]


def bench_script(
    config: DeploymentConfig, bucket_name: str, run_id: str, extra_args: list[str], *, mode: BenchMode = RUN
) -> str:
    """The Job's shell script: the client's locked requirements, then `python3 -m bench` in the given mode."""
    run = ["python3", "-m", "bench", *bench_run_argv(config, bucket_name, run_id, extra_args, mode=mode)]
    return job_script(requirements=f"{REQUIREMENTS_PATH}/{REQUIREMENTS_KEY}", steps=[shlex.join(run)])


class BenchmarkSupport(Construct):
    """Service account (its Pod Identity role may only PutMetricData in the configured namespace and write
    results/) and the client's own code (the shared archive holds the rest), applied once by `cdk deploy`."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        k8s.KubeServiceAccount(self, "ServiceAccount", metadata=k8s.ObjectMeta(name=BENCH_SERVICE_ACCOUNT))
        self.code = CodeArchive(self, "Code", name=BENCH_CODE_CONFIG_MAP, files=own_code_files(bench_code_files()))


class BenchmarkRequirements(Construct):
    """The client's packages with every hash the lock holds, for `pip install --require-hashes`. Its own
    ConfigMap (and chart group): the hashes of every platform's wheels are about 80 KB, too much to share a
    manifest with the code under the kubectl handler's payload limit."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        k8s.KubeConfigMap(
            self,
            "ConfigMap",
            metadata=k8s.ObjectMeta(name=BENCH_REQUIREMENTS_CONFIG_MAP),
            data={REQUIREMENTS_KEY: locked_requirements(*RUNTIME_PACKAGES)},
        )


class BenchmarkJob(ScriptJob):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        bucket_name: str,
        run_id: str,
        extra_args: list[str] | None = None,
        mode: BenchMode = RUN,
    ) -> None:
        results = JobVolume(
            volume=k8s.Volume(name="results", empty_dir=k8s.EmptyDirVolumeSource(size_limit=gi(1))),
            mount=k8s.VolumeMount(name="results", mount_path=RESULTS_PATH),
        )
        # The root file system is read-only: the code, its packages and HOME live here.
        tmp = JobVolume(
            volume=k8s.Volume(name="tmp", empty_dir=k8s.EmptyDirVolumeSource(size_limit=gi(2))),
            mount=k8s.VolumeMount(name="tmp", mount_path=SCRATCH_TMP),
        )
        requirements = JobVolume(
            volume=k8s.Volume(
                name="requirements", config_map=k8s.ConfigMapVolumeSource(name=BENCH_REQUIREMENTS_CONFIG_MAP)
            ),
            mount=k8s.VolumeMount(name="requirements", mount_path=REQUIREMENTS_PATH, read_only=True),
        )
        super().__init__(
            scope,
            construct_id,
            name=f"bench-{run_id}",
            labels=BENCH_LABELS,
            container="bench",
            image=BENCH_IMAGE,
            script=bench_script(config, bucket_name, run_id, extra_args or [], mode=mode),
            region=config.region,
            service_account=BENCH_SERVICE_ACCOUNT,
            placement={"node_selector": {NODE_ROLE_LABEL: "system"}},
            resources=k8s.ResourceRequirements(
                requests={"cpu": k8s.Quantity.from_string("1"), "memory": gi(2)},
                limits={"cpu": k8s.Quantity.from_string("2"), "memory": gi(2)},
            ),
            security_context=non_root(),
            env=[
                k8s.EnvVar(name="HOME", value=SCRATCH_TMP),  # pip and boto3 look there
                *api_key_env(config),
            ],
            volumes=[*code_volumes(BENCH_CODE_CONFIG_MAP), results, tmp, requirements],
            retries=0,
            deadline=mode.deadline,
            keep_finished=timedelta(days=7),
        )


def render_bench_job(
    config: DeploymentConfig, account: str, run_id: str, extra_args: list[str], *, mode: BenchMode = RUN
) -> list[dict]:
    app = cdk8s.App()
    chart = cdk8s.Chart(app, "bench", namespace=config.namespace, disable_resource_name_hashes=True)
    BenchmarkJob(
        chart,
        "job",
        config=config,
        bucket_name=config.models_bucket_name(account),
        run_id=run_id,
        extra_args=extra_args,
        mode=mode,
    )
    return chart.to_json()
