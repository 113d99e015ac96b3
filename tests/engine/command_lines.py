"""The vLLM command lines of the rendered Deployments, and the pinned vLLM environments that check them.

The command lines are read from the rendered Deployments (container command + args + env), not from the
argument builder, so the check sees exactly what Kubernetes would start. Each image's vLLM runs in its own
pinned environment (Makefile: `.venv-vllm-<version>`), in a subprocess, with the staged checkpoint paths
mapped to fixture dirs that hold the pinned models' `config.json` (fixtures/README.md). The environment is
required: a missing one fails here, it does not skip.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from charts import render_serving
from config import DeploymentConfig, load_config, parse_config
from tests import result_cache
from tests.conftest import ROOT, default_config_dict, variant_config_dict

HERE = Path(__file__).parent
CHECKPOINT_FIXTURES = HERE / "fixtures"
BUCKET = "trn-specdec-models-000000000000-us-east-2"
# Host RAM of the Trainium node: vLLM checks its CPU swap space against it (trn2.48xlarge: 2 TiB, EC2
# instance type page).
HOST_MEMORY_GIB = {"trn2.48xlarge": 2048, "trn2u.48xlarge": 2048}
# vLLM's environment: no telemetry, no hub, quiet logs; nothing of the test process leaks in.
VLLM_ENV = {"PATH": "/usr/bin:/bin", "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "WARNING"}
TOO_LONG_DRAFT = "speculative_max_model_len=2048 cannot be larger than target_max_model_len=1024"


@dataclass(frozen=True)
class Engine:
    """One pinned vLLM: its environment (built by the Makefile) and the script that runs its checks."""

    venv: Path
    script: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


# Selected by the vLLM version that leads the serving image's tag (0.9.1-neuronx-..., 0.29.0.1.2.0-neuronx-...).
ENGINES = {
    "0.9.1": Engine(venv=ROOT / ".venv-vllm-0.9.1", script=HERE / "vllm_0_9_1_check.py"),
    "0.29.0": Engine(venv=ROOT / ".venv-vllm-0.29.0", script=HERE / "vllm_0_29_0_check.py"),
}


def multi_profile_config() -> DeploymentConfig:
    """The README's tuning example (a third profile, spec-k5) plus a Qwen3-0.6B draft: four services."""
    data = default_config_dict()
    data["name"] = "specdec-multi"
    data["trn2_nodes"].update(max_size=2)
    data["profiles"] += [
        {"name": "spec-k5", "decoding": {"method": "fused-draft", "draft": "qwen3-1-7b", "num_speculative_tokens": 5}},
        {
            "name": "spec-0-6b",
            "decoding": {"method": "fused-draft", "draft": "qwen3-0-6b", "num_speculative_tokens": 7},
        },
    ]
    return parse_config(data)


def plugin_config() -> DeploymentConfig:
    """The vllm-neuron example the README shows (config/vllm-neuron.yaml)."""
    return load_config(ROOT / "config" / "vllm-neuron.yaml")


def dflash_config() -> DeploymentConfig:
    """DFlash on the vllm-neuron stack at TP 8 (one device, LNC 1) with a published drafter and its target.

    No DFlash drafter exists for Qwen3-32B (none is validated on Neuron either), so this uses z-lab's Qwen3-8B
    drafter. Their revisions are not known here: the all-zero revision marks fixture-only models
    (fixtures/README.md); never deploy this config.
    """
    data = yaml.safe_load((ROOT / "config" / "vllm-neuron.yaml").read_text())
    data["models"] = {
        "qwen3-8b": {"hf_id": "Qwen/Qwen3-8B", "revision": "0" * 40, "tokenizer_family": "qwen3"},
        "qwen3-8b-dflash": {"hf_id": "z-lab/Qwen3-8B-DFlash-b16", "revision": "0" * 40, "tokenizer_family": "qwen3"},
    }
    data["serving"]["target"] = "qwen3-8b"
    data["serving"]["placement"] = {"devices": 1, "logical_neuron_cores": 1, "tensor_parallel_size": 8}
    # k = the drafter's block_size (16) - 1: the plugin requires it (dflash.py), as its Qwen3 example runs it.
    data["profiles"][1] = {
        "name": "dflash",
        "decoding": {"method": "dflash", "draft": "qwen3-8b-dflash", "num_speculative_tokens": 15},
    }
    return parse_config(data)


