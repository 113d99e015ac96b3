"""`pip install ... --require-hashes -r FILE` in the journey's stand-in images, offline: instead of downloading, it
checks that every requirement the file pins (markers evaluated for this interpreter) is installed in the local
interpreter at exactly that version, and that each pin carries a --hash, as pip's hash-checking mode requires; then
it installs nothing (the local interpreter already imports them). A pin the interpreter lacks, or holds at another
version, fails the install with the list, as a real pip would fail to find or verify it. Any other pip command is
refused: the Jobs run only this one."""

from __future__ import annotations

import importlib.metadata
import re
import sys

from packaging.markers import Marker


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "install" or "-r" not in argv or "--require-hashes" not in argv:
        print(
            f"journey pip stand-in: only `pip install --require-hashes -r FILE` is imitated, got {argv}",
            file=sys.stderr,
        )
        return 2
    text = open(argv[argv.index("-r") + 1]).read()  # noqa: SIM115 (short-lived)
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.replace("\\\n", " "))
    problems, checked = [], 0
    for block in blocks:
        line = block.strip()
        if not line or line.startswith("#"):
            continue
        requirement, _, rest = line.partition(" --hash")
        spec, _, marker = requirement.partition(";")
        name, _, version = spec.strip().partition("==")
        if marker.strip() and not Marker(marker.strip()).evaluate():
            continue
        checked += 1
        if not rest:
            problems.append(f"{spec.strip()} has no --hash (hash-checking mode needs one for every requirement)")
            continue
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{name}=={version} is not installed in the local interpreter")
            continue
        if installed != version.strip():
            problems.append(f"{name}=={version.strip()} is pinned, the local interpreter has {installed}")
    if problems:
        print("ERROR: journey pip stand-in:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(
        f"journey pip stand-in: {checked} pinned requirements installed locally at the locked versions; nothing downloaded"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
