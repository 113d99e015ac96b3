"""Loading config files: unreadable or malformed files fail with a sentence naming the file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from config import ConfigError, load_config
from tests.conftest import ROOT


def test_missing_file_names_the_path_and_the_fix(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "nope.yaml")
    assert "nope.yaml" in str(err.value) and "-c config=" in str(err.value)


def test_malformed_yaml_is_reported_as_yaml(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_top_level_must_be_a_mapping(tmp_path):
    bad = tmp_path / "list.yaml"
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping at the top level"):
        load_config(bad)


def _load_text(tmp_path, text: str | bytes) -> list[str]:
    file = tmp_path / "c.yaml"
    file.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError) as err:
        load_config(file)
    return err.value.problems


def test_duplicate_key_names_both_lines(tmp_path):
    text = (
        (ROOT / "config/default.yaml")
        .read_text()
        .replace("  nat_gateways: 1\n", "  nat_gateways: 1\n  nat_gateways: 2\n")
    )
    (problem,) = _load_text(tmp_path, text)
    line = text.splitlines().index("  nat_gateways: 1") + 1
    assert f"'nat_gateways' appears twice, on lines {line} and {line + 1}" in problem


def test_alias_bomb_is_refused_before_it_expands(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    (problem,) = _load_text(tmp_path, "\n".join(lines) + "\n")
    assert "expands to more than" in problem and "aliases" in problem


def test_a_few_aliases_are_still_allowed(tmp_path):
    text = (ROOT / "config/default.yaml").read_text()
    text = text.replace("revision: 9216db", "revision: &rev 9216db", 1)
    assert load_config_text(tmp_path, text).models["qwen3-32b"].revision.startswith("9216db")


def load_config_text(tmp_path, text: str):
    file = tmp_path / "ok.yaml"
    file.write_text(text)
    return load_config(file)


def test_non_utf8_file_is_a_sentence(tmp_path):
    (problem,) = _load_text(tmp_path, b"name: trn\xff-specdec\n")
    assert "not UTF-8" in problem and "line 1" in problem


def test_huge_integer_is_a_sentence(tmp_path):
    (problem,) = _load_text(tmp_path, "network:\n  nat_gateways: " + "9" * 5000 + "\n")
    assert "line 2" in problem and "5000 digits" in problem


def test_deep_nesting_is_a_sentence(tmp_path):
    (problem,) = _load_text(tmp_path, "name: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nests deeper than" in problem


def test_oversized_file_is_refused(tmp_path):
    (problem,) = _load_text(tmp_path, "# " + "x" * 300_000 + "\n")
    assert "bytes; a config is at most" in problem


def _bytes_read_by_this_process() -> int:
    """rchar from /proc/self/io: every byte this process got from read(2), page cache or not (Linux)."""
    line = next(x for x in Path("/proc/self/io").read_text().splitlines() if x.startswith("rchar:"))
    return int(line.split()[1])


def test_a_64_mib_sparse_file_is_refused_by_its_size_without_being_read(tmp_path):
    """The bound is checked on the file's size before reading: a sparse 64 MiB file takes no disk, so only the
    bytes read show whether the loader read it first (it read the whole file, then compared its length)."""
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.truncate(64 * 1024 * 1024)
    before = _bytes_read_by_this_process()
    with pytest.raises(ConfigError, match=f"is {64 * 1024 * 1024} bytes; a config is at most"):
        load_config(big)
    assert _bytes_read_by_this_process() - before < 1024 * 1024


def _run_app(*context: str, overflow: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run app.py as the CDK CLI does: `-c key=value` arrives through CDK_CONTEXT_JSON (and what does not fit
    there in the overflow file). No Node.js on PATH: a config error must be reported before jsii starts."""
    env = {"CDK_CONTEXT_JSON": json.dumps(dict(c.split("=", 1) for c in context)), "PATH": "/nonexistent"}
    if overflow:
        env["CONTEXT_OVERFLOW_LOCATION_ENV"] = str(overflow)
    return subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def _bad_config(tmp_path: Path) -> Path:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        (ROOT / "config/default.yaml").read_text().replace("num_speculative_tokens: 7", "num_speculative_tokens: 42")
    )
    return bad


