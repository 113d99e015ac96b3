"""Load and validate the deployment config; turn YAML and pydantic errors into sentences.

The reader is bounded, because a config file is input a person can get wrong in any way: it reads only
regular files (a FIFO would block forever, /dev/zero would fill memory) and rejects files over MAX_BYTES
before reading them, YAML merge keys (`<<:`), duplicate keys (the last one would silently win), nesting deeper than
MAX_DEPTH, anchors/aliases that expand to more than MAX_VALUES values (an "alias bomb"), and integers
longer than MAX_INT_DIGITS. Each becomes a ConfigError naming the file and line.

The loader also owns the one file a config names, endpoint.crossover_file: it resolves it against the config file's
folder, reads it once and folds its thresholds into endpoint.spill_threshold, so the loaded config names no file and
its dump (the Jobs' config.yaml, charts/code_bundle.py) loads the same in a pod that has neither the file nor the folder.
"""

from __future__ import annotations

import os
import re
import reprlib
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from config import bounded_file, crossover, pydantic_errors
from config.endpoint import ENVOY_THRESHOLD_MAX
from config.rules import config_problems
from config.schema import ConfigError, DeploymentConfig
from serving_stacks import STACKS

DEFAULT_CONFIG = Path(__file__).with_name("default.yaml")
MAX_BYTES = 256 * 1024
MAX_DEPTH = 32
MAX_VALUES = 20_000
MAX_INT_DIGITS = 20
MAX_PATH_TEXT = 240


class _ConfigYamlError(Exception):
    """A problem found while reading YAML, already phrased as a sentence (without the file name)."""


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys, deep nesting and huge integers while it reads."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise _ConfigYamlError(f"line {mark.line + 1} nests deeper than {MAX_DEPTH} levels; flatten it")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise _ConfigYamlError(
                    f"line {key_node.start_mark.line + 1} uses a YAML merge key (<<); write the keys out (profiles "
                    "already inherit the shared `serving` block, so they need only what differs)"
                )
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:
                raise _ConfigYamlError(
                    f"line {line} uses a list or mapping as a key; keys must be plain names"
                ) from None
            if first is not None:
                raise _ConfigYamlError(
                    f"key {_short(key)} appears twice, on lines {first} and {line}; keep one (the last would win)"
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: Any) -> int:
        digits = sum(ch.isdigit() for ch in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise _ConfigYamlError(
                f"line {node.start_mark.line + 1} has an integer of {digits} digits; no field takes more than "
                f"{MAX_INT_DIGITS}"
            )
        return super().construct_yaml_int(node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)


def _expanded_size(node: Any, memo: dict[int, int]) -> int:
    """How many values the document holds once aliases are expanded (shared nodes counted each time)."""
    if id(node) in memo:
        return memo[id(node)]
    memo[id(node)] = 1  # a cycle counts once; SafeLoader builds recursive objects for it
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(child, memo) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    else:
        size = 1
    memo[id(node)] = min(size, MAX_VALUES + 1)
    return memo[id(node)]


def read_yaml(text: str) -> Any:
    """Parse one YAML document within the bounds above; raise _ConfigYamlError or yaml.YAMLError."""
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, {}) > MAX_VALUES:
            raise _ConfigYamlError(
                f"the document expands to more than {MAX_VALUES} values through anchors and aliases; "
                "write the values out or use fewer aliases"
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load_config(path: str | Path | None = None) -> DeploymentConfig:
    """Read a YAML config file (default, when no path is given: config/default.yaml) and validate it."""
    if path is not None and not str(path).strip():
        raise ConfigError(
            [
                "the config path is empty (CONFIG= or -c config=); name a file, e.g. CONFIG=config/default.yaml, or "
                "leave it out for the default"
            ]
        )
    file = Path(path) if path is not None else DEFAULT_CONFIG
    where = f"config file {str(file)!r}"
    raw = _read_bounded(file, where)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise ConfigError([f"{where} is not UTF-8 (byte {err.start}, line {line}); save it as UTF-8"]) from None
    try:
        data = read_yaml(text)
    except _ConfigYamlError as err:
        raise ConfigError([f"{where}: {err}"]) from None
    except yaml.YAMLError as err:
        raise ConfigError([f"{where} is not valid YAML: {_yaml_problem(err)}"]) from None
    if not isinstance(data, dict):
        raise ConfigError([f"{where} must hold a mapping at the top level"])
    return parse_config(data, config_dir=file.parent)


def _read_bounded(file: Path, where: str) -> bytes:
    """At most MAX_BYTES from a regular file (config/bounded_file.py: no FIFO, device or directory)."""
    try:
        return bounded_file.read_bounded(
            file,
            where=where,
            max_bytes=MAX_BYTES,
            limit_name="a config",
            expect="pass a YAML file",
            unreadable_fix="pass -c config=<path>",
        )
    except bounded_file.UnreadableFile as err:
        raise ConfigError([str(err)]) from None


def _yaml_problem(err: yaml.YAMLError) -> str:
    """The problem and its line, without PyYAML's echo of the offending line (which may be huge)."""
    if isinstance(err, yaml.MarkedYAMLError):
        mark = err.problem_mark or err.context_mark
        problem = err.problem or err.context or "malformed"
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})" if mark else problem
    return _short(str(err))


