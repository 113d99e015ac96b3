#!/usr/bin/env python3
"""CDK app entry: read the config (-c config=path), validate it, build the stacks, synthesize."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from config import ConfigError, load_config
from config.catalogue import CLOUDFORMATION_TEMPLATE_BYTES
from config.exit_codes import EXIT_USAGE

# Where the CDK CLI puts `-c key=value` and cdk.json's context for the app (aws-cdk-lib 2.275 core/lib/app.js,
# App.loadContext: the JSON in CDK_CONTEXT_JSON, then what did not fit there, in the file this variable names).
CONTEXT_ENV = "CDK_CONTEXT_JSON"
CONTEXT_OVERFLOW_ENV = "CONTEXT_OVERFLOW_LOCATION_ENV"


def cli_context() -> dict[str, Any]:
    """The context the CLI hands the app, read as App() reads it, so the config is validated before aws_cdk is
    imported: a bad config stops in well under a second instead of after jsii's start-up."""
    context = json.loads(os.environ.get(CONTEXT_ENV) or "{}")
    overflow = os.environ.get(CONTEXT_OVERFLOW_ENV)
    if overflow:
        context |= json.loads(Path(overflow).read_text())
    return context


def main() -> None:
    context = cli_context()
    try:
        config = load_config(context.get("config"))
        if _truthy(context.get("deploy")) and config.admin_is_placeholder:
            raise ConfigError(
                [
                    f"admin_principal_arn={config.admin_principal_arn!r} is the placeholder; set it to the IAM role "
                    "or user that should administer the cluster before deploying"
                ]
            )
    except ConfigError as err:
        print(err, file=sys.stderr)
        sys.exit(EXIT_USAGE)
    from aws_cdk import App, Validations
    from cdk_nag import AwsSolutionsChecks

    from stacks import add_stacks

    app = App()
    add_stacks(app, config)
    dist = context.get("dist")
    if dist:  # `make synth` also writes the Kubernetes objects as YAML, in this process (one jsii start-up)
        from charts.__main__ import write_dist

        write_dist(config, Path(dist), source=context.get("config"))
    if not _falsy(context.get("nag")):
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    assembly = app.synth()
    problems = oversized_templates(Path(assembly.directory))
    if problems:
        print(ConfigError(problems), file=sys.stderr)
        sys.exit(EXIT_USAGE)


def oversized_templates(outdir: Path) -> list[str]:
    """The config caps profiles at a measured count; this is the exact check, on the files the CLI uploads."""
    return [
        f"stack {p.name.removesuffix('.template.json')} synthesizes a {p.stat().st_size:,}-byte template, over "
        f"CloudFormation's limit of {CLOUDFORMATION_TEMPLATE_BYTES:,} bytes; remove profiles or split them over "
        "deployments (config files with different names)"
        for p in sorted(outdir.glob("*.template.json"))
        if p.stat().st_size > CLOUDFORMATION_TEMPLATE_BYTES
    ]


def _truthy(value: object) -> bool:
    return str(value).lower() in {"1", "true", "yes"}


def _falsy(value: object) -> bool:
    return str(value).lower() in {"0", "false", "no"}


if __name__ == "__main__":
    main()
