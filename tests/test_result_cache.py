"""The cross-run cache of pure results (tests/result_cache.py) and what keys the vLLM engine verdicts."""

from __future__ import annotations

import copy

import pytest

from tests import result_cache
from tests.engine import command_lines
from tests.engine.command_lines import all_command_lines, engine_key


@pytest.fixture
def cache_dir(tmp_path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(result_cache, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.delenv(result_cache.SWITCH, raising=False)
    return tmp_path / "cache"


def test_an_entry_is_found_under_its_key_only(cache_dir):
    result_cache.store("kind", "k1", b"verdicts")
    assert result_cache.load("kind", "k1") == b"verdicts"
    assert result_cache.load("kind", "k2") is None
    assert result_cache.load("other", "k1") is None


def test_switched_off_it_neither_reads_nor_writes(cache_dir, monkeypatch: pytest.MonkeyPatch):
    result_cache.store("kind", "k1", b"old")
    monkeypatch.setenv(result_cache.SWITCH, "0")
    assert result_cache.load("kind", "k1") is None
    result_cache.store("kind", "k2", b"new")
    monkeypatch.delenv(result_cache.SWITCH)
    assert result_cache.load("kind", "k2") is None


def test_a_half_written_entry_is_never_read(cache_dir, monkeypatch: pytest.MonkeyPatch):
    class Interrupted(Exception):
        pass

    def fail_midway(*_args):
        raise Interrupted

    monkeypatch.setattr(result_cache.os, "replace", fail_midway)
    with pytest.raises(Interrupted):
        result_cache.store("kind", "k1", b"x" * 1000)
    assert result_cache.load("kind", "k1") is None
    assert list((cache_dir / "kind").iterdir()) == []  # the partial file is removed too


def test_keys_do_not_run_parts_together():
    assert result_cache.key("ab", "c") != result_cache.key("a", "bc")
    assert result_cache.key("a") == result_cache.key(b"a")


def test_a_changed_command_line_is_another_engine_key():
    version, commands = next(iter(all_command_lines().items()))
    changed = copy.deepcopy(commands)
    changed[0]["argv"] = [*changed[0]["argv"], "--max-num-seqs", "3"]
    assert engine_key(version, commands) == engine_key(version, copy.deepcopy(commands))
    assert engine_key(version, changed) != engine_key(version, commands)


def test_a_changed_check_script_or_lock_is_another_engine_key(tmp_path, monkeypatch: pytest.MonkeyPatch):
    version, commands = next(iter(all_command_lines().items()))
    before = engine_key(version, commands)
    script = tmp_path / "engine" / "check.py"
    script.parent.mkdir()
    script.write_text("print('a check')\n")
    monkeypatch.setattr(command_lines, "HERE", script.parent)
    monkeypatch.setattr(command_lines, "ROOT", tmp_path)  # relative paths in the key, and no lock file here
    moved = engine_key(version, commands)
    script.write_text("print('another check')\n")
    assert len({before, moved, engine_key(version, commands)}) == 3
