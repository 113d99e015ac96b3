"""Project code shipped to pods as ConfigMaps, so jobs and init steps run in stock images.

No custom image build and no Docker on the deployer's machine: the files are read at synth time and
versioned with the deployment. A small bundle is mounted file by file under CODE_PATH; a larger one is a
deterministic tar.gz (binaryData) that the job unpacks first. A Job's code comes as two archives: the shared one
(config/, cloud/ and serving_stacks/, the same for every Job) and its own (its package), each in a chart group of its
own, which keeps each manifest far below the 256 KiB payload limit of the kubectl handler that applies it.
"""

from __future__ import annotations

import base64
import gzip
import io
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from cdk8s_plus_34 import k8s
from constructs import Construct

from config.schema import DeploymentConfig

ROOT = Path(__file__).resolve().parents[1]
CODE_PATH = "/opt/trn-specdec"
CONFIG_PATH = "/etc/trn-specdec"  # config.yaml: the effective deployment config, for jobs that read it
CONFIG_CONFIG_MAP = "trn-specdec-config"
CONFIGMAP_LIMIT = 1_000_000  # bytes; Kubernetes rejects larger ConfigMaps
ARCHIVE_PATH = "/opt/trn-specdec-archive"  # where a Job's own archive is mounted
SHARED_ARCHIVE_PATH = "/opt/trn-specdec-shared-archive"  # where the shared archive is mounted
ARCHIVE_KEY = "code.tar.gz"
# The code archives' ConfigMaps: the shared one every Job unpacks, and each Job's own (the staging Job runs
# model_build, so it ships the build's).
SHARED_CODE_CONFIG_MAP = "trn-specdec-shared-code"
BUILD_CODE_CONFIG_MAP = "trn-specdec-build-code"
BENCH_CODE_CONFIG_MAP = "trn-specdec-bench-code"
# The config's vocabulary of other layers (benchmark, API key, cost, labels, metrics): only the benchmark reads it,
# so it ships in the benchmark's own archive and every other Job ships just what it imports.
BENCH_ONLY_CONFIG = frozenset(
    {"config/api_key.py", "config/cost.py", "config/labels.py", "config/metrics.py", "config/prompt_suite.py"}
)
# The packages every Job reads: the config, the AWS clients it calls AWS through, the serving-stack contract.
SHARED_PACKAGES = ("config", "cloud", "serving_stacks")
UNPACKED_PATH = "/tmp/trn-specdec"  # PYTHONPATH of jobs that ship a CodeArchive
DEPS_PATH = "/tmp/trn-specdec-deps"  # where install_locked() puts packages; on PYTHONPATH after the code
REQUIREMENTS_DIR = "requirements"  # generated requirements files inside a CodeArchive


def lock_pins(*names: str) -> list[str]:
    """`name==version` as requirements.lock pins them."""
    entries = _lock_entries()
    pins = []
    for name in names:
        if _norm(name) not in entries:
            raise ValueError(f"{name} is not pinned in requirements.lock; add it to pyproject.toml and relock")
        pins.append(entries[_norm(name)].text.split(" ", 1)[0].split(";", 1)[0].strip())
    return pins


@dataclass(frozen=True)
class _LockEntry:
    text: str  # the pin line with its markers and every --hash line, as in the lock
    via: frozenset[str]  # the packages (normalised names) that require it


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lock_entries() -> dict[str, _LockEntry]:
    """requirements.lock (uv's universal, hash-pinned format) as name -> entry."""
    entries: dict[str, _LockEntry] = {}
    blocks = re.split(r"^(?=[A-Za-z0-9])", (ROOT / "requirements.lock").read_text(), flags=re.MULTILINE)
    for block in blocks:
        match = re.match(r"([A-Za-z0-9._-]+)==", block)
        if not match:
            continue
        pin = [line for line in block.splitlines() if not line.lstrip().startswith("#")]
        comments = " ".join(line.strip().lstrip("#") for line in block.splitlines() if line.lstrip().startswith("#"))
        via = comments.split("via", 1)[1] if "via" in comments else ""
        entries[_norm(match.group(1))] = _LockEntry(
            "\n".join(pin).rstrip(" \\\n"), frozenset(_norm(w) for w in re.findall(r"[A-Za-z0-9._-]+", via))
        )
    return entries


