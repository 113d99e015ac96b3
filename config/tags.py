"""The tags on every AWS resource of a deployment. The stacks write them and the teardown sweep finds what
CloudFormation cannot see by them, so both read the keys from here.

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

PROJECT_TAG_KEY = "project"
PROJECT_TAG_VALUE = "trn-specdec"
DEPLOYMENT_TAG_KEY = "trn-specdec:deployment"  # value: the deployment's name (config `name`)
