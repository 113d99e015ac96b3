"""Tag-scoped sweep of what CloudFormation cannot see, run by `make destroy` after `cdk destroy --all`.

Kubernetes controllers create load balancers, security groups and ENIs outside CloudFormation; left
behind they block VPC deletion and cost money. The sweep deletes only resources that carry this
deployment's tag or a tag saying this deployment's cluster owns them (`kubernetes.io/cluster/<ours>`
with value `owned`, never `shared`); anything CloudFormation manages (`aws:cloudformation:stack-id`) is
left to CloudFormation. It refuses to run while any of this deployment's stacks still exists, because
the live cluster's own unused security groups and ENIs carry the same tags; `--force --reason TEXT`
overrides that. Log groups that EKS and Container Insights create are listed, not deleted (they carry
no tag of ours).

    python -m ops.teardown_sweep [--config config/default.yaml] [--dry-run] [--force --reason TEXT]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from cloud import aws
from config import ConfigError, DeploymentConfig, load_config
from config.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from config.tags import DEPLOYMENT_TAG_KEY

CLOUDFORMATION_TAG = "aws:cloudformation:stack-id"


@dataclass
class SweepReport:
    deleted: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    left_for_you: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Ownership:
    """The tags that mark a resource as this deployment's."""

    deployment: str
    cluster_name: str

    def owns(self, tags: dict[str, str]) -> bool:
        if CLOUDFORMATION_TAG in tags:  # CloudFormation deletes its own resources
            return False
        return (
            tags.get(DEPLOYMENT_TAG_KEY) == self.deployment
            or tags.get(f"kubernetes.io/cluster/{self.cluster_name}") == "owned"
            or tags.get("elbv2.k8s.aws/cluster") == self.cluster_name
            or tags.get("cluster.k8s.amazonaws.com/name") == self.cluster_name
            or tags.get("eks:cluster-name") == self.cluster_name
        )

    def ec2_filters(self) -> list[list[dict]]:
        """One EC2 filter set per ownership tag (EC2 ANDs filters, so each is queried on its own). They only
        narrow the listing; `owns` decides."""
        return [
            [{"Name": f"tag:{DEPLOYMENT_TAG_KEY}", "Values": [self.deployment]}],
            [{"Name": "tag-key", "Values": [f"kubernetes.io/cluster/{self.cluster_name}"]}],
            [{"Name": "tag:elbv2.k8s.aws/cluster", "Values": [self.cluster_name]}],
            [{"Name": "tag:cluster.k8s.amazonaws.com/name", "Values": [self.cluster_name]}],
            [{"Name": "tag:eks:cluster-name", "Values": [self.cluster_name]}],
        ]


def sweep(
    session: boto3.session.Session,
    owner: Ownership,
    *,
    dry_run: bool = False,
    log: Callable[[str], None] = print,
    retries: int = 6,
    retry_delay_s: float = 10.0,
) -> SweepReport:
    """Delete owned load balancers, then detached ENIs, then security groups (that order frees dependencies)."""
    run = _Sweep(owner, dry_run=dry_run, log=log, retries=retries, retry_delay_s=retry_delay_s)
    run.load_balancers(aws.session_client(session, "elbv2"), aws.session_client(session, "elb"))
    ec2 = aws.session_client(session, "ec2")
    run.network_interfaces(ec2)
    run.security_groups(ec2)
    run.log_groups(aws.session_client(session, "logs"))
    return run.report