def parse_config(data: Any, *, config_dir: Path | None = None) -> DeploymentConfig:
    """Validate a config mapping; every failure becomes one ConfigError naming field, value and fix. `config_dir`: the
    folder of the file the mapping was read from, where a relative endpoint.crossover_file lies (None: not read from
    a file, so only an absolute crossover_file can be found)."""
    try:
        config = DeploymentConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError([_elide_long_values(line) for e in err.errors() for line in _sentences(e)]) from None
    try:
        config = _fold_crossover(config, config_dir)
    except ValueError as err:  # not elided: the path it resolved to is the point (_crossover_path bounds it)
        raise ConfigError(str(err).split("\n")) from None
    # The cross-field rules run here, after construction (config.schema does not import config.rules).
    if problems := config_problems(config):
        raise ConfigError([_elide_long_values(problem) for problem in problems])
    return config


_CROSSOVER_FIX = (
    "point it at a crossover.json `make bench-sweep` wrote (schema_version 1, docs/sweep.md), or remove crossover_file "
    "(the thresholds then default to max_num_seqs)"
)


def _fold_crossover(config: DeploymentConfig, config_dir: Path | None) -> DeploymentConfig:
    """The config with endpoint.crossover_file turned into spill thresholds and cleared.

    Each speculative profile endpoint.weights sends traffic to (the arms that can spill) gets the crossover's paying
    load per replica (CrossoverFile.paying_per_replica) unless endpoint.spill_threshold names it already (that
    wins). Only those arms: a threshold for any other profile would change nothing the endpoint does and would name a
    profile that `bench tune --propose` renames. The result names no file, so dumping it ships no path of this
    machine; ValueError (one sentence per problem) for a file that cannot be read or a threshold Envoy refuses."""
    e = config.endpoint
    if e.crossover_file is None:
        return config
    path, where = _crossover_path(e.crossover_file, config_dir)
    paying = read_crossover_file(path, where).paying_per_replica()
    arms = {p.name for p in config.profiles if p.speculative and e.weights.get(p.name, 0) > 0}
    derived = {name: n for name, n in paying.items() if name in arms and name not in e.spill_threshold}
    problems = [
        f"{where} gives {name} a spill threshold of {n} in flight per replica, above the Envoy circuit-breaker limit "
        f"of {ENVOY_THRESHOLD_MAX} (the arm's cap is it times the replicas, charts/envoy_bootstrap.py); set "
        f"endpoint.spill_threshold.{name} or remove crossover_file"
        for name, n in derived.items()
        if n > ENVOY_THRESHOLD_MAX
    ]
    if problems:
        raise ValueError("\n".join(problems))
    endpoint = e.model_copy(update={"spill_threshold": {**derived, **e.spill_threshold}, "crossover_file": None})
    return config.model_copy(update={"endpoint": endpoint})


