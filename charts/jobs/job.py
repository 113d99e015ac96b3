"""The one skeleton of the run-time Jobs (stage, build, bench): a single-container Job that runs a shell script over
the shipped code, never restarts its pod, stops at a deadline and is deleted some time after it finishes.

Each Job module (charts/jobs/stage.py, model_build.py, bench.py) keeps only its script and what differs:
image, service account, placement, resources, environment, volumes and the limits below. What they share lives
here once: the script prelude (strict shell, code unpack, locked install), the code's environment, the pod's
fixed fields and the scratch volume on the node's disk.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from cdk8s_plus_34 import k8s
from constructs import Construct

from charts.code_bundle import install_locked, job_code_env, job_code_mounts, job_code_volumes, unpack_command
from charts.neuron_claim import gi

SCRATCH_PATH = "/scratch"  # the Trainium2 Jobs' work space: an emptyDir on the node's disk


@dataclass(frozen=True)
class JobVolume:
    """A volume and where the container mounts it (the pod spec lists both in the same order)."""

    volume: k8s.Volume
    mount: k8s.VolumeMount


def code_volumes(config_map: str) -> list[JobVolume]:
    """The Job's own code archive (`config_map`), the shared one and config.yaml, where unpack_command() and
    --config expect them."""
    return [JobVolume(volume=v, mount=m) for v, m in zip(job_code_volumes(config_map), job_code_mounts(), strict=True)]


def scratch_volume(size_gib: int) -> JobVolume:
    """Node-local work space at SCRATCH_PATH, bounded so one Job cannot fill the disk the services share."""
    return JobVolume(
        volume=k8s.Volume(name="scratch", empty_dir=k8s.EmptyDirVolumeSource(size_limit=gi(size_gib))),
        mount=k8s.VolumeMount(name="scratch", mount_path=SCRATCH_PATH),
    )


def job_script(
    *, requirements: str, steps: Sequence[str], unless_importable: str | None = None, on_exit: str | None = None
) -> str:
    """The Job's shell script: strict mode, an optional clean-up on exit, the shipped code unpacked, the locked
    requirements installed (hash-checked; skipped when `unless_importable` imports), then the Job's own steps."""
    return "\n".join(
        [
            "set -euo pipefail",
            *([f"trap {shlex.quote(on_exit)} EXIT"] if on_exit else []),
            unpack_command(),
            install_locked(requirements, unless_importable=unless_importable),
            *steps,
        ]
    )


def seconds(duration: timedelta) -> int:
    """A Kubernetes duration field (whole seconds)."""
    return int(duration.total_seconds())


class ScriptJob(Construct):
    """One Job: a container `container` of `image` running `script` with bash, the shipped code's environment first
    then `env`, `volumes` in the order given. `placement` holds the PodSpec fields that choose the node (node
    selector, tolerations, device claims)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        labels: Mapping[str, str],
        container: str,
        image: str,
        script: str,
        region: str,
        service_account: str,
        placement: Mapping[str, object],
        resources: k8s.ResourceRequirements,
        security_context: k8s.SecurityContext,
        volumes: Sequence[JobVolume],
        retries: int,
        deadline: timedelta,
        keep_finished: timedelta,
        env: Sequence[k8s.EnvVar] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self.name = name
        self.job = k8s.KubeJob(
            self,
            "Job",
            metadata=k8s.ObjectMeta(name=name, labels=dict(labels)),
            spec=k8s.JobSpec(
                backoff_limit=retries,
                active_deadline_seconds=seconds(deadline),
                ttl_seconds_after_finished=seconds(keep_finished),
                template=k8s.PodTemplateSpec(
                    metadata=k8s.ObjectMeta(labels=dict(labels)),
                    spec=k8s.PodSpec(
                        restart_policy="Never",
                        service_account_name=service_account,
                        **placement,  # type: ignore[arg-type]
                        containers=[
                            k8s.Container(
                                name=container,
                                image=image,
                                command=["/bin/bash", "-c", script],
                                env=[*job_code_env(region), *env],
                                resources=resources,
                                security_context=security_context,
                                volume_mounts=[v.mount for v in volumes],
                            )
                        ],
                        volumes=[v.volume for v in volumes],
                    ),
                ),
            ),
        )
