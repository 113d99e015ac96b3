"""Fuzz the whole load path (bytes -> YAML -> schema): random text edits and hostile values.

The only outcomes allowed are a loaded config or a ConfigError whose every problem is a short sentence;
never another exception, never a hang (the reader's bounds keep each case small). Seeded: set
CONFIG_FUZZ_SEED to explore, CONFIG_FUZZ_CASES for more cases. The summary line reports cases per run
and the slowest case.
"""

from __future__ import annotations

import os
import random
import time

import yaml

from config import ConfigError, DeploymentConfig, load_config
from tests.conftest import ROOT, default_config_dict

DEFAULT_TEXT = (ROOT / "config/default.yaml").read_text()
CASES = int(os.environ.get("CONFIG_FUZZ_CASES", "1000"))
SEED = int(os.environ.get("CONFIG_FUZZ_SEED", "20261126"))

HOSTILE_VALUES: list[object] = [
    None,
    "",
    "..",
    "Qwen/..",
    "../../etc",
    "10.64.1.7/16",
    "999.999.999.999/16",
    "0.0.0.0/0",
    "not-a-cidr",
    "1.34.1-20250101",
    "1.99.0-20990101",
    "\u202e\u0000",
    "x" * 5000,
    -1,
    0,
    2**63,
    10**19,
    1.5,
    float("inf"),
    float("nan"),
    True,
    [],
    [None],
    {},
    {"a": 1},
    ["us-east-2a", "us-east-2a"],
]
HOSTILE_TEXT = [
    "9" * 5000,
    "[" * 200,
    "&a [*a]",
    "!!python/object:os.system {}",
    "\t",
    ": :",
    "- - -",
    "*undefined",
    "{a: 1, a: 2}",
    "'unterminated",
    "\ufeff",
    "%YAML 1.1\n---",
    "--- \n---",
]


def _leaf_paths(node: object, prefix: tuple = ()) -> list[tuple]:
    if isinstance(node, dict):
        return [prefix] + [p for k, v in node.items() for p in _leaf_paths(v, (*prefix, k))]
    if isinstance(node, list):
        return [prefix] + [p for i, v in enumerate(node) for p in _leaf_paths(v, (*prefix, i))]
    return [prefix]


PATHS = [p for p in _leaf_paths(default_config_dict()) if p]


def _value_mutation(rng: random.Random) -> tuple[str, tuple]:
    data = default_config_dict()
    path = rng.choice(PATHS)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = rng.choice(HOSTILE_VALUES)
    return yaml.safe_dump(data, sort_keys=False), path


def _text_mutation(rng: random.Random) -> str:
    lines = DEFAULT_TEXT.splitlines(keepends=True)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(lines))
        action = rng.choice(["delete", "duplicate", "swap", "inject", "truncate", "indent", "chars"])
        if action == "delete":
            del lines[i]
        elif action == "duplicate":
            lines.insert(i, lines[i])
        elif action == "swap":
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif action == "inject":
            key, _, _ = lines[i].partition(":")
            lines[i] = f"{key}: {rng.choice(HOSTILE_TEXT)}\n"
        elif action == "truncate":
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
        elif action == "indent":
            lines[i] = " " * rng.randint(1, 3) + lines[i]
        else:
            pos = rng.randrange(len(lines[i]) + 1)
            junk = "".join(rng.choice(":-[]{}&*!|>'\"#%@`,? \t\n\\xé0") for _ in range(rng.randint(1, 5)))
            lines[i] = lines[i][:pos] + junk + lines[i][pos:]
        if not lines:
            break
    return "".join(lines)


def _outcome(path) -> DeploymentConfig | ConfigError:
    try:
        return load_config(path)
    except ConfigError as err:
        return err


def test_random_text_and_values_load_or_fail_with_sentences(tmp_path):
    rng = random.Random(SEED)
    file = tmp_path / "fuzz.yaml"
    slowest = (0.0, "")
    outcomes = {"loaded": 0, "rejected": 0}
    for case in range(CASES):
        kind = rng.choice(["text", "inject", "value", "bytes"])
        if kind == "inject":
            path = ()
            lines = DEFAULT_TEXT.splitlines(keepends=True)
            keyed = [i for i, line in enumerate(lines) if ": " in line and not line.lstrip().startswith("#")]
            i = rng.choice(keyed)
            lines[i] = f"{lines[i].partition(': ')[0]}: {rng.choice(HOSTILE_TEXT)}\n"
            file.write_text("".join(lines))
        elif kind == "value":
            text, path = _value_mutation(rng)
            file.write_text(text)
        elif kind == "text":
            path = ()
            file.write_text(_text_mutation(rng))
        else:
            path = ()
            raw = bytearray(DEFAULT_TEXT.encode())
            for _ in range(rng.randint(1, 3)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            file.write_bytes(bytes(raw))
        start = time.perf_counter()
        result = _outcome(file)
        elapsed = time.perf_counter() - start
        slowest = max(slowest, (elapsed, f"case {case} ({kind} {'.'.join(map(str, path))})"))
        if isinstance(result, DeploymentConfig):
            outcomes["loaded"] += 1
            continue
        outcomes["rejected"] += 1
        assert result.problems, f"case {case}: empty ConfigError"
        for problem in result.problems:
            assert isinstance(problem, str) and 0 < len(problem) < 2000, f"case {case}: {problem[:200]!r}"
        if kind == "value":
            # A hostile value is reported against its own field (serving values surface under profiles).
            named = {str(path[0]), "profiles" if path[0] == "serving" else str(path[0])}
            assert any(any(n in p for n in named) for p in result.problems), (case, path, result.problems)
    print(
        f"\nconfig fuzz: {CASES} cases (seed {SEED}), {outcomes['loaded']} loaded, {outcomes['rejected']} rejected; "
        f"slowest {slowest[0] * 1000:.1f} ms: {slowest[1]}"
    )