def locked_requirements(*names: str) -> str:
    """A requirements file for `pip install --require-hashes`: `names` and everything that requires them in the
    lock, with every hash the lock holds. pip refuses the install if any dependency is missing from it."""
    entries = _lock_entries()
    lock_pins(*names)  # a sentence for a name the lock lacks
    needed = {_norm(n) for n in names}
    while grown := {n for n, e in entries.items() if n not in needed and e.via & needed}:
        needed |= grown
    return "".join(entries[n].text + "\n" for n in sorted(needed))


def install_locked(requirements_file: str, *, unless_importable: str | None = None) -> str:
    """A shell line that pip-installs a locked_requirements() file into DEPS_PATH: every file checked against the
    lock's hashes, wheels only (no build step runs), nothing written into the image's own site-packages. With
    `unless_importable`, only when the image cannot import those modules."""
    install = (
        "pip install --quiet --no-cache-dir --disable-pip-version-check --require-hashes --only-binary :all: "
        f"--target {DEPS_PATH} -r {requirements_file}"
    )
    if unless_importable is None:
        return install
    return f'python3 -c "import {unless_importable}" 2>/dev/null || {install}'


def archived_requirements(name: str) -> str:
    """Where requirements/<name>.txt of a CodeArchive is once unpack_command() ran."""
    return f"{UNPACKED_PATH}/{REQUIREMENTS_DIR}/{name}.txt"


def python_files(*packages: str) -> list[str]:
    """Every module of `packages`, subpackages included (bench/sweep/, bench/standin/)."""
    return sorted(str(p.relative_to(ROOT)) for pkg in packages for p in (ROOT / pkg).rglob("*.py"))


def shared_code_files() -> list[str]:
    """What every Job imports from config/, cloud/ and serving_stacks/: the shared archive."""
    return [f for f in python_files(*SHARED_PACKAGES) if f not in BENCH_ONLY_CONFIG]


def own_code_files(files: list[str]) -> list[str]:
    """A Job's `files` that the shared archive does not hold: its own archive."""
    shared = set(shared_code_files())
    if missing := shared - set(files):
        raise ValueError(f"a Job would unpack {sorted(missing)} from the shared archive without importing them")
    return [f for f in files if f not in shared]


class CodeBundle(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, name: str, files: list[str]) -> None:
        super().__init__(scope, construct_id)
        self.name = name
        self.files = sorted(files)
        data = {_key(f): (ROOT / f).read_text() for f in self.files}
        size = sum(len(v.encode()) for v in data.values())
        if size > CONFIGMAP_LIMIT:
            raise ValueError(f"code bundle {name} is {size} bytes, over the ConfigMap limit of {CONFIGMAP_LIMIT}")
        self.config_map = k8s.KubeConfigMap(self, "ConfigMap", metadata=k8s.ObjectMeta(name=name), data=data)

    def volume(self, volume_name: str = "code") -> k8s.Volume:
        return code_volume(self.name, self.files, volume_name)


class CodeArchive(Construct):
    """Files as one reproducible tar.gz (fixed mtimes and owners), in a ConfigMap's binaryData."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        files: list[str],
        requirements: dict[str, str] | None = None,
    ) -> None:
        """`requirements`: name -> text of requirements/<name>.txt, for install_locked()."""
        super().__init__(scope, construct_id)
        self.name = name
        self.files = sorted(files)
        generated = {f"{REQUIREMENTS_DIR}/{k}.txt": v.encode() for k, v in (requirements or {}).items()}
        self.archive = build_archive(self.files, generated)
        if len(self.archive) * 4 // 3 > CONFIGMAP_LIMIT:
            raise ValueError(f"code archive {name} is {len(self.archive)} bytes, too large for a ConfigMap")
        self.config_map = k8s.KubeConfigMap(
            self,
            "ConfigMap",
            metadata=k8s.ObjectMeta(name=name),
            binary_data={ARCHIVE_KEY: base64.b64encode(self.archive).decode()},
        )


class SharedCode(Construct):
    """The shared archive. A chart group of its own: the kubectl handler's event limit applies per group."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.code = CodeArchive(self, "Code", name=SHARED_CODE_CONFIG_MAP, files=shared_code_files())


