"""The in-cluster benchmark: one Job that runs the suite against every ClusterIP service under identical load,
then writes the results to s3://<bucket>/results/ and to CloudWatch.

Static parts (service account, code, config) are applied by `cdk deploy` with the serving chart;
`make bench` renders the Job itself (render_bench_job, run by `python -m ops.run_benchmark`) once the services are
ready.
"""

from __future__ import annotations

import shlex

import cdk8s
from cdk8s_plus_34 import k8s
from constructs import Construct

from charts.code_bundle import (
    BENCH_CODE_CONFIG_MAP,
    CONFIG_PATH,
    CodeArchive,
    install_locked,
    job_code_env,
    job_code_mounts,
    job_code_volumes,
    locked_requirements,
    own_code_files,
    python_files,
    unpack_command,
)
from charts.neuron_claim import gi
from charts.pod_security import non_root
from charts.vllm_service import api_key_env
from config.bucket_layout import results_key, sweep_file_name, sweep_prefix
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
BENCH_DEADLINE_HOURS = 4
# The default load sweep (two cases, ten load points, three runs each, both variants) takes about 6 h on a
# trn2.48xlarge at max_num_seqs 4 and 256 output tokens (docs/sweep.md); a wider one needs more.
SWEEP_DEADLINE_HOURS = 12
# The client's runtime packages, pinned to the versions requirements.lock holds.
RUNTIME_PACKAGES = ("aiohttp", "pydantic", "pyyaml", "boto3")


def bench_code_files() -> list[str]:
    """What `python -m bench run` and `bench sweep --no-plots` need in the cluster (no plots, no test server, no
    tuner): the archives must fit the kubectl handler's payload (tests/charts/test_code_bundle.py). The Job gets
    what every Job reads of config/ and serving_stacks/ from the shared archive, the rest from its own."""
    skip = {
        "bench/report.py",
        "bench/sweep_plots.py",
        "bench/tune.py",
        "bench/loopback_server.py",
        "bench/selfcheck.py",
    }
    return [f for f in python_files("bench", "config", "serving_stacks") if f not in skip]


def endpoints(config: DeploymentConfig) -> list[str]:
    """Every profile's ClusterIP service, baseline first (speedups are measured against it)."""
    order = [config.baseline_profile, *(p for p in config.profiles if p is not config.baseline_profile)]
    return [f"{p.name}=http://{p.name}.{config.namespace}.svc.cluster.local:{p.port}" for p in order]


def bench_run_argv(
    config: DeploymentConfig,
    bucket_name: str,
    run_id: str,
    extra_args: list[str],
    *,
    lossless: bool = False,
    sweep: bool = False,
) -> list[str]:
    """The arguments of the Job's `python3 -m bench` (ops/run_benchmark.py parses them before applying the Job).
    `sweep`: `bench sweep` against every service: the sweep file, report.md, crossover.json and the peer files go
    to s3://<bucket>/results/<run id>/ (crossover.json also to results/crossover.json, for the spill threshold),
    the crossovers and best goodput to CloudWatch. No plots there (matplotlib is not installed in the Job):
    `make bench-sweep` draws them from the downloaded sweep file."""
    if not sweep:
        return [
            "run",
            *(a for e in endpoints(config) for a in ("--endpoint", e)),
            "--config",
            f"{CONFIG_PATH}/config.yaml",
            "--out",
            f"{RESULTS_PATH}/{run_id}.json",
            "--lossless" if lossless else "--cloudwatch",
            "--upload",
            f"s3://{bucket_name}/{results_key(run_id)}",
            *extra_args,
        ]
    return [
        "sweep",
        *(a for e in endpoints(config) for a in ("--endpoint", e)),
        "--config",
        f"{CONFIG_PATH}/config.yaml",
        "--out",
        f"{RESULTS_PATH}/{sweep_file_name(run_id)}",
        "--report-dir",
        f"{RESULTS_PATH}/{run_id}",
        "--no-plots",
        "--cloudwatch",
        "--upload",
        f"s3://{bucket_name}/{sweep_prefix(run_id)}",
        *extra_args,
    ]


