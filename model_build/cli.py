"""`python -m model_build`: plan, stage checkpoints, compile, publish and verify one profile's artifact.

Exit codes: 0 ok, 1 the artifact (or its inputs) does not match the profile, 2 usage or environment
(bad arguments, config, credentials, bucket, missing NxDI / huggingface_hub).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import TextIO

from cloud import aws
from config import DEFAULT_CONFIG, ConfigError, DeploymentConfig, load_config
from config.bucket_layout import MOUNT_PATH
from config.exit_codes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from config.ports import DEFAULT_API_PORT
from model_build.artifact import artifact_plan
from model_build.artifact_plan import BuildOptions
from model_build.compile_cache import CachePlan
from model_build.errors import BuildError, build_command
from model_build.plan import BuildPlan
from model_build.progress import DEFAULT_LOG_INTERVAL_S
from model_build.store import (
    DEFAULT_CONCURRENCY,
    DEFAULT_PART_SIZE,
    MAX_PART_SIZE,
    MIB,
    MIN_PART_SIZE,
    S3Store,
    TransferSettings,
    make_s3_client,
)

DESCRIPTION = """\
Build the compiled artifact of a serving profile and publish it, content-addressed, to the models bucket:
s3://<bucket>/artifacts/<digest>/ with manifest.json written last. On the legacy-v0 stack the artifact is an
NxDI compile; on the vllm-neuron stack it is the plugin's compile cache, filled by running the serving
command line. Serving refuses to start unless the artifact's manifest matches the profile.

The usual path is `make build PROFILE=<name>`: it stages the profile's checkpoints with an in-cluster Job
if they are missing (`make stage`), then runs compile and publish in a Kubernetes Job on a Trainium2 node.
Run `plan` anywhere to see what a profile builds."""

EPILOG = """\
exit codes: 0 ok, 1 mismatch (artifact or inputs differ from the profile), 2 usage or environment error.
examples:
  python -m model_build plan speculative
  python -m model_build stage-checkpoints
  python -m model_build compile speculative --out /scratch/speculative      # inside the Neuron image
  python -m model_build publish speculative --from /scratch/speculative
  python -m model_build verify speculative --deep"""


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number above 0")
    return value


def _part_size_mib(text: str) -> float:
    """S3's multipart part size, 5 MiB to 5 GiB (Amazon S3 user guide, "Amazon S3 multipart upload limits")."""
    value = _positive_float(text)
    if not MIN_PART_SIZE <= value * MIB <= MAX_PART_SIZE:
        raise argparse.ArgumentTypeError(
            f"{text!r} is outside S3's part size of {MIN_PART_SIZE // MIB} to {MAX_PART_SIZE // MIB} MiB"
        )
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more")
    return value


class Context:
    """Config, bucket and S3 client, each resolved only when a command needs it."""

    def __init__(self, args: argparse.Namespace, stream: TextIO) -> None:
        self.args = args
        self.stream = stream

    @cached_property
    def config(self) -> DeploymentConfig:
        return load_config(self.args.config)

    @cached_property
    def settings(self) -> TransferSettings:
        a = self.args
        return TransferSettings(
            part_size=int(a.part_size_mib * MIB), concurrency=a.concurrency, progress_interval=a.progress_interval
        )

    @cached_property
    def bucket(self) -> str:
        if self.args.bucket:
            return self.args.bucket
        return self.config.models_bucket_name(self._account())

    def _account(self) -> str:
        return aws.caller_account(
            self.config.region,
            f"configure AWS credentials or pass --bucket {self.config.models_bucket_name('<account>')}",
        )

    @cached_property
    def store(self) -> S3Store:
        """The command's one HeadBucket happens here, before any hashing: a missing bucket, denied access or a
        silent endpoint fails first (within cloud.aws.SILENT_BOUND_S, each attempt shown)."""
        owner = aws.bucket_owner(self.bucket, self.config.region, "configure AWS credentials")
        client = make_s3_client(self.config.region, self.settings, owner, self.stream)
        aws.check_bucket(client, self.bucket)
        return S3Store(client, self.bucket, self.settings, stream=self.stream)

    def plan(self, *, out_dir: str | None = None, bucket: str | None = None) -> BuildPlan | CachePlan:
        """The profile's build: an NxDI compile or a compile cache filled by vLLM, as its stack's ARTIFACT says."""
        try:
            profile = self.config.profile(self.args.profile)
        except KeyError as err:
            raise BuildError(str(err.args[0])) from None
        return artifact_plan(
            self.config, profile, models_root=self.args.models_root, out_dir=out_dir, bucket=bucket or self.args.bucket
        )


