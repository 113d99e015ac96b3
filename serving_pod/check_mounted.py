"""Serving's init check: does the mounted artifact match the profile the server is about to run?

    python3 -m serving_pod.check_mounted --dir /models/artifacts/<digest> \\
        --expected-json '{"digest": "...", "inputs": {...}, "profile": "speculative"}' [--deep] [--copy-to DIR]

Standard library + serving_pod.manifest only: it runs with the Neuron image's own python3 from a
ConfigMap, before vLLM starts. Checks the manifest exists, that its digest and inputs equal the
expected ones, that every listed file has its size and the S3 Last-Modified the manifest recorded (os.stat,
cheap even over Mountpoint for S3, which shows an object's Last-Modified as its mtime; a file written again after
publish is hashed, so a same-size replacement fails without reading the rest) and, with --deep, its sha256. With --serve-argv-json (stacks whose artifact is a compile cache) it checks that the
build ran exactly the vLLM command line this pod will run (the build record's argv) and that the profile's
graph-shaping flags are in it: the cache's key inputs. With --copy-to it then copies the listed files to DIR on
node-local disk, where vLLM reads and writes its cache (Mountpoint for S3 has no atomic rename, which the plugin's
cache relies on), and checks the copy holds every listed file at its size. Exit 0 ok, 1 mismatch (with the command
that builds the right artifact), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from config.bucket_layout import BUILD_RECORD_NAME, MANIFEST_NAME
from serving_pod.manifest import BuildRecord, Manifest, file_problems, mismatches

# config/exit_codes.py's values, repeated: this script runs alone in the serving image (standard library and
# serving_pod.manifest only, shipped as a ConfigMap); tests/serving_pod/test_check_mounted.py keeps them equal.
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
        problems = file_problems(directory, manifest.files, deep=deep, s3_times=True)
    if problems:
        listed = "\n".join(f"  - {p}" for p in problems)
        return EXIT_FAILED, f"FAIL: {directory} does not match {who}:\n{listed}\nfix: {_fix(profile)}"
    how = (
        "sizes and sha256 checked"
        if deep
        else "sizes and S3 times checked, files written again since publish hashed; --deep hashes every file"
    )
    return EXIT_OK, f"OK: {directory} matches {who}: {len(manifest.files)} files, {manifest.total_bytes} bytes ({how})"


def flag_values(argv: list[str]) -> dict[str, str]:
    """A vLLM command line as {flag: value} ("" for a switch, "<positional N>" keys for the rest): order-free."""
    values: dict[str, str] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        if token.startswith("--"):
            takes_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            values[token] = argv[i + 1] if takes_value else ""
            i += 2 if takes_value else 1
        else:
            values[f"<positional {len([k for k in values if k.startswith('<positional')])}>"] = token
            i += 1
    return values


def argv_problems(directory: Path, serve_argv: list[str], graph_args: list[str]) -> list[str]:
    """The cache's key inputs against the command line this pod's vLLM runs: the build record names the vLLM argv the
    build ran to fill the cache (model_build.compile_cache), which must be this one flag for flag; and the profile's
    graph-shaping flags (its digest inputs) must be in it."""
    problems: list[str] = []
    if graph_args and not any(serve_argv[i : i + len(graph_args)] == graph_args for i in range(len(serve_argv))):
        problems.append(f"the serving command line does not carry the profile's graph arguments {' '.join(graph_args)}")
    path = directory / BUILD_RECORD_NAME
    try:
        built = BuildRecord.from_json(path.read_text()).neuron_config.get("vllm_argv")
    except (OSError, ValueError, TypeError, KeyError) as err:
        return [*problems, f"cannot read the build's command line from {path} ({err})"]
    if not isinstance(built, list):
        return [*problems, f"{path} names no vllm_argv: this artifact was not built by running vLLM"]
    want, have = flag_values(serve_argv), flag_values(built)
    for flag in sorted(set(want) | set(have)):
        if want.get(flag) != have.get(flag):
            problems.append(
                f"{flag}: the cache was built with {have.get(flag, '(absent)')!r}, serving runs {want.get(flag, '(absent)')!r}"
            )
    return problems


def copy_listed(directory: Path, files: list, destination: Path) -> int:
    """Copy the manifest's files (not the manifest) below destination; returns bytes copied."""
    copied = 0
    for entry in files:
        source, target = directory / entry.path, destination / entry.path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        copied += target.stat().st_size
    return copied


def command(
    directory: str, expected: dict, *, copy_to: str | None = None, serve_argv: list[str] | None = None
) -> list[str]:
    """The command serving's init container runs (and `model_build plan` shows): this check of `directory`
    against `expected` ({"digest", "inputs", "profile"}), with the image's own python3."""
    return [
        "python3",
        "-m",
        "serving_pod.check_mounted",
        "--dir",
        directory,
        "--expected-json",
        json.dumps(expected, sort_keys=True, separators=(",", ":")),
        *(["--serve-argv-json", json.dumps(serve_argv, separators=(",", ":"))] if serve_argv else []),
        *(["--copy-to", copy_to] if copy_to else []),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m serving_pod.check_mounted",
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
    parser.add_argument(
        "--serve-argv-json", help="JSON list: the vLLM command line this pod runs; the build must have run the same"
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
    try:
        serve_argv = None if args.serve_argv_json is None else json.loads(args.serve_argv_json)
    except json.JSONDecodeError as err:
        print(f"check_mounted: --serve-argv-json is not JSON ({err})", file=sys.stderr)
        return EXIT_USAGE
    if serve_argv is not None and not (isinstance(serve_argv, list) and all(isinstance(a, str) for a in serve_argv)):
        print("check_mounted: --serve-argv-json must be a list of strings (the vLLM command line)", file=sys.stderr)
        return EXIT_USAGE
    code, message = check(args.dir, expected, deep=args.deep)
    print(message, file=sys.stdout if code == EXIT_OK else sys.stderr)
    if code != EXIT_OK:
        return code
    who = f"profile {expected.get('profile') or '<profile>'}"
    if serve_argv is not None:
        problems = argv_problems(args.dir, serve_argv, expected["inputs"].get("graph_args", []))
        if problems:
            listed = "\n".join(f"  - {p}" for p in problems)
            print(
                f"FAIL: {args.dir} was not built by {who}'s vLLM command line:\n{listed}\nfix: {_fix(expected.get('profile'))}",
                file=sys.stderr,
            )
            return EXIT_FAILED
        print(f"OK: the cache was built by the vLLM command line {who} serves with")
    if args.copy_to is not None:
        manifest = Manifest.from_json((args.dir / MANIFEST_NAME).read_text())
        copied = copy_listed(args.dir, manifest.files, args.copy_to)
        problems = file_problems(args.copy_to, manifest.files)
        if problems:
            listed = "\n".join(f"  - {p}" for p in problems)
            print(f"FAIL: the copy in {args.copy_to} does not hold what the manifest lists:\n{listed}", file=sys.stderr)
            return EXIT_FAILED
        print(
            f"OK: copied {len(manifest.files)} files, {copied} bytes to {args.copy_to}; every listed file is there at its size"
        )
    return code


if __name__ == "__main__":
    sys.exit(main())
