"""Build vLLM 0.9.1's engine config for each command line, on its Neuron platform (runs in .venv-vllm-0.9.1).

Usage: python vllm_0_9_1_check.py COMMANDS_JSON RESULTS_JSON. COMMANDS_JSON is a list of {"name", "argv",
"env", "host_memory_gib"}: the container's `command + args` (model paths mapped to fixture dirs), its env,
and the node's RAM. Writes {name: "ok" | vLLM's error} to RESULTS_JSON (vLLM logs to stdout) and exits 1
when any fails. Needs only vllm's environment; the main test environment never imports this file.

What it does is what `vllm serve` does before it loads a model: vLLM's own parser
(`make_arg_parser` + `AsyncEngineArgs.from_cli_args`), then `create_engine_config()`, which is where
the speculative checks (draft max_model_len, draft TP) live. A stack with another vLLM gets its own
script of the same shape and its own pinned environment.
"""

from __future__ import annotations

import os
import sys
from typing import Any

# The Neuron platform is normally detected from neuronx_distributed_inference, which is not installable
# here; set it before anything in vllm resolves `current_platform` (vllm/platforms/__init__.py, 0.9.1).
import vllm.platforms
from vllm.platforms.neuron import NeuronPlatform

vllm.platforms._current_platform = NeuronPlatform()

import vllm.config  # noqa: E402
import vllm.model_executor.models.registry as registry  # noqa: E402
from vllm.config import ModelConfig  # noqa: E402
from vllm.engine.arg_utils import AsyncEngineArgs  # noqa: E402
from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args  # noqa: E402
from vllm.utils import FlexibleArgumentParser  # noqa: E402

HEADS_CHECK = "Total number of attention heads"
_upstream_verify = ModelConfig.verify_with_parallel_config


def _neuron_fork_verify_with_parallel_config(self: Any, parallel_config: Any) -> None:
    """The one difference of the Neuron fork applied here: no attention-heads % TP check on Neuron.

    Read: aws-neuron/upstreaming-to-vllm tag 2.24.0 (490ab20f, branch neuron-2.24-vllm-v0.7.2: the vLLM 0.7.2 fork,
    not the image's), vllm/config.py:707-715, where `if not current_platform.is_neuron():` guards the heads check in
    `ModelConfig.verify_with_parallel_config`. The 0.9.1 image installs tag 2.26.1 of the same repository
    (aws-neuron/deep-learning-containers 5a157957, vllm/inference/0.9.1/Dockerfile.neuronx, `prod` stage:
    `git clone -b 2.26.1 https://github.com/aws-neuron/upstreaming-to-vllm.git /opt/vllm`; its `repo` stage clones
    a private staging repository at the same tag). Tag 2.26.1 is not in the readable snapshot, and its newest
    vLLM 0.9-based commit there (main dd417b31, 2025-06-24) has the check unguarded (vllm/config.py:1060-1066).
    So the guard at 2.26.1 is inferred, not read: the reference deployment runs a 16-head Qwen3-1.7B draft at TP 32
    on the 2.26.1 image, which the unguarded check rejects ("Total number of attention heads (16) must be divisible
    by tensor parallel size (32)"). Re-check at the 2.26.1 tag when it can be read.
    The checks after the heads check only act with expert parallelism or pipeline parallelism > 1, which
    these command lines never use; refuse those rather than guess.
    """
    if parallel_config.enable_expert_parallel or parallel_config.pipeline_parallel_size > 1:
        raise ValueError("this check does not model the Neuron fork with expert or pipeline parallelism")
    try:
        _upstream_verify(self, parallel_config)
    except ValueError as err:
        if not str(err).startswith(HEADS_CHECK):
            raise


ModelConfig.verify_with_parallel_config = _neuron_fork_verify_with_parallel_config  # type: ignore[method-assign]

# vLLM inspects the model class in a fresh interpreter so that CUDA is not initialised in the parent
# (registry._run_in_subprocess); there is no CUDA here, and a second torch + vllm import costs seconds.
registry._run_in_subprocess = lambda fn: fn()


def check(argv: list[str], env: dict[str, str], host_memory_gib: int) -> None:
    """Parse like `vllm serve` and build the engine config; raise with vLLM's own message.

    host_memory_gib is the node's RAM: vLLM sizes its CPU swap space against the host's total memory
    (CacheConfig.verify_with_parallel_config), which must be the Trainium node's, not this machine's.
    """
    vllm.config.get_cpu_memory = lambda: host_memory_gib * 1024**3
    if argv[:2] != ["vllm", "serve"]:
        raise ValueError(f"command line starts with {argv[:2]}, expected ['vllm', 'serve']")
    os.environ.update(env)
    # As `vllm serve` builds it: positional model_tag first, then the server's flags, and the positional
    # model goes into --model (vllm/entrypoints/cli/serve.py, 0.9.1).
    parser = FlexibleArgumentParser(prog="vllm serve")
    parser.add_argument("model_tag", nargs="?")
    parser = make_arg_parser(parser)
    args = parser.parse_args(argv[2:])
    if args.model_tag is not None:
        args.model = args.model_tag
    validate_parsed_serve_args(args)
    engine_args = AsyncEngineArgs.from_cli_args(args)
    engine_args.create_engine_config()


if __name__ == "__main__":
    from check_driver import run  # beside this script, on sys.path when it runs as one

    sys.exit(run(lambda command: check(command["argv"], command["env"], command["host_memory_gib"])))
