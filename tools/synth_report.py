"""What `make synth` reports: the templates of this synth, read from the cloud assembly's manifest.json.

The CDK CLI writes into cdk.out/ without clearing it, so a synth of another config (other stack names, e.g.
`CONFIG=config/vllm-neuron.yaml`) leaves its templates behind, and a listing of cdk.out/*.template.json shows
them as if this synth had made them. The manifest names only this synth's stacks; per-stack files of any other
stack are stale and are removed here, each one named, so nothing of another config lingers unnoticed.

    python -m tools.synth_report [--out cdk.out] [--dist dist]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

STACK_ARTIFACT = "aws:cloudformation:stack"
# The files the CDK writes for each stack: <stack>.template.json, <stack>.assets.json, <stack>.metadata.json.
PER_STACK_FILE = re.compile(r"(?P<stack>.+)\.(template|assets|metadata)\.json")


def assembly_templates(out: Path) -> dict[str, str]:
    """Stack name -> template file, as the cloud assembly's manifest lists them."""
    path = out / "manifest.json"
    try:
        artifacts = json.loads(path.read_text())["artifacts"]
    except (OSError, ValueError, KeyError) as err:
        raise SystemExit(f"{path} is not a cloud assembly manifest ({err}); run the synth again") from None
    return {
        name: artifact["properties"]["templateFile"]
        for name, artifact in artifacts.items()
        if artifact.get("type") == STACK_ARTIFACT
    }


def stale_files(out: Path, stacks: set[str]) -> list[Path]:
    """Per-stack files in `out` of stacks this assembly does not contain (left there by an earlier synth)."""
    return sorted(
        p for p in out.iterdir() if (m := PER_STACK_FILE.fullmatch(p.name)) and m.group("stack") not in stacks
    )


def report(out: Path, dist: Path | None) -> list[str]:
    """Remove stale per-stack files and return the lines to print."""
    templates = assembly_templates(out)
    lines = []
    stale = stale_files(out, set(templates))
    for path in stale:
        path.unlink()
    if stale:
        lines.append(f"removed from {out}/, left by a synth of another config: {' '.join(p.name for p in stale)}")
    lines.append(f"templates: {' '.join(f'{out}/{t}' for t in sorted(templates.values()))}")
    if dist is not None:
        lines.append(f"kubernetes: {' '.join(str(p) for p in sorted(dist.glob('*.yaml')))}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.synth_report", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("cdk.out"), help="the cloud assembly (default: cdk.out)")
    parser.add_argument("--dist", type=Path, default=None, help="where the synth wrote Kubernetes YAML")
    args = parser.parse_args(argv)
    print("\n".join(report(args.out, args.dist)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