def _crossover_path(written: str, config_dir: Path | None) -> tuple[Path, str]:
    """Where endpoint.crossover_file lies (absolute as written, else in the config file's folder, never the working
    directory) and how sentences name it: as written, and where it resolved."""
    where = f"endpoint.crossover_file={_path_text(written)}"
    if Path(written).is_absolute():
        return Path(written), where
    if config_dir is None:
        raise ValueError(
            f"{where} is relative, but this config was not read from a file, so it has no folder to be relative to; "
            "give an absolute path, or load the config from its file"
        )
    path = Path(os.path.abspath(config_dir / written))
    return path, f"{where} (relative to the config file: {_path_text(str(path))})"


def _path_text(path: str) -> str:
    """A path quoted whole up to MAX_PATH_TEXT characters (where a file lies is the point), its ends beyond."""
    return repr(path if len(path) <= MAX_PATH_TEXT else f"{path[:160]}...{path[-60:]}")


def read_crossover_file(path: Path, where: str) -> crossover.CrossoverFile:
    """The load sweep's crossover.json, read within config/bounded_file.py's bounds and validated by its one model;
    any problem is a ValueError holding one sentence starting with `where`, then the problem and the fix."""
    try:
        raw = bounded_file.read_bounded(
            path,
            where=where,
            max_bytes=crossover.MAX_BYTES,
            limit_name="a crossover.json",
            expect=_CROSSOVER_FIX,
            unreadable_fix=_CROSSOVER_FIX,
        )
        return crossover.parse(raw)
    except bounded_file.UnreadableFile as err:
        raise ValueError(str(err)) from None
    except ValidationError as err:
        first = err.errors()[0]
        problem = pydantic_errors.sentence(
            first, fixes={}, default="{loc}={value}: {msg}", show=lambda v: repr(v)[:60], where="the top level"
        )
        raise ValueError(f"{where} is not the load sweep's crossover.json ({problem}); {_CROSSOVER_FIX}") from None
    except ValueError as err:
        raise ValueError(f"{where} is not the load sweep's crossover.json: {err}; {_CROSSOVER_FIX}") from None


def _elide_long_values(sentence: str) -> str:
    """Validators quote the value they reject; a 5,000-character value must not make a 5,000-character line."""
    return re.sub(r"'([^']{60})[^']{20,}([^']{17})'", r"'\1...\2'", sentence)


def _sentences(error: Any) -> list[str]:
    """A model-level validator may report several problems at once, one per line; others are one sentence."""
    if error["type"] == "value_error" and not pydantic_errors.location(error, skip=_UNION_TAGS):
        return pydantic_errors.message(error).split("\n")
    return [pydantic_errors.sentence(error, fixes=_FIXES, default=_DEFAULT_FIX, skip=_UNION_TAGS, show=_short)]


# pydantic puts the decoding union's tag (the method) into error locations; they are dropped from what we show.
_UNION_TAGS = {"NoSpeculation", "DraftSpeculation", *(m for s in STACKS for m in s.METHODS)}
_METHODS_HINT = "; ".join(f"{', '.join(s.METHODS)} ({s.NAME} stack)" for s in STACKS)
_FIXES = {
    "missing": "{loc} is missing; add it (see config/default.yaml for an example)",
    "extra_forbidden": "{loc} is not a known field (value {value}); remove it or fix its spelling",
    "string_pattern_mismatch": "{loc}={value} is malformed; it must match {pattern}",
    "union_tag_invalid": "{loc}.method={tag!r} is unknown; use one of " + _METHODS_HINT,
    "union_tag_not_found": "{loc}.method is missing; use one of " + _METHODS_HINT,
    "value_error": "{loc}: {msg}",
}
_DEFAULT_FIX = "{loc}={value}: {msg}; fix the value (see config/default.yaml)"
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 2, 4, 4, 60, 60, 40


def _short(value: Any) -> str:
    """A bounded rendering: never walks a whole (possibly alias-shared) structure or prints a huge number."""
    try:
        text = _REPR.repr(value)
    except ValueError:  # an int beyond Python's digit limit for str()
        text = "<a very large number>"
    return text if len(text) <= 80 else text[:77] + "..."
