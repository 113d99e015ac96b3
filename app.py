#!/usr/bin/env python3
"""CDK app entry: read the config (-c config=path), validate it, build the stacks, synthesize."""

from __future__ import annotations

import sys
from pathlib import Path

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from config import ConfigError, load_config
from stacks import add_stacks


def main() -> None:
    app = App()
    try:
        config = load_config(app.node.try_get_context("config"))
        if _truthy(app.node.try_get_context("deploy")) and config.admin_is_placeholder:
            raise ConfigError(
                [
                    f"admin_principal_arn={config.admin_principal_arn!r} is the placeholder; set it to the IAM role "
                    "or user that should administer the cluster before deploying"
                ]
            )
    except ConfigError as err:
        print(err, file=sys.stderr)
        sys.exit(2)
    add_stacks(app, config)
    dist = app.node.try_get_context("dist")
    if dist:  # `make synth` also writes the Kubernetes objects as YAML, in this process (one jsii start-up)
        from charts.__main__ import write_dist

        write_dist(config, Path(dist), source=app.node.try_get_context("config"))
    if not _falsy(app.node.try_get_context("nag")):
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()


def _truthy(value: object) -> bool:
    return str(value).lower() in {"1", "true", "yes"}


def _falsy(value: object) -> bool:
    return str(value).lower() in {"0", "false", "no"}


if __name__ == "__main__":
    main()