@dataclass
class _Sweep:
    """One sweep: a method per kind of resource, each recording what it deleted, could not delete or left."""

    owner: Ownership
    dry_run: bool
    log: Callable[[str], None]
    retries: int
    retry_delay_s: float
    report: SweepReport = field(default_factory=SweepReport)

    def delete(self, kind: str, ident: str, call: Callable[[], object]) -> None:
        if self.dry_run:
            self.log(f"would delete {kind} {ident}")
            self.report.deleted.append(f"{kind} {ident}")
            return
        try:
            call()
        except ClientError as err:
            self.report.failed.append(f"{kind} {ident}: {err.response['Error'].get('Code')}")
            self.log(f"could not delete {kind} {ident}: {err}")
            return
        self.report.deleted.append(f"{kind} {ident}")
        self.log(f"deleted {kind} {ident}")

    def load_balancers(self, elbv2, elb) -> None:
        for arn in _owned_elbv2(elbv2, self.owner):
            self.delete("load balancer", arn, lambda arn=arn: elbv2.delete_load_balancer(LoadBalancerArn=arn))
        for arn in _owned_target_groups(elbv2, self.owner):
            self.delete("target group", arn, lambda arn=arn: elbv2.delete_target_group(TargetGroupArn=arn))
        for name in _owned_classic_elbs(elb, self.owner):
            self.delete(
                "classic load balancer", name, lambda name=name: elb.delete_load_balancer(LoadBalancerName=name)
            )

    def network_interfaces(self, ec2) -> None:
        """Detached ones only: an interface still in use is left, with its status."""
        for eni in _owned(ec2.describe_network_interfaces, "NetworkInterfaces", "NetworkInterfaceId", self.owner):
            eni_id = eni["NetworkInterfaceId"]
            if eni["Status"] != "available":
                self.report.left_for_you.append(f"network interface {eni_id} (still {eni['Status']})")
                continue
            self.delete(
                "network interface",
                eni_id,
                lambda eni_id=eni_id: ec2.delete_network_interface(NetworkInterfaceId=eni_id),
            )

    def security_groups(self, ec2) -> None:
        """Each owned group but a VPC's default; one still in use (a load balancer draining) is tried again after
        retry_delay_s, up to `retries` rounds."""
        groups = [
            g["GroupId"]
            for g in _owned(ec2.describe_security_groups, "SecurityGroups", "GroupId", self.owner)
            if g.get("GroupName") != "default"
        ]
        for attempt in range(self.retries):
            last = attempt + 1 == self.retries
            pending = [group_id for group_id in groups if self.delete_security_group(ec2, group_id, last=last)]
            if not pending:
                break
            self.log(f"{len(pending)} security groups still in use (load balancers draining); retrying")
            time.sleep(self.retry_delay_s)
            groups = pending

    def delete_security_group(self, ec2, group_id: str, *, last: bool) -> bool:
        """Deletes the group; True when it is still in use and worth another round (not on the `last`)."""
        try:
            if self.dry_run:
                self.log(f"would delete security group {group_id}")
            else:
                ec2.delete_security_group(GroupId=group_id)
                self.log(f"deleted security group {group_id}")
            self.report.deleted.append(f"security group {group_id}")
        except ClientError as err:
            code = err.response["Error"].get("Code")
            if code == "DependencyViolation" and not last:
                return True
            self.report.failed.append(f"security group {group_id}: {code}")
        return False

    def log_groups(self, logs) -> None:
        """Listed, not deleted: EKS and Container Insights create them without a tag of ours."""
        for prefix in (f"/aws/eks/{self.owner.cluster_name}/", f"/aws/containerinsights/{self.owner.cluster_name}/"):
            for page in logs.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=prefix):
                for group in page.get("logGroups", []):
                    self.report.left_for_you.append(
                        f"log group {group['logGroupName']} (delete with: aws logs delete-log-group "
                        f"--log-group-name {group['logGroupName']})"
                    )


def _owned(describe: Callable, key: str, ident: str, owner: Ownership) -> list[dict]:
    seen: dict[str, dict] = {}
    for filters in owner.ec2_filters():
        token: str | None = None
        while True:
            page = describe(Filters=filters, **({"NextToken": token} if token else {}))
            for item in page.get(key, []):
                tags = {t["Key"]: t["Value"] for t in item.get("Tags", item.get("TagSet", []))}
                if owner.owns(tags):
                    seen[item[ident]] = item
            token = page.get("NextToken")
            if not token:
                break
    return list(seen.values())


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _owned_elbv2(client, owner: Ownership) -> list[str]:
    return _owned_elbv2_arns(client, owner, "describe_load_balancers", "LoadBalancers", "LoadBalancerArn")


def _owned_target_groups(client, owner: Ownership) -> list[str]:
    return _owned_elbv2_arns(client, owner, "describe_target_groups", "TargetGroups", "TargetGroupArn")