def bench_script(
    config: DeploymentConfig,
    bucket_name: str,
    run_id: str,
    extra_args: list[str],
    *,
    lossless: bool = False,
    sweep: bool = False,
) -> str:
    """The Job's shell script. `lossless`: the lossless check (`bench run --lossless`, batch size 1), which
    publishes nothing to CloudWatch, so its latencies never mix with the benchmark's on the dashboard.
    `sweep`: the load sweep (`bench sweep`) instead of one run."""
    run = [
        "python3",
        "-m",
        "bench",
        *bench_run_argv(config, bucket_name, run_id, extra_args, lossless=lossless, sweep=sweep),
    ]
    return "\n".join(
        [
            "set -euo pipefail",
            unpack_command(),
            install_locked(f"{REQUIREMENTS_PATH}/{REQUIREMENTS_KEY}"),
            shlex.join(run),
        ]
    )


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


class BenchmarkJob(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        bucket_name: str,
        run_id: str,
        extra_args: list[str] | None = None,
        lossless: bool = False,
        sweep: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self.name = f"bench-{run_id}"
        labels = BENCH_LABELS
        self.job = k8s.KubeJob(
            self,
            "Job",
            metadata=k8s.ObjectMeta(name=self.name, labels=labels),
            spec=k8s.JobSpec(
                backoff_limit=0,
                active_deadline_seconds=(SWEEP_DEADLINE_HOURS if sweep else BENCH_DEADLINE_HOURS) * 3600,
                ttl_seconds_after_finished=7 * 24 * 3600,
                template=k8s.PodTemplateSpec(
                    metadata=k8s.ObjectMeta(labels=labels),
                    spec=k8s.PodSpec(
                        restart_policy="Never",
                        service_account_name=BENCH_SERVICE_ACCOUNT,
                        node_selector={NODE_ROLE_LABEL: "system"},
                        containers=[
                            k8s.Container(
                                name="bench",
                                image=BENCH_IMAGE,
                                command=[
                                    "/bin/bash",
                                    "-c",
                                    bench_script(
                                        config, bucket_name, run_id, extra_args or [], lossless=lossless, sweep=sweep
                                    ),
                                ],
                                env=[
                                    *job_code_env(config.region),
                                    k8s.EnvVar(name="HOME", value=SCRATCH_TMP),  # pip and boto3 look there
                                    *api_key_env(config),
                                ],
                                security_context=non_root(),
                                resources=k8s.ResourceRequirements(
                                    requests={"cpu": k8s.Quantity.from_string("1"), "memory": gi(2)},
                                    limits={"cpu": k8s.Quantity.from_string("2"), "memory": gi(2)},
                                ),
                                volume_mounts=[
                                    *job_code_mounts(),
                                    k8s.VolumeMount(name="results", mount_path=RESULTS_PATH),
                                    k8s.VolumeMount(name="tmp", mount_path=SCRATCH_TMP),
                                    k8s.VolumeMount(name="requirements", mount_path=REQUIREMENTS_PATH, read_only=True),
                                ],
                            )
                        ],
                        volumes=[
                            *job_code_volumes(BENCH_CODE_CONFIG_MAP),
                            k8s.Volume(name="results", empty_dir=k8s.EmptyDirVolumeSource(size_limit=gi(1))),
                            # The root file system is read-only: the code, its packages and HOME live here.
                            k8s.Volume(name="tmp", empty_dir=k8s.EmptyDirVolumeSource(size_limit=gi(2))),
                            k8s.Volume(
                                name="requirements",
                                config_map=k8s.ConfigMapVolumeSource(name=BENCH_REQUIREMENTS_CONFIG_MAP),
                            ),
                        ],
                    ),
                ),
            ),
        )


def render_bench_job(
    config: DeploymentConfig,
    account: str,
    run_id: str,
    extra_args: list[str],
    *,
    lossless: bool = False,
    sweep: bool = False,
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
        lossless=lossless,
        sweep=sweep,
    )
    return chart.to_json()