CONFIGS = {
    "default": lambda: parse_config(default_config_dict()),
    "variant": lambda: parse_config(variant_config_dict()),
    "multi": multi_profile_config,
    "plugin": plugin_config,
    "dflash": dflash_config,
}


@functools.cache
def rendered(config_name: str) -> tuple[DeploymentConfig, dict[str, dict[str, Any]]]:
    """A config and its Deployments' vllm containers by Deployment name, as rendered (once per session)."""
    config = CONFIGS[config_name]()
    found = {}
    for obj in render_serving(config, BUCKET):
        if obj["kind"] != "Deployment" or obj["metadata"]["labels"].get("app.kubernetes.io/name") != "vllm":
            continue  # the endpoint's router
        pod = obj["spec"]["template"]["spec"]
        (container,) = [c for c in pod["containers"] if c["name"] == "vllm"]
        found[obj["metadata"]["name"]] = container
    return config, found


def to_fixture_path(value: str, mounts: list[str]) -> str:
    """Map a path under a mounted volume to the fixture tree (same layout as the bucket), else leave it."""
    for mount in mounts:
        if value.startswith(mount + "/checkpoints/"):
            local = CHECKPOINT_FIXTURES / value.removeprefix(mount + "/")
            assert (local / "config.json").is_file(), (
                f"{value} has no fixture: add {local.relative_to(ROOT)}/config.json from the model's published "
                "config at that revision (tests/engine/fixtures/README.md)"
            )
            return str(local)
    return value


def map_arg(arg: str, mounts: list[str]) -> str:
    """Model paths sit bare (the positional model) or inside a JSON flag value (--speculative-config)."""
    if arg.startswith("{"):
        value = json.loads(arg)
        mapped = {k: to_fixture_path(v, mounts) if isinstance(v, str) else v for k, v in value.items()}
        return json.dumps(mapped)
    return to_fixture_path(arg, mounts)


def vllm_argv(container: dict[str, Any]) -> list[str]:
    """What the container runs as vLLM: command + args, after the start-up guard's `--` when a stack wraps vLLM in it
    (the guard runs exactly that argv: serving_pod/startup_guard.py)."""
    argv = container["command"] + container["args"]
    return argv[argv.index("--") + 1 :] if "--" in argv else argv


def command_line(name: str, container: dict[str, Any], config: DeploymentConfig) -> dict[str, Any]:
    mounts = [m["mountPath"].rstrip("/") for m in container.get("volumeMounts", [])]
    return {
        "name": name,
        "argv": [map_arg(a, mounts) for a in vllm_argv(container)],
        "env": {e["name"]: e["value"] for e in container.get("env", []) if "value" in e},
        "host_memory_gib": HOST_MEMORY_GIB[config.trn2_nodes.instance_type],
    }


def engine_for(image: str) -> str:
    version = ".".join(image.rsplit(":", 1)[1].split("-", 1)[0].split(".")[:3])
    assert version in ENGINES, f"image {image}: no pinned vLLM {version} for the engine check; add it to ENGINES"
    return version


