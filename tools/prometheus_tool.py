"""The real Prometheus and promtool that the tests run: Debian bookworm's `prometheus` package, pinned by version and
by the .deb's SHA-256, unpacked without root into the project's tool cache (.cache/, gitignored).

    python3 -m tools.prometheus_tool        # install if missing (`make` runs it before the tests); print the paths

Why the Debian package: it is a registry package this project may install (no binary download from elsewhere), it
carries both binaries, and `apt-get download` + `dpkg-deb -x` need neither root nor a system-wide install. apt's
package lists must exist (`apt-get update` once, as root); the pin is checked against the downloaded file, not
against the lists. Standard library only: make runs it with the system Python before the venv exists.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tools.tool_cache import InstallError, install_for_make, install_once, marked

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "prometheus"
VERSION = "2.42.0+ds-5+deb12u1"  # bookworm (Debian 12); `apt-cache policy prometheus` shows what apt offers
UPSTREAM_VERSION = "2.42.0"
ARCHITECTURE = "amd64"
# sha256 of prometheus_2.42.0+ds-5+deb12u1_amd64.deb, as bookworm's Packages index lists it (`apt-cache show
# prometheus=2.42.0+ds-5+deb12u1`) and as the downloaded file hashed.
SHA256 = "81d59a24fce84f7fbe97a45a4f2914b6a5881b5cd1db2a6a0e129e515e1a5f55"
CACHE = ROOT / ".cache" / "tools" / f"prometheus-{UPSTREAM_VERSION}"


@dataclass(frozen=True)
class Binaries:
    prometheus: Path
    promtool: Path


def binaries(cache: Path = CACHE) -> Binaries:
    """Where the unpacked package's binaries are (whether or not they are installed yet)."""
    return Binaries(prometheus=cache / "usr" / "bin" / "prometheus", promtool=cache / "usr" / "bin" / "promtool")


def _marker_text() -> str:
    return f"{PACKAGE}={VERSION} {ARCHITECTURE} sha256:{SHA256}\n"


def installed(cache: Path = CACHE) -> bool:
    """The pinned package is unpacked in `cache` (the marker names this very pin, both binaries are there)."""
    found = binaries(cache)
    return marked(cache, _marker_text()) and all(os.access(p, os.X_OK) for p in (found.prometheus, found.promtool))


def _run(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)


def check_architecture() -> None:
    if shutil.which("dpkg") is None or shutil.which("apt-get") is None:
        raise InstallError(
            f"installing Prometheus {UPSTREAM_VERSION} needs apt-get and dpkg-deb (a Debian or Ubuntu machine); "
            "neither is on PATH here"
        )
    arch = _run(["dpkg", "--print-architecture"]).stdout.strip()
    if arch != ARCHITECTURE:
        raise InstallError(
            f"tools/prometheus_tool.py pins the {ARCHITECTURE} build of {PACKAGE}={VERSION}, but this machine is "
            f"{arch}: add that architecture's SHA256 from `apt-cache show {PACKAGE}={VERSION}`"
        )


class ListsMissing(InstallError):
    """apt's lists do not hold the pinned version (never updated on this machine, or Debian replaced it)."""


def download_updating(dest: Path) -> Path:
    """download(), and as root once more after `apt-get update` when the lists lack the pin (a fresh machine or CI
    has never updated them): `make test` then needs nothing done by hand."""
    try:
        return download(dest)
    except ListsMissing:
        if os.geteuid() != 0:
            raise
        print(f"apt's lists lack {PACKAGE}={VERSION}: apt-get update", file=sys.stderr)
        _run(["apt-get", "update", "-qq"])
        return download(dest)


def download(dest: Path, apt_options: tuple[str, ...] = ()) -> Path:
    """`apt-get download` the pinned version into `dest` (unprivileged; it reads apt's lists). `apt_options`: extra
    `-o` settings (tests point apt at empty lists)."""
    done = _run(["apt-get", "download", *apt_options, f"{PACKAGE}={VERSION}"], cwd=dest)
    debs = sorted(dest.glob(f"{PACKAGE}_*.deb"))
    if done.returncode != 0 or len(debs) != 1:
        said = " ".join(line for line in done.stderr.splitlines() if line.startswith("E:")) or done.stderr.strip()
        if "Unable to locate package" in said or "was not found" in said:
            raise ListsMissing(
                f"apt's package lists have no {PACKAGE}={VERSION} ({said}): run `apt-get update` (as root) and "
                f"make again; if it is still missing, Debian has replaced it: `apt-cache policy {PACKAGE}` shows "
                "the version on offer, then update VERSION and SHA256 in tools/prometheus_tool.py"
            )
        raise InstallError(f"apt-get download {PACKAGE}={VERSION} failed: {said}")
    return debs[0]


def verify(deb: Path, expected: str = SHA256) -> None:
    found = hashlib.sha256(deb.read_bytes()).hexdigest()
    if found != expected:
        raise InstallError(
            f"{deb.name} has sha256 {found}, but tools/prometheus_tool.py pins {expected}: the file is not the "
            "pinned package; nothing was unpacked"
        )


def unpack(deb: Path, tree: Path) -> None:
    done = _run(["dpkg-deb", "-x", str(deb), str(tree)])
    if done.returncode != 0:
        raise InstallError(f"dpkg-deb -x {deb.name} failed: {done.stderr.strip()}")


def check_version(found: Binaries) -> None:
    """Both binaries run from the unpacked tree and say they are the pinned release."""
    for path in (found.prometheus, found.promtool):
        done = _run([str(path), "--version"])
        first = (done.stdout or done.stderr).splitlines()[:1]
        if done.returncode != 0 or not first or f"version {UPSTREAM_VERSION}" not in first[0]:
            raise InstallError(f"{path.name} --version says {first or done.stderr!r}, not version {UPSTREAM_VERSION}")


def ensure(cache: Path = CACHE) -> Binaries:
    """The pinned prometheus and promtool, installed into `cache` if they are not there yet. Safe to call from
    concurrent processes (the test shards): one installs, the others wait on the lock and find it done."""

    def fill(tree: Path, scratch: Path) -> None:
        check_architecture()
        deb = download_updating(scratch)
        verify(deb)
        unpack(deb, tree)
        check_version(binaries(tree))

    install_once(cache, _marker_text(), lambda: installed(cache), fill)
    return binaries(cache)


def main() -> int:
    done = install_for_make(CACHE, installed, ensure)
    if done is None:
        return 1
    found, what = done
    print(f"{PACKAGE} {VERSION} ({what}): {found.prometheus.relative_to(ROOT)}, {found.promtool.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
