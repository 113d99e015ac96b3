"""Build vLLM 0.29.0's engine config for each command line of the vllm-neuron stack (runs in .venv-vllm-0.29.0).

Usage: python vllm_0_29_0_check.py COMMANDS_JSON RESULTS_JSON, with the same files as vllm_0_9_1_check.py:
COMMANDS_JSON is a list of {"name", "argv", "env", "host_memory_gib"} (model paths mapped to fixture dirs);
writes {name: "ok" | vLLM's error} to RESULTS_JSON and exits 1 when any fails. Needs only vllm's environment.

What it does is what `vllm serve` does before it loads a model (vllm/entrypoints/cli/serve.py, 0.29.0): the
serve parser (`make_arg_parser`, which declares the positional model_tag itself), the positional model into
--model, `validate_parsed_serve_args`, `AsyncEngineArgs.from_cli_args`, then `create_engine_config()`, where
the speculative checks live (method, draft config, draft TP, draft max_model_len, async scheduling).

Platform: the Neuron platform is the vllm-neuron plugin's (an out-of-tree `vllm.platform_plugins` entry
point); the plugin is not installable here (its PyPI name is a placeholder), so vLLM's own CPU platform stands
in (VLLM_TARGET_DEVICE=cpu, vllm/platforms/__init__.py). What the plugin adds on top (its platform's config
hook, DFlash's TP/BF16/scheduling checks in dflash.py, bucket rules) is not run here: the config checks those
(serving_stacks/vllm_neuron.py), each citing the plugin.
"""

from __future__ import annotations

import os
import sys

# Before anything in vllm resolves `current_platform`.
os.environ["VLLM_TARGET_DEVICE"] = "cpu"

import vllm.model_executor.models.registry as registry
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.utils.argparse_utils import FlexibleArgumentParser

# vLLM inspects the model class in a fresh interpreter so that CUDA is not initialised in the parent
# (registry._run_in_subprocess); there is no CUDA here, and a second torch + vllm import costs seconds.
registry._run_in_subprocess = lambda fn: fn()

# Set by the check itself; a command line's own env must not switch it off.
PINNED_ENV = {"VLLM_TARGET_DEVICE": "cpu"}


def check(argv: list[str], env: dict[str, str]) -> None:
    """Parse like `vllm serve` and build the engine config; raise with vLLM's own message."""
    if argv[:2] != ["vllm", "serve"]:
        raise ValueError(f"command line starts with {argv[:2]}, expected ['vllm', 'serve']")
    os.environ.update(env)
    os.environ.update(PINNED_ENV)
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    args = parser.parse_args(argv[2:])
    if args.model_tag is not None:
        args.model = args.model_tag
    validate_parsed_serve_args(args)
    AsyncEngineArgs.from_cli_args(args).create_engine_config()


if __name__ == "__main__":
    from check_driver import run  # beside this script, on sys.path when it runs as one

    sys.exit(run(lambda command: check(command["argv"], command["env"])))