class EngineRuns:
    """One subprocess per pinned vLLM over every command line of every config, started early.

    `make test` runs the suite on one core; vLLM's imports take seconds, so the check starts when the
    engine tests are collected and runs on the other core while the rest of the suite runs. A warm run reuses the
    verdicts of the same command lines from the same vLLM environment (tests/result_cache.py; `engine_key`).
    """

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.keys: dict[str, str] = {}
        self.missing: list[str] = []
        for version, commands in all_command_lines().items():
            engine = ENGINES[version]
            if not engine.python.exists():
                self.missing.append(
                    f"vLLM {version}'s environment {engine.venv.name} is missing: run `make test` (or "
                    f"`make {engine.venv.name}/.installed`); the engine check never skips"
                )
                continue
            self.keys[version] = engine_key(version, commands)
            cached = result_cache.load(CACHE_KIND, self.keys[version])
            if cached is not None:
                self._results_path(version).write_bytes(cached)
                continue
            commands_path = tmp / f"commands-{version}.json"
            commands_path.write_text(json.dumps(commands, indent=2))
            argv = [engine.python, engine.script, commands_path, self._results_path(version)]
            with (tmp / f"log-{version}.txt").open("w") as log:  # a file, not a pipe: nothing blocks on it
                self.procs[version] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=VLLM_ENV)

    def _results_path(self, version: str) -> Path:
        return self.tmp / f"results-{version}.json"

    def results(self) -> dict[str, str]:
        """Command line name -> "ok" or vLLM's error; waits for the subprocesses."""
        assert not self.missing, "\n".join(self.missing)
        found: dict[str, str] = {}
        for version in self.keys:
            path = self._results_path(version)
            if version in self.procs:
                self.procs[version].wait(timeout=600)
                log = (self.tmp / f"log-{version}.txt").read_text()
                assert path.exists(), f"vLLM {version} check did not run:\n{log[-3000:]}"
                result_cache.store(CACHE_KIND, self.keys[version], path.read_bytes())
            found |= json.loads(path.read_text())
        return found


CACHE_KIND = "vllm-engine"


def engine_key(version: str, commands: list[dict[str, Any]]) -> str:
    """Every input of one vLLM's verdicts: the command lines, vLLM's environment variables, the pinned lock, when the
    environment was installed and with which interpreter, and every file of this folder (the check scripts, their
    driver, the checkpoint fixtures)."""
    engine = ENGINES[version]
    lock = ROOT / f"requirements-vllm-{version}.lock"
    installed = engine.venv / ".installed"
    folder = [p for p in HERE.rglob("*") if "__pycache__" not in p.parts]
    return result_cache.key(
        version,
        json.dumps(commands, sort_keys=True),
        json.dumps(VLLM_ENV, sort_keys=True),
        lock.read_bytes() if lock.exists() else b"",
        str(installed.stat().st_mtime_ns) if installed.exists() else "",
        os.path.realpath(engine.python),
        result_cache.files_key(folder, ROOT),
    )


def with_draft_len(command: dict[str, Any], draft_len: int) -> dict[str, Any]:
    """The same command line with the draft's max_model_len replaced: the check must reject a too-long one."""
    argv = list(command["argv"])
    i = argv.index("--speculative-config") + 1
    argv[i] = json.dumps(json.loads(argv[i]) | {"max_model_len": draft_len})
    return command | {"name": f"{command['name']}+draft-len-{draft_len}", "argv": argv}


PER_BATCH_K = "+per-batch-k"


def with_per_batch_k(command: dict[str, Any]) -> dict[str, Any]:
    """The same command line with a per-batch-size k schedule (vLLM PR #32374's
    `num_speculative_tokens_per_batch_size`: k up to batch 2, none above): docs/sweep.md records what each pinned
    vLLM does with it."""
    argv = list(command["argv"])
    i = argv.index("--speculative-config") + 1
    spec = json.loads(argv[i])
    argv[i] = json.dumps(
        spec | {"num_speculative_tokens_per_batch_size": [[1, 2, spec["num_speculative_tokens"]], [3, 1024, 0]]}
    )
    return command | {"name": f"{command['name']}{PER_BATCH_K}", "argv": argv}


def all_command_lines() -> dict[str, list[dict[str, Any]]]:
    """Pinned vLLM version -> the command lines it must accept, plus one it must reject (a too-long draft) and
    one with a per-batch-size k schedule."""
    by_engine: dict[str, list[dict[str, Any]]] = {}
    for config_name in CONFIGS:
        config, containers = rendered(config_name)
        for name, container in containers.items():
            version = engine_for(container["image"])
            command = command_line(f"{config_name}/{name}", container, config)
            by_engine.setdefault(version, []).append(command)
            if config_name in ("default", "plugin") and "--speculative-config" in command["argv"]:
                by_engine[version].append(with_draft_len(command, 2048))
                by_engine[version].append(with_per_batch_k(command))
    return by_engine


def rendered_names() -> list[str]:
    return [f"{config_name}/{name}" for config_name in CONFIGS for name in rendered(config_name)[1]]
