"""The pinned Prometheus: make installs exactly the module's pin where the module looks for it, the binaries run from
the unpacked tree, and each way the install can fail says what to run."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.conftest import ROOT
from tools import prometheus_tool
from tools.prometheus_tool import CACHE, UPSTREAM_VERSION, VERSION, InstallError, ensure
from tools.tool_cache import MARKER_NAME


def makefile_variable(name: str) -> str:
    (value,) = re.findall(rf"^{name} := (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    return value


def test_make_test_depends_on_the_modules_own_marker():
    target = makefile_variable("PROMETHEUS_TOOL")
    assert target == str((CACHE / MARKER_NAME).relative_to(ROOT))
    (prerequisites,) = re.findall(r"^test: (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert "$(PROMETHEUS_TOOL)" in prerequisites.split()
    assert UPSTREAM_VERSION in target and VERSION.startswith(UPSTREAM_VERSION + "+")


def test_both_binaries_run_from_the_tool_cache_and_are_the_pinned_release():
    found = ensure()
    for path in (found.prometheus, found.promtool):
        assert path.is_relative_to(ROOT / ".cache")
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, check=True).stdout
        assert out.startswith(f"{path.name}, version {UPSTREAM_VERSION}+ds (branch: debian/sid, revision: {VERSION})")


def test_without_apt_lists_the_error_says_to_run_apt_get_update(tmp_path):
    """A machine where `apt-get update` never ran: apt is pointed at empty lists and an empty cache."""
    lists, cache = tmp_path / "lists", tmp_path / "cache"
    (lists / "partial").mkdir(parents=True)
    (cache / "archives" / "partial").mkdir(parents=True)
    options = ("-o", f"Dir::State::Lists={lists}", "-o", f"Dir::Cache={cache}")
    with pytest.raises(InstallError, match=r"run `apt-get update` \(as root\) and make again") as raised:
        prometheus_tool.download(tmp_path, apt_options=options)
    assert f"prometheus={VERSION}" in str(raised.value) and "Unable to locate package" in str(raised.value)


def test_a_file_other_than_the_pinned_package_is_refused_before_it_is_unpacked(tmp_path):
    deb = tmp_path / f"prometheus_{VERSION}_amd64.deb"
    deb.write_bytes(b"not the package")
    with pytest.raises(InstallError, match=r"has sha256 [0-9a-f]{64}, but tools/prometheus_tool.py pins [0-9a-f]{64}"):
        prometheus_tool.verify(deb)


def test_a_tree_without_the_marker_of_this_very_pin_is_not_taken_as_installed(tmp_path):
    """An interrupted unpack (no marker) or another version's tree (its marker) is installed again, not used."""
    tree = tmp_path / "prometheus"
    bin_dir = tree / "usr" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("prometheus", "promtool"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    assert not prometheus_tool.installed(tree)
    (tree / MARKER_NAME).write_text((CACHE / MARKER_NAME).read_text().replace(VERSION, "2.45.3+ds-2"))
    assert not prometheus_tool.installed(tree)
    (tree / MARKER_NAME).write_text((CACHE / MARKER_NAME).read_text())
    assert prometheus_tool.installed(tree)


def test_a_binary_of_another_release_is_refused(tmp_path):
    fake = tmp_path / "usr" / "bin"
    fake.mkdir(parents=True)
    for name in ("prometheus", "promtool"):
        (fake / name).write_text(f"#!/bin/sh\necho '{name}, version 2.45.3+ds (branch: debian/sid)'\n")
        (fake / name).chmod(0o755)
    with pytest.raises(InstallError, match=rf"not version {re.escape(UPSTREAM_VERSION)}"):
        prometheus_tool.check_version(prometheus_tool.binaries(tmp_path))
