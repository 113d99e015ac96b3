"""Check boto3 S3 calls against synthesized IAM policy statements.

Records the S3 operations a piece of code really makes (botocore's before-parameter-build event on a client talking
to moto), maps each to the IAM action S3 authorizes it with, and asks whether a role's statements allow
that action on that bucket or object ARN. The operation -> action table follows the S3 documentation
("Actions, resources, and condition keys for Amazon S3" and each API page's "Permissions" section).
"""

from __future__ import annotations

import fnmatch
import threading
from typing import Any

# operation: (IAM action, resource level)
S3_ACTIONS: dict[str, tuple[str, str]] = {
    "HeadBucket": ("s3:ListBucket", "bucket"),
    "ListObjectsV2": ("s3:ListBucket", "bucket"),
    "ListMultipartUploads": ("s3:ListBucketMultipartUploads", "bucket"),
    "HeadObject": ("s3:GetObject", "object"),
    "GetObject": ("s3:GetObject", "object"),
    "PutObject": ("s3:PutObject", "object"),
    "CreateMultipartUpload": ("s3:PutObject", "object"),
    "UploadPart": ("s3:PutObject", "object"),
    "CompleteMultipartUpload": ("s3:PutObject", "object"),
    "ListParts": ("s3:ListMultipartUploadParts", "object"),
    "AbortMultipartUpload": ("s3:AbortMultipartUpload", "object"),
}


class S3Calls:
    """Every S3 operation a client makes, as (IAM action, ARN) pairs."""

    def __init__(self, client: Any) -> None:
        self.calls: set[tuple[str, str]] = set()
        self.operations: set[str] = set()
        self._lock = threading.Lock()
        client.meta.events.register("before-parameter-build.s3", self._record)

    def _record(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        action, level = S3_ACTIONS[model.name]  # a KeyError here means the table needs the new operation
        bucket = params["Bucket"]
        arn = f"arn:aws:s3:::{bucket}" if level == "bucket" else f"arn:aws:s3:::{bucket}/{params['Key']}"
        with self._lock:
            self.calls.add((action, arn))
            self.operations.add(model.name)


def resolve(value: Any, account: str, region: str) -> str:
    """A CloudFormation string expression (Fn::Join of strings and pseudo parameters) as a plain string."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(resolve(p, account, region) for p in parts)
    pseudo = {
        "AWS::Partition": "aws",
        "AWS::AccountId": account,
        "AWS::Region": region,
        "AWS::URLSuffix": "amazonaws.com",
    }
    if value.get("Ref") in pseudo:
        return pseudo[value["Ref"]]
    raise ValueError(f"cannot resolve {value!r} offline")


def denied(statements: list[dict[str, Any]], calls: set[tuple[str, str]], account: str, region: str) -> list[str]:
    """The calls no Allow statement covers (action and resource), as 'action on arn'."""
    allows = []
    for s in statements:
        if s.get("Effect") != "Allow" or "Condition" in s:
            continue
        actions = [s["Action"]] if isinstance(s["Action"], str) else s["Action"]
        resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
        allows.append((actions, [resolve(r, account, region) for r in resources]))
    return sorted(
        f"{action} on {arn}"
        for action, arn in calls
        if not any(
            any(fnmatch.fnmatchcase(action, a) for a in actions) and any(fnmatch.fnmatchcase(arn, r) for r in resources)
            for actions, resources in allows
        )
    )


def statements_by_service_account(synth: Any) -> dict[str, list[dict[str, Any]]]:
    """The policy statements of every Pod Identity role of the Workloads stack, keyed by service account."""
    template = synth.template("Workloads")
    assocs = synth.resources("Workloads", "AWS::EKS::PodIdentityAssociation").values()
    out = {}
    for assoc in (a["Properties"] for a in assocs):
        assert assoc["Namespace"] == synth.config.namespace
        role_id = assoc["RoleArn"]["Fn::GetAtt"][0]
        out[assoc["ServiceAccount"]] = [
            s
            for r in template["Resources"].values()
            if r["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in r["Properties"]["Roles"]
            for s in r["Properties"]["PolicyDocument"]["Statement"]
        ]
    return out


def allowed(
    statements: list[dict[str, Any]], action: str, resource: str = "*", context: dict[str, str] | None = None
) -> bool:
    """Whether an Allow statement grants `action` on `resource` (an ARN, or "*" for an action that takes none) to a
    request whose condition keys are `context` (e.g. aws:RequestedRegion, aws:ResourceTag/<key>), evaluating the
    condition operators IAM defines (IAM User Guide, "IAM JSON policy elements: Condition operators"): every key of
    every operator must match (AND); StringEquals/StringLike on a key the request lacks does not match. Resources
    must be plain strings (resolve CloudFormation tokens first). No Deny statements are expected here; an operator
    this evaluator does not know fails the test."""
    context = context or {}
    for s in statements:
        if s.get("Effect") != "Allow":
            continue
        actions = [s["Action"]] if isinstance(s["Action"], str) else s["Action"]
        resources = [s["Resource"]] if isinstance(s["Resource"], (str, dict)) else s["Resource"]
        if not any(fnmatch.fnmatchcase(action, a) for a in actions):
            continue
        if not any(isinstance(r, str) and fnmatch.fnmatchcase(resource, r) for r in resources):
            continue
        if all(_condition_holds(op, keys, context) for op, keys in s.get("Condition", {}).items()):
            return True
    return False


def allowed_on_tagged_resource(
    statements: list[dict[str, Any]], action: str, tags: dict[str, str], context: dict[str, str] | None = None
) -> bool:
    """Whether an Allow statement grants `action` on a resource ("*") carrying `tags`, for a request with `context`."""
    tag_keys = {f"aws:ResourceTag/{k}": v for k, v in tags.items()}
    return allowed(statements, action, "*", {**tag_keys, **(context or {})})


def _condition_holds(operator: str, keys: dict[str, Any], context: dict[str, str]) -> bool:
    if operator not in ("StringEquals", "StringLike"):
        raise AssertionError(f"condition operator {operator} is not evaluated here; extend iam_check.allowed")
    for key, wanted in keys.items():
        have = context.get(key)
        values = [wanted] if isinstance(wanted, str) else wanted
        if have is None:
            return False
        if operator == "StringEquals" and have not in values:
            return False
        if operator == "StringLike" and not any(fnmatch.fnmatchcase(have, v) for v in values):
            return False
    return True