def build_archive(files: list[str], generated: dict[str, bytes] | None = None) -> bytes:
    """Repository `files` plus `generated` (archive path -> bytes), in a fixed order with fixed metadata."""
    contents = {f: (ROOT / f).read_bytes() for f in files} | (generated or {})
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for f, data in sorted(contents.items()):
            info = tarfile.TarInfo(f)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), compresslevel=9, mtime=0)


def archive_volume(config_map: str, volume_name: str = "code") -> k8s.Volume:
    return k8s.Volume(name=volume_name, config_map=k8s.ConfigMapVolumeSource(name=config_map))


def job_code_env(region: str) -> list[k8s.EnvVar]:
    """Env of a Job that runs shipped code: the unpacked archive on PYTHONPATH, unbuffered logs, the region."""
    return [
        k8s.EnvVar(name="PYTHONPATH", value=f"{UNPACKED_PATH}:{DEPS_PATH}"),
        k8s.EnvVar(name="PYTHONUNBUFFERED", value="1"),
        k8s.EnvVar(name="AWS_REGION", value=region),
    ]


def job_code_mounts() -> list[k8s.VolumeMount]:
    """The Job's own and the shared code archive and config.yaml, read-only, where unpack_command() and --config
    expect them."""
    return [
        k8s.VolumeMount(name="code", mount_path=ARCHIVE_PATH, read_only=True),
        k8s.VolumeMount(name="shared-code", mount_path=SHARED_ARCHIVE_PATH, read_only=True),
        k8s.VolumeMount(name="config", mount_path=CONFIG_PATH, read_only=True),
    ]


def job_code_volumes(config_map: str) -> list[k8s.Volume]:
    """The volumes behind job_code_mounts(): the Job's own CodeArchive ConfigMap `config_map`, the shared one and
    the config file."""
    return [archive_volume(config_map), archive_volume(SHARED_CODE_CONFIG_MAP, "shared-code"), ConfigFile.volume()]


def unpack_command() -> str:
    """First line of a job script that ships a CodeArchive: the shared and the Job's own archive, into one
    directory (tar exists in every image we use)."""
    return (
        f"mkdir -p {UNPACKED_PATH}"
        f" && tar -xzf {SHARED_ARCHIVE_PATH}/{ARCHIVE_KEY} -C {UNPACKED_PATH}"
        f" && tar -xzf {ARCHIVE_PATH}/{ARCHIVE_KEY} -C {UNPACKED_PATH}"
    )


class ConfigFile(Construct):
    """The effective config as config.yaml, so jobs in the cluster read the same values as `cdk deploy`."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig) -> None:
        super().__init__(scope, construct_id)
        self.config_map = k8s.KubeConfigMap(
            self,
            "ConfigMap",
            metadata=k8s.ObjectMeta(name=CONFIG_CONFIG_MAP),
            data={"config.yaml": yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)},
        )

    @staticmethod
    def volume(volume_name: str = "config") -> k8s.Volume:
        return k8s.Volume(name=volume_name, config_map=k8s.ConfigMapVolumeSource(name=CONFIG_CONFIG_MAP))


def code_volume(config_map: str, files: list[str], volume_name: str = "code") -> k8s.Volume:
    """Mount a CodeBundle's ConfigMap with its files at their package paths (keys cannot hold '/')."""
    return k8s.Volume(
        name=volume_name,
        config_map=k8s.ConfigMapVolumeSource(
            name=config_map, items=[k8s.KeyToPath(key=_key(f), path=f) for f in files]
        ),
    )


def _key(path: str) -> str:
    return path.replace("/", "__")