def test_app_rejects_a_bad_config_file_before_creating_any_construct(tmp_path):
    result = _run_app(f"config={_bad_config(tmp_path)}")
    assert result.returncode == 2
    assert "num_speculative_tokens=42 is outside 1..15" in result.stderr
    assert "Traceback" not in result.stderr


def test_app_reads_the_config_path_from_the_clis_context_overflow_file(tmp_path):
    overflow = tmp_path / "context-overflow.json"
    overflow.write_text(json.dumps({"config": str(_bad_config(tmp_path))}))
    result = _run_app(overflow=overflow)
    assert result.returncode == 2 and "num_speculative_tokens=42 is outside 1..15" in result.stderr


def test_app_refuses_to_deploy_with_the_placeholder_admin():
    result = _run_app("deploy=true")
    assert result.returncode == 2
    assert "admin_principal_arn" in result.stderr and "placeholder" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_huge_value_is_shortened_in_the_sentence(tmp_path):
    text = (
        (ROOT / "config/default.yaml")
        .read_text()
        .replace("instance_type: trn2.48xlarge", "instance_type: " + "x" * 5000)
    )
    (problem,) = _load_text(tmp_path, text)
    assert problem.startswith("trn2_nodes.instance_type") and "..." in problem and len(problem) < 300


def test_a_device_is_refused_before_it_is_read():
    """/dev/zero never ends: reading it whole was a MemoryError traceback."""
    with pytest.raises(ConfigError, match="'/dev/zero' is not a regular file"):
        load_config("/dev/zero")


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    """Opening a FIFO for reading blocks until someone writes to it: it hung forever."""
    import os
    import threading

    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def load() -> None:
        try:
            load_config(fifo)
        except ConfigError as err:
            outcome.append(err)

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "load_config is still waiting on the FIFO"
    assert "is not a regular file" in str(outcome[0])


def test_a_directory_is_refused_with_a_sentence(tmp_path):
    with pytest.raises(ConfigError, match="is not a regular file"):
        load_config(tmp_path)


@pytest.mark.parametrize("path", ["", " "])
def test_an_empty_config_path_is_refused_not_read_as_the_default(path):
    """`make deploy CONFIG=` passes `-c config=`; it silently meant config/default.yaml."""
    with pytest.raises(ConfigError, match="config path is empty") as err:
        load_config(path)
    assert "CONFIG=config/default.yaml" in str(err.value)


def test_the_app_refuses_an_empty_config_path():
    result = _run_app("config=")
    assert result.returncode == 2 and "config path is empty" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_yaml_merge_key_is_refused_with_a_sentence(tmp_path):
    text = (ROOT / "config/default.yaml").read_text()
    text = text.replace("system_nodes:\n", "base: &base {disk_gib: 100}\nsystem_nodes:\n  <<: *base\n", 1)
    (problem,) = _load_text(tmp_path, text)
    line = text.splitlines().index("  <<: *base") + 1
    assert f"line {line} uses a YAML merge key (<<); write the keys out" in problem


def test_the_loader_runs_the_cross_field_rules_after_the_schema_builds_the_config():
    """The schema checks each field; the loader then runs config/rules.py on the built config (the schema imports
    nothing of the rules, so there is no circle)."""
    from config.loader import parse_config
    from config.schema import DeploymentConfig
    from tests.conftest import default_config_dict

    data = default_config_dict()
    data["profiles"][1]["name"] = data["profiles"][0]["name"]
    built = DeploymentConfig.model_validate(data)  # each field is valid on its own
    assert [p.name for p in built.profiles] == [data["profiles"][0]["name"]] * 2
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert err.value.problems[0] == (
        f"profiles: name {data['profiles'][0]['name']!r} is used twice; give every profile a unique name"
    )


