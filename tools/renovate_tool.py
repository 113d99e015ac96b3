"""Renovate's own config validator at a pinned version: the npm package `renovate` (tools/renovate/package.json and
its lock), installed with `npm ci` into the project's tool cache (.cache/, gitignored), apart from the CDK CLI.

    python3 -m tools.renovate_tool             # install if missing (`make test` runs it first); print the path
    python3 -m tools.renovate_tool validate    # renovate-config-validator --strict on renovate.json

Why a folder of its own: the package is 341 MB in 607 packages (about 30 s of `npm ci` on two cores), while
node_modules/, which every `make synth` and `make deploy` installs, holds only the CDK CLI (29 MB); only the tests
need the validator. `--ignore-scripts`: the validator needs no install script, and none of the three it would run
(dtrace-provider, protobufjs, core-js-pure) nor re2's native build (an optional download from GitHub, or a compile)
runs on a CI machine. Without re2 the validator checks regexes with JavaScript's engine and says so in one warning;
ours use nothing RE2 lacks (tests/config/test_versions_renovate.py applies them with Python's). Renovate 44 declares
Node ^24.11; its validator runs on Node 20 and 22 too (npm's EBADENGINE warnings are not shown).
Standard library only: make runs it with the system Python.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

from tools.tool_cache import InstallError, install_for_make, install_once, marked

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tools" / "renovate"  # package.json and package-lock.json: Renovate's npm manager updates both
PACKAGE = "renovate"
CACHE = ROOT / ".cache" / "tools" / "renovate"
CONFIG = ROOT / "renovate.json"


def version(source: Path = SOURCE) -> str:
    """The pinned version, as package.json names it (exact: --save-exact)."""
    return json.loads((source / "package.json").read_text())["devDependencies"][PACKAGE]


def validator(cache: Path = CACHE) -> Path:
    return cache / "node_modules" / ".bin" / "renovate-config-validator"


def _marker_text(source: Path) -> str:
    lock = hashlib.sha256((source / "package-lock.json").read_bytes()).hexdigest()
    return f"{PACKAGE}@{version(source)} package-lock.json sha256:{lock}\n"


def installed(cache: Path = CACHE, source: Path = SOURCE) -> bool:
    """The tree in `cache` was installed from this very lock (a lock Renovate bumped installs again)."""
    return marked(cache, _marker_text(source)) and validator(cache).is_file()


def ensure(cache: Path = CACHE, source: Path = SOURCE) -> Path:
    """The pinned validator, installed into `cache` if it is not there yet. Safe from concurrent processes (the test
    shards): one installs, the others wait on the lock and find it done."""

    def fill(tree: Path, _scratch: Path) -> None:
        if shutil.which("npm") is None:
            raise InstallError("installing Renovate's config validator needs npm (Node.js) on PATH, as make synth does")
        tree.mkdir()
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(source / name, tree / name)
        args = ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
        done = subprocess.run(args, cwd=tree, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not validator(tree).is_file():
            said = " ".join((done.stderr or done.stdout).split())[-400:]
            raise InstallError(
                f"npm ci of {PACKAGE}@{version(source)} from tools/renovate/package-lock.json failed ({said}); "
                "check the network path to the npm registry (or npm's proxy settings) and run make test again"
            )

    install_once(cache, _marker_text(source), lambda: installed(cache, source), fill)
    return validator(cache)


def validate(config: Path = CONFIG, cache: Path = CACHE) -> subprocess.CompletedProcess[str]:
    """`renovate-config-validator --strict --no-global` on `config`: as the repository's config (not a self-hosted
    global one), failing on any warning, error or needed migration."""
    return subprocess.run(
        [str(validator(cache)), "--strict", "--no-global", config.name],
        cwd=config.parent,
        capture_output=True,
        text=True,
        check=False,
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    done = install_for_make(CACHE, installed, ensure)
    if done is None:
        return 1
    found, what = done
    if args == ["validate"]:
        ran = validate()
        print(ran.stdout + ran.stderr, end="")
        return ran.returncode
    print(f"{PACKAGE} {version()} ({what}): {found.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