def _owned_elbv2_arns(client, owner: Ownership, operation: str, list_key: str, arn_key: str) -> list[str]:
    """Every ARN an ELBv2 describe call pages through, kept where the tags say the deployment owns it."""
    arns = [item[arn_key] for page in client.get_paginator(operation).paginate() for item in page[list_key]]
    return _tagged_by(client, "ResourceArns", "ResourceArn", arns, owner)


def _owned_classic_elbs(client, owner: Ownership) -> list[str]:
    names = [
        lb["LoadBalancerName"]
        for page in client.get_paginator("describe_load_balancers").paginate()
        for lb in page["LoadBalancerDescriptions"]
    ]
    return _tagged_by(client, "LoadBalancerNames", "LoadBalancerName", names, owner)


def _tagged_by(client, ids_param: str, id_key: str, ids: list[str], owner: Ownership) -> list[str]:
    """Those of `ids` whose tags say the deployment owns them. Both load balancer APIs' DescribeTags take at most 20
    a call (botocore's elb model: LoadBalancerNames max 20; docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/
    API_DescribeTags: "up to 20 resources in a single call") and answer TagDescriptions."""
    owned = []
    for chunk in _chunks(ids, 20):
        for desc in client.describe_tags(**{ids_param: chunk})["TagDescriptions"]:
            if owner.owns({t["Key"]: t["Value"] for t in desc.get("Tags", [])}):
                owned.append(desc[id_key])
    return owned


def ownership(config: DeploymentConfig) -> Ownership:
    return Ownership(deployment=config.name, cluster_name=config.cluster_name)


def live_stacks(session: boto3.session.Session, names: Iterable[str]) -> list[str]:
    """Which of `names` CloudFormation still has (any state but DELETE_COMPLETE), as "name (STATUS)"."""
    cfn = aws.session_client(session, "cloudformation")
    live = []
    for name in names:
        try:
            (stack,) = cfn.describe_stacks(StackName=name)["Stacks"]
        except ClientError as err:
            if "does not exist" in str(err):
                continue
            raise
        if stack["StackStatus"] != "DELETE_COMPLETE":
            live.append(f"{name} ({stack['StackStatus']})")
    return live


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.teardown_sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=None, help="deployment config file (default: config/default.yaml)")
    parser.add_argument("--dry-run", action="store_true", help="list what would be deleted; delete nothing")
    parser.add_argument("--force", action="store_true", help="run even though this deployment's stacks exist")
    parser.add_argument("--reason", default="", help="why --force is needed (printed, required with --force)")
    args = parser.parse_args(argv)
    if args.force and not args.reason.strip():
        print("sweep: --force needs --reason TEXT saying why the stacks' own resources may be deleted", file=sys.stderr)
        return EXIT_USAGE
    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return EXIT_USAGE
    session = boto3.session.Session(region_name=config.region)
    try:
        live = live_stacks(session, config.stack_names.values())
        if live and not args.force:
            print(
                f"sweep: refusing to run while these stacks exist: {', '.join(live)}. The live cluster's own "
                "security groups and ENIs carry the same tags. Run `cdk destroy --all` first (make destroy does), "
                "or pass --force --reason TEXT if you know why they must go now.",
                file=sys.stderr,
            )
            return EXIT_USAGE
        if live:
            print(f"sweep: running although {', '.join(live)} exist(s), because: {args.reason.strip()}")
        report = sweep(session, ownership(config), dry_run=args.dry_run)
    except (BotoCoreError, ClientError) as err:
        print(f"sweep: AWS call failed ({err}); check your credentials and region {config.region}", file=sys.stderr)
        return EXIT_USAGE
    for item in report.left_for_you:
        print(f"left for you: {item}")
    for item in report.failed:
        print(f"not deleted: {item}; delete it in the console or run the sweep again", file=sys.stderr)
    done = "would be deleted" if args.dry_run else "deleted"
    print(f"sweep: {len(report.deleted)} {done}, {len(report.failed)} failed, {len(report.left_for_you)} left")
    return EXIT_FAILED if report.failed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
