"""The cold-start model on paper, and what the S3 path costs, computed from the config.

    python -m ops.coldstart_model [--config ...]      # the Markdown that docs/coldstart.md carries per config

Predicted seconds of a phase = bytes it moves / bandwidth of the path they take. Bytes come from the config (the
models each profile loads, its stack's artifact) and the sizes below; bandwidths from the config where it sets
them (the root volume's gp3 throughput, which Mountpoint's cache and the compile-cache copy write through) and
from the assumptions below where it does not. Every assumption is named so `make coldstart-report` can replace
it with a measurement (the Pulled event's image size and seconds, the init check's copied bytes and seconds).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from config import load_config
from config.profiles import ServingProfile
from config.schema import DeploymentConfig
from serving_stacks import stack_named
from serving_stacks.contract import ArtifactKind

GB = 1e9
MIB = 2**20

# Checkpoint bytes: parameters x 2 bytes (bfloat16), parameter counts from the model cards (Qwen3-32B 32.8B,
# Qwen3-1.7B 2.0B, Qwen3-0.6B 0.75B, Qwen3-8B 8.2B); the EAGLE3 head and DFlash drafter from their config.json
# (one decoder layer plus embeddings and a draft LM head). A model not listed counts as UNKNOWN_CHECKPOINT_GB.
CHECKPOINT_GB: dict[str, float] = {
    "Qwen/Qwen3-32B": 65.6,
    "Qwen/Qwen3-1.7B": 4.1,
    "Qwen/Qwen3-0.6B": 1.5,
    "Qwen/Qwen3-8B": 16.4,
    "RedHatAI/Qwen3-32B-speculator.eagle3": 3.1,
    "z-lab/Qwen3-8B-DFlash-b16": 2.0,
}
UNKNOWN_CHECKPOINT_GB = 70.0
# Assumptions, until measured (docs/coldstart.md, "What to measure on AWS"):
IMAGE_GB = 10.0  # compressed serving image; the Pulled event's "Image size" replaces it
IMAGE_PULL_GBPS = 0.15  # containerd download + unpack of one large image through the NAT gateway
COMPILE_CACHE_GB = 5.0  # vllm-neuron's NEFF cache for one profile (weights are not in it)
DEVICE_LOAD_GBPS = 2.0  # host to HBM while the runtime loads weights; the engine-ready log line replaces it
CHECK_S = 10.0  # the init check: one manifest read and a stat per file over Mountpoint
# Targets of issue 22: serving Ready after node Ready on a fresh node, and on a node that has the image.
TARGET_NEW_NODE_S = 600.0
TARGET_READY_NODE_S = 300.0
# NAT gateway data processing, USD per GB, us-east-1/us-east-2 (Amazon VPC pricing page); an S3 gateway
# endpoint has no hourly or per-GB charge (Amazon VPC user guide, gateway endpoints: "no additional charge").
NAT_USD_PER_GB = 0.045


@dataclass(frozen=True)
class Phase:
    name: str
    gb: float
    path: str
    gbps: float
    new_node_only: bool = False

    @property
    def seconds(self) -> float:
        return self.gb / self.gbps if self.gbps else CHECK_S


def checkpoint_gb(config: DeploymentConfig, key: str) -> float:
    return CHECKPOINT_GB.get(config.models[key].hf_id, UNKNOWN_CHECKPOINT_GB)


def weights_gb(config: DeploymentConfig, profile: ServingProfile) -> float:
    """The weights a replica loads: its target and, when it has one, its draft."""
    return sum(checkpoint_gb(config, k) for k in config.profile_models(profile))


def gp3_gbps(config: DeploymentConfig) -> float:
    return config.trn2_nodes.disk_throughput_mibps * MIB / GB


def copies_cache(profile: ServingProfile) -> bool:
    """The stack's serving copies its artifact (a compile cache) to node-local disk before vLLM starts."""
    return stack_named(profile.image.stack).LOCAL_CACHE is not None


def artifact_holds_weights(profile: ServingProfile) -> bool:
    """An NxDI artifact carries the sharded weights; a compile cache carries only the compiled graphs."""
    return stack_named(profile.image.stack).ARTIFACT is ArtifactKind.NXDI_COMPILE