def _plan(ctx: Context, out: TextIO) -> int:
    plan = ctx.plan(out_dir=ctx.args.out)
    out.write(json.dumps(plan.to_json(), indent=1) + "\n" if ctx.args.json else plan.render())
    return EXIT_OK


def _stage(ctx: Context, out: TextIO) -> int:
    from model_build.checkpoints import select_models, stage_checkpoints

    keys = select_models(ctx.config, ctx.args.model)
    stage_checkpoints(
        ctx.store,
        ctx.config,
        keys,
        scratch=Path(ctx.args.scratch),
        log=lambda m: print(m, file=out),
        force=ctx.args.force,
    )
    return EXIT_OK


def json_argv(text: str) -> list[str]:
    """An argparse type: a JSON list of strings (a command line); refused at parse time with what it is instead."""
    try:
        argv = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"is not JSON ({err.msg} at character {err.pos}); pass a JSON list") from None
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise argparse.ArgumentTypeError(
            f'is a JSON {type(argv).__name__}, not a non-empty list of strings; pass e.g. ["vllm", "serve", ...]'
        )
    return argv


def _compile(ctx: Context, out: TextIO) -> int:
    plan = ctx.plan(out_dir=str(Path(ctx.args.out).resolve()))
    record = plan.build(
        BuildOptions(
            target_path=ctx.args.target_path,
            draft_path=ctx.args.draft_path,
            vllm_argv=ctx.args.vllm_argv_json,
            port=ctx.args.port,
            timeout_s=ctx.args.timeout_minutes * 60,
        )
    )
    print(
        f"compiled profile {plan.profile} (digest {record.digest}) into {plan.out_dir}; publish it: "
        f"{plan.commands()['publish']}",
        file=out,
    )
    return EXIT_OK


def _publish(ctx: Context, out: TextIO) -> int:
    from model_build.publish import publish_artifact

    plan = ctx.plan(bucket=ctx.bucket)
    result = publish_artifact(ctx.store, plan, Path(ctx.args.from_dir))
    print(result.summary(), file=out)
    return EXIT_OK


