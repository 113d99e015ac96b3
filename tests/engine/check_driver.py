"""The driver both engine-check scripts share: read the command lines, check each, write name -> result.

Runs inside a pinned vLLM environment next to the script that imports it (the script's folder is on sys.path),
so it imports nothing of ours and nothing beyond the standard library.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any


def run(check: Callable[[dict[str, Any]], None]) -> int:
    """argv: <commands.json> <results.json>. Each command is checked with a clean copy of this environment."""
    with open(sys.argv[1]) as commands_file:
        commands = json.load(commands_file)
    results: dict[str, str] = {}
    saved = dict(os.environ)
    for command in commands:
        try:
            check(command)
            results[command["name"]] = "ok"
        except (Exception, SystemExit) as err:  # argparse exits; report it as the failure it is
            results[command["name"]] = f"{type(err).__name__}: {err}"
        finally:
            os.environ.clear()
            os.environ.update(saved)
    with open(sys.argv[2], "w") as out:
        out.write(json.dumps(results, indent=2, sort_keys=True))
    return 0 if all(v == "ok" for v in results.values()) else 1