def phases(config: DeploymentConfig, profile: ServingProfile) -> list[Phase]:
    """A new replica's phases. Weights reach the devices through Mountpoint, whose cache writes to the root volume
    (gp3), so the read is bounded by the slower of gp3 and the device load; vllm-neuron first copies its compile
    cache over Mountpoint onto the same volume (read into the cache and written out: half of gp3)."""
    gp3 = gp3_gbps(config)
    weights = weights_gb(config, profile)
    read = min(gp3, DEVICE_LOAD_GBPS) if profile.mount_cache_gib else DEVICE_LOAD_GBPS
    out = [
        Phase("image pull", IMAGE_GB, "public.ecr.aws via NAT", IMAGE_PULL_GBPS, new_node_only=True),
        Phase("artifact check", 0.0, "Mountpoint (stat)", 0.0),
    ]
    if copies_cache(profile):
        out.append(Phase("cache copy", COMPILE_CACHE_GB, "S3 endpoint -> Mountpoint -> gp3", gp3 / 2))
    source = "artifact (sharded weights)" if artifact_holds_weights(profile) else "checkpoints"
    out.append(Phase("model load", weights, f"{source}: S3 endpoint -> Mountpoint cache on gp3 -> HBM", read))
    return out


def s3_gb_per_cold_start(config: DeploymentConfig, profile: ServingProfile) -> float:
    """What one new replica reads from S3 (the image comes from the public registry, not S3)."""
    return weights_gb(config, profile) + (COMPILE_CACHE_GB if copies_cache(profile) else 0.0)


def staged_gb(config: DeploymentConfig) -> float:
    """Every checkpoint a profile loads, once: what `make stage` downloads and uploads."""
    return sum(checkpoint_gb(config, k) for k in config.models_in_use())


def s3_gb_for_ab(config: DeploymentConfig) -> float:
    """`make ab` from an empty bucket: stage (upload every checkpoint), build each profile (read its checkpoints,
    write its artifact), then every service starts once (read its artifact and checkpoints)."""
    staged = staged_gb(config)
    built = 0.0
    for p in config.profiles:
        artifact = weights_gb(config, p) if artifact_holds_weights(p) else COMPILE_CACHE_GB
        built += weights_gb(config, p) + artifact
    served = sum(s3_gb_per_cold_start(config, p) for p in config.profiles)
    return staged + built + served


def markdown(config: DeploymentConfig) -> str:
    """The predicted phases per profile against the targets, and the NAT-vs-endpoint cost table."""
    lines = [
        f"Config `{config.name}`: root volume gp3 {config.trn2_nodes.disk_throughput_mibps} MiB/s.",
        "",
        "| profile | phase | GB | path | GB/s | seconds |",
        "|---|---|---|---|---|---|",
    ]
    verdicts = []
    for p in config.profiles:
        predicted = phases(config, p)
        for ph in predicted:
            lines.append(f"| {p.name} | {ph.name} | {ph.gb:.1f} | {ph.path} | {ph.gbps:.2f} | {ph.seconds:.0f} |")
        new = sum(ph.seconds for ph in predicted)
        ready = sum(ph.seconds for ph in predicted if not ph.new_node_only)
        verdicts.append(
            f"- {p.name}: {new:.0f} s on a new node (target {TARGET_NEW_NODE_S:.0f} s), {ready:.0f} s on a node with "
            f"the image (target {TARGET_READY_NODE_S:.0f} s), before vLLM's own warm-up, which no bytes predict"
        )
    lines += ["", *verdicts, "", "| S3 traffic | GB | through the NAT gateway | through the S3 gateway endpoint |"]
    lines.append("|---|---|---|---|")
    for p in config.profiles:
        gb = s3_gb_per_cold_start(config, p)
        lines.append(f"| one cold start of {p.name} | {gb:.1f} | ${gb * NAT_USD_PER_GB:.2f} | $0.00 |")
    gb = s3_gb_for_ab(config)
    lines.append(f"| `make ab` from an empty bucket | {gb:.1f} | ${gb * NAT_USD_PER_GB:.2f} | $0.00 |")
    # Bytes from the internet cross the NAT gateway whatever the S3 path: the endpoint does not change them.
    downloaded = staged_gb(config)
    for what, gb in (
        ("image pull on a new node (public registry)", IMAGE_GB),
        ("Hugging Face download of `make stage`", downloaded),
    ):
        lines.append(
            f"| {what}: internet, NAT either way | {gb:.1f} | ${gb * NAT_USD_PER_GB:.2f} | ${gb * NAT_USD_PER_GB:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.coldstart_model", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="deployment config (default: config/default.yaml)")
    args = parser.parse_args(argv)
    sys.stdout.write(markdown(load_config(args.config)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