def _config_naming_crossover(folder: Path, crossover_file: str) -> Path:
    """config.yaml in `folder`: the default with a 50/50 split and endpoint.crossover_file as written."""
    import yaml

    from tests.conftest import default_config_dict

    data = default_config_dict()
    data["endpoint"] = {"weights": {"baseline": 50, "speculative": 50}, "crossover_file": crossover_file}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return folder / "config.yaml"


def _write_crossover(path: Path, *, last_paying: int) -> None:
    from tests.conftest import crossover_entry, crossover_file_dict

    path.parent.mkdir(parents=True, exist_ok=True)
    entry = crossover_entry(crossover=last_paying * 2, last_paying=last_paying, grid=[1, 2, 4, 8])
    path.write_text(json.dumps(crossover_file_dict(entry)))


def test_a_relative_crossover_file_lies_beside_the_config_file_whatever_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_file = _config_naming_crossover(tmp_path / "deploy", "crossover.json")
    _write_crossover(tmp_path / "deploy" / "crossover.json", last_paying=3)
    elsewhere = tmp_path / "elsewhere"
    _write_crossover(elsewhere / "crossover.json", last_paying=5)  # the working directory's must not be read
    monkeypatch.chdir(elsewhere)
    config = load_config(config_file)
    assert config.endpoint.spill_threshold == {"speculative": 3}
    assert config.endpoint.crossover_file is None
    monkeypatch.chdir(tmp_path)  # the config named relative to the working directory: still beside the config file
    assert load_config("deploy/config.yaml").endpoint.spill_threshold == {"speculative": 3}


def test_a_crossover_file_relative_to_the_repository_root_is_not_read_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the docs said before: `crossover_file: bench-results/<run>/crossover.json` in config/default.yaml, run
    from the repository root. It is now config/bench-results/...; the sentence says where it looked."""
    repo = tmp_path / "repo"
    _write_crossover(repo / "bench-results" / "sweep-1" / "crossover.json", last_paying=3)
    _config_naming_crossover(repo / "config", "bench-results/sweep-1/crossover.json")
    monkeypatch.chdir(repo)
    with pytest.raises(ConfigError) as err:
        load_config("config/config.yaml")
    (problem,) = err.value.problems
    looked = repo / "config" / "bench-results" / "sweep-1" / "crossover.json"
    assert problem.startswith(
        f"endpoint.crossover_file='bench-results/sweep-1/crossover.json' (relative to the config file: {str(looked)!r})"
        " cannot be read (No such file or directory)"
    )
    _config_naming_crossover(repo / "config", "../bench-results/sweep-1/crossover.json")
    assert load_config("config/config.yaml").endpoint.spill_threshold == {"speculative": 3}


def test_an_absolute_crossover_file_is_read_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    crossover = tmp_path / "sweeps" / "crossover.json"
    _write_crossover(crossover, last_paying=2)
    config_file = _config_naming_crossover(tmp_path / "deploy", str(crossover))
    monkeypatch.chdir(tmp_path / "deploy")
    assert load_config(config_file).endpoint.spill_threshold == {"speculative": 2}


def test_a_relative_crossover_file_in_a_config_not_read_from_a_file_is_refused():
    """parse_config(mapping) has no config file, so no folder to resolve against, and the working directory is not one."""
    from config.loader import parse_config
    from tests.conftest import default_config_dict

    data = default_config_dict()
    data["endpoint"] = {"weights": {"baseline": 50, "speculative": 50}, "crossover_file": "crossover.json"}
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert err.value.problems == [
        "endpoint.crossover_file='crossover.json' is relative, but this config was not read from a file, so it has no "
        "folder to be relative to; give an absolute path, or load the config from its file"
    ]