def _verify(ctx: Context, out: TextIO) -> int:
    from model_build.verify import verify_artifact

    manifest_file = Path(ctx.args.manifest_file) if ctx.args.manifest_file else None
    offline = manifest_file is not None and not ctx.args.deep
    plan = ctx.plan(bucket=None if offline else ctx.bucket)
    report = verify_artifact(None if offline else ctx.store, plan, deep=ctx.args.deep, manifest_file=manifest_file)
    (out if report.ok else sys.stderr).write(report.render(plan, deep=ctx.args.deep))
    return EXIT_OK if report.ok else EXIT_FAILED


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m model_build",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--config", default=str(DEFAULT_CONFIG), help="deployment config file (default: config/default.yaml)"
    )
    parser.add_argument(
        "--bucket",
        help="models bucket (default: <name>-models-<account>-<region> from the config, account via STS)",
    )
    parser.add_argument(
        "--models-root",
        default=MOUNT_PATH,
        help="where the bucket is mounted: checkpoints are read from <root>/checkpoints/<hf_id>/<revision> "
        f"(default: {MOUNT_PATH})",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    transfer = argparse.ArgumentParser(add_help=False)
    group = transfer.add_argument_group("transfer")
    group.add_argument(
        "--part-size-mib",
        type=_part_size_mib,
        default=DEFAULT_PART_SIZE / MIB,
        help=f"multipart part size in MiB, {MIN_PART_SIZE // MIB} to {MAX_PART_SIZE // MIB} (default: "
        f"{DEFAULT_PART_SIZE // MIB})",
    )
    group.add_argument(
        "--concurrency",
        type=_positive_int,
        default=DEFAULT_CONCURRENCY,
        help=f"parallel requests (default: {DEFAULT_CONCURRENCY})",
    )
    group.add_argument(
        "--progress-interval",
        type=_positive_float,
        default=DEFAULT_LOG_INTERVAL_S,
        help="seconds between progress log lines when stderr is not a terminal "
        f"(default: {DEFAULT_LOG_INTERVAL_S:.0f}); a terminal gets a progress bar",
    )

    p = _command(
        commands,
        "plan",
        _plan,
        help="show what a profile builds and where it goes (offline)",
        description="Print what the profile's stack builds (legacy-v0: the target and draft NxDI NeuronConfig "
        "keyword arguments and the equivalent inference_demo command; vllm-neuron: the compile cache and the "
        "vLLM arguments that shape its graphs), the artifact digest and the S3 destinations. Needs no AWS access and no "
        "Neuron host.",
    )
    p.add_argument("--out", help="compile output directory to show in the commands (default: /tmp/trn-specdec/...)")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = _command(
        commands,
        "stage-checkpoints",
        _stage,
        takes_profile=False,
        parents=[transfer],
        help="copy pinned Hugging Face checkpoints into the bucket",
        description="Download each model at its pinned revision (huggingface_hub) into --scratch, then upload it "
        "to s3://<bucket>/checkpoints/<hf_id>/<revision>/ with a manifest written last. A model whose manifest "
        "is already there is skipped without downloading. Resumable: objects already present with the same "
        "sha256 are skipped, partial uploads resume.",
    )
    p.add_argument(
        "--model",
        action="append",
        metavar="KEY",
        help="a key of models in the config; repeat for several (default: every target and draft a profile uses)",
    )
    p.add_argument("--scratch", default="/tmp/trn-specdec/hf", help="local download directory")
    p.add_argument(
        "--force", action="store_true", help="download and check models that are already staged (repairs them)"
    )

    p = _command(
        commands,
        "compile",
        _compile,
        help="compile a profile into a local directory (its Neuron image only)",
        description="legacy-v0: build NeuronConfig (and, for fused speculation, the draft config and "
        "FusedSpecNeuronConfig) exactly as `plan` shows and compile with NxDI into --out. vllm-neuron: run the "
        "serving command line (--vllm-argv-json) until it serves, which fills the plugin's compile cache in --out. "
        "Either way build-inputs.json is written there last. Runs only in the profile's Neuron image on a "
        f"Trainium2 node; elsewhere use `{build_command('<name>')}`.",
    )
    p.add_argument("--out", required=True, help="local output directory (tens of GB for Qwen3-32B)")
    p.add_argument("--target-path", help="local target checkpoint dir (default: <models-root>/checkpoints/...)")
    p.add_argument("--draft-path", help="local draft checkpoint dir (default: <models-root>/checkpoints/...)")
    p.add_argument(
        "--vllm-argv-json",
        type=json_argv,
        help="vllm-neuron profiles: the serving command line (JSON list, starting with vllm serve) to fill the cache with",
    )
    p.add_argument(
        "--port", type=int, default=DEFAULT_API_PORT, help="vllm-neuron profiles: the port of that command line"
    )
    p.add_argument("--timeout-minutes", type=int, default=360, help="vllm-neuron profiles: give up after this long")

    p = _command(
        commands,
        "publish",
        _publish,
        parents=[transfer],
        help="upload a compile output to artifacts/<digest>/, manifest last",
        description="Upload every file of --from (parallel multipart, checksummed in transit, SHA-256 of each "
        "file recorded) to s3://<bucket>/artifacts/<digest>/, then write manifest.json once a listing confirms "
        "every object. "
        "Idempotent and resumable: objects already present with the same size and sha256 are skipped and "
        "partial uploads resume; a published manifest is never overwritten.",
    )
    p.add_argument("--from", dest="from_dir", required=True, help="the --out directory of compile")

    p = _command(
        commands,
        "verify",
        _verify,
        parents=[transfer],
        help="check the published artifact against the profile",
        description="Check that artifacts/<digest>/manifest.json exists and matches the profile, and that every "
        "object it lists is present with its size and sha256 metadata. --deep downloads and hashes every object.",
    )
    p.add_argument("--deep", action="store_true", help="stream every object and compare its sha256 (slow)")
    p.add_argument(
        "--manifest-file",
        help="check this local manifest file against the profile instead of the bucket's (offline; with --deep "
        "the bucket's objects are hashed against it)",
    )
    return parser


def _command(
    commands: argparse._SubParsersAction,
    name: str,
    func: Callable[[Context, TextIO], int],
    *,
    help: str,
    description: str,
    parents: Sequence[argparse.ArgumentParser] = (),
    takes_profile: bool = True,
) -> argparse.ArgumentParser:
    """One command: what it runs, its help, and first (all but stage-checkpoints take one) the profile it acts on."""
    p = commands.add_parser(name, parents=list(parents), help=help, description=description)
    if takes_profile:
        p.add_argument("profile", help="profile name from the config")
    p.set_defaults(func=func)
    return p


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    ctx = Context(args, err)
    try:
        return int(args.func(ctx, out))
    except BuildError as e:
        print(f"error: {e}", file=err)
        return e.code
    except ConfigError as e:
        print(f"error: {e}", file=err)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted; re-run the same command to resume", file=err)
        return EXIT_INTERRUPTED
    except Exception as e:
        if isinstance(e, aws.errors()):
            print(f"error: AWS request failed: {e}", file=err)
            return EXIT_USAGE
        raise
