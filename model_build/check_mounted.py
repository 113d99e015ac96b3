"""Serving's init check: does the mounted artifact match the profile the server is about to run?

    python3 -m model_build.check_mounted --dir /models/artifacts/<digest> \\
        --expected-json '{"digest": "...", "inputs": {...}, "profile": "speculative"}' [--deep] [--copy-to DIR]

Standard library + model_build.manifest only: it runs with the Neuron image's own python3 from a
ConfigMap, before vLLM starts. Checks the manifest exists, that its digest and inputs equal the
expected ones, that every listed file has its size (os.stat, cheap even over Mountpoint for S3) and,
with --deep, its sha256. With --copy-to (stacks whose artifact is a compile cache) it then copies the listed
files to DIR on node-local disk, where vLLM reads and writes its cache (Mountpoint for S3 has no atomic
rename, which the plugin's cache relies on). Exit 0 ok, 1 mismatch (with the command that builds the right artifact),
2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from config.bucket_layout import MANIFEST_NAME
from model_build.manifest import Manifest, file_problems, mismatches

# config/exit_codes.py's values, repeated: this script runs alone in the serving image (standard library and
# model_build.manifest only, shipped as a ConfigMap); tests/model_build/test_check_mounted.py keeps them equal.
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _fix(profile: str | None) -> str:
    name = profile or "<profile>"
    return (
        f"build and publish the artifact this profile needs: make build PROFILE={name}   (or: python -m model_build "
        f"compile {name} --out DIR && python -m model_build publish {name} --from DIR); "
        f"python -m model_build plan {name} shows its inputs"
    )


def check(directory: Path, expected: dict, *, deep: bool = False) -> tuple[int, str]:
    """(exit code, message) for one mounted artifact directory."""
    digest, inputs, profile = expected["digest"], expected["inputs"], expected.get("profile")
    who = f"profile {profile} (digest {digest})" if profile else f"digest {digest}"
    path = directory / MANIFEST_NAME
    if not path.is_file():
        return EXIT_FAILED, (
            f"FAIL: no {MANIFEST_NAME} in {directory}: the artifact for {who} was never published, or its publish "
            f"has not finished (publish writes the manifest last).\nfix: {_fix(profile)}"
        )
    try:
        manifest = Manifest.from_json(path.read_text())
    except (ValueError, TypeError, KeyError) as err:
        return EXIT_FAILED, f"FAIL: {path} is not a readable manifest ({err}).\nfix: {_fix(profile)}"
    problems = mismatches(manifest, digest, inputs)
    if not problems:
        problems = file_problems(directory, manifest.files, deep=deep)
    if problems:
        listed = "\n".join(f"  - {p}" for p in problems)
        return EXIT_FAILED, f"FAIL: {directory} does not match {who}:\n{listed}\nfix: {_fix(profile)}"
    how = "sizes and sha256 checked" if deep else "sizes checked; --deep also hashes"
    return EXIT_OK, f"OK: {directory} matches {who}: {len(manifest.files)} files, {manifest.total_bytes} bytes ({how})"


def copy_listed(directory: Path, files: list, destination: Path) -> int:
    """Copy the manifest's files (not the manifest) below destination; returns bytes copied."""
    copied = 0
    for entry in files:
        source, target = directory / entry.path, destination / entry.path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        copied += target.stat().st_size
    return copied


def command(directory: str, expected: dict, *, copy_to: str | None = None) -> list[str]:
    """The command serving's init container runs (and `model_build plan` shows): this check of `directory`
    against `expected` ({"digest", "inputs", "profile"}), with the image's own python3."""
    return [
        "python3",
        "-m",
        "model_build.check_mounted",
        "--dir",
        directory,
        "--expected-json",
        json.dumps(expected, sort_keys=True, separators=(",", ":")),
        *(["--copy-to", copy_to] if copy_to else []),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m model_build.check_mounted",
        description="Check a mounted, published artifact against the profile before vLLM loads it.",
    )
    parser.add_argument("--dir", required=True, type=Path, help="the artifact directory, /models/artifacts/<digest>")
    parser.add_argument(
        "--expected-json",
        required=True,
        help='JSON {"digest": ..., "inputs": {...}, "profile": name}, as `python -m model_build plan P --json` prints',
    )
    parser.add_argument("--deep", action="store_true", help="also hash every file (reads every byte: slow)")
    parser.add_argument(
        "--copy-to", type=Path, help="after a passing check, copy the listed files below this directory"
    )
    args = parser.parse_args(argv)
    try:
        expected = json.loads(args.expected_json)
    except json.JSONDecodeError as err:
        print(f"check_mounted: --expected-json is not JSON ({err})", file=sys.stderr)
        return EXIT_USAGE
    if not isinstance(expected, dict) or not {"digest", "inputs"} <= set(expected):
        print('check_mounted: --expected-json must be an object with "digest" and "inputs"', file=sys.stderr)
        return EXIT_USAGE
    code, message = check(args.dir, expected, deep=args.deep)
    print(message, file=sys.stdout if code == EXIT_OK else sys.stderr)
    if code == EXIT_OK and args.copy_to is not None:
        manifest = Manifest.from_json((args.dir / MANIFEST_NAME).read_text())
        copied = copy_listed(args.dir, manifest.files, args.copy_to)
        print(f"OK: copied {len(manifest.files)} files, {copied} bytes to {args.copy_to}")
    return code


if __name__ == "__main__":
    sys.exit(main())
