"""The teardown sweep against a real EC2/ELB/Logs/CloudFormation API on loopback (moto server): it deletes
what carries this deployment's tags and leaves everything else alone, including look-alikes (a `shared`
cluster tag, clusters and deployments whose names start with ours, CloudFormation-managed resources)."""

from __future__ import annotations

import boto3
import pytest

from ops.teardown_sweep import CLOUDFORMATION_TAG, Ownership, main, sweep

DEPLOYMENT_TAG = "trn-specdec:deployment"  # written out: the test must not read the key from the code under test

OWNER = Ownership(deployment="trn-specdec", cluster_name="trn-specdec-eks")


@pytest.fixture(scope="module")
def rendered_tags(synth) -> dict[str, str]:
    """The tags the stacks put on the VPC, read from the synthesized template: the sweep must find what the
    stacks tag, so the test takes the keys from the rendered output, not from the code under test."""
    (vpc,) = synth.resources("Cluster", "AWS::EC2::VPC").values()
    return {t["Key"]: t["Value"] for t in vpc["Properties"]["Tags"] if t["Key"] != "Name"}


@pytest.fixture
def world(aws_env, rendered_tags):
    """A VPC with owned and foreign load balancers, target groups, ENIs, security groups and log groups."""
    session = boto3.session.Session(region_name="us-east-2")
    ec2, elbv2, elb, logs = (session.client(n) for n in ("ec2", "elbv2", "elb", "logs"))
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"us-east-2{az}")["Subnet"][
            "SubnetId"
        ]
        for i, az in enumerate("ab")
    ]

    def sg(name: str, tags: dict[str, str]) -> str:
        spec = [{"ResourceType": "security-group", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
        kwargs = {"TagSpecifications": spec} if tags else {}
        return ec2.create_security_group(GroupName=name, Description=name, VpcId=vpc, **kwargs)["GroupId"]

    def eni(tags: dict[str, str]) -> str:
        spec = [{"ResourceType": "network-interface", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
        kwargs = {"TagSpecifications": spec} if tags else {}
        return ec2.create_network_interface(SubnetId=subnets[0], **kwargs)["NetworkInterface"]["NetworkInterfaceId"]

    def alb(name: str, tags: dict[str, str]) -> str:
        lb = (
            elbv2.create_load_balancer(
                Name=name, Subnets=subnets, Tags=[{"Key": k, "Value": v} for k, v in tags.items()] or None
            )
            if tags
            else elbv2.create_load_balancer(Name=name, Subnets=subnets)
        )
        return lb["LoadBalancers"][0]["LoadBalancerArn"]

    owned = {
        "sg_deployment": sg("owned-by-tag", rendered_tags),
        "sg_cluster": sg("owned-by-cluster", {"kubernetes.io/cluster/trn-specdec-eks": "owned"}),
        "eni_cni": eni({"cluster.k8s.amazonaws.com/name": "trn-specdec-eks"}),
        "alb": alb("k8s-owned", {"elbv2.k8s.aws/cluster": "trn-specdec-eks"}),
    }
    foreign = {
        "sg_untagged": sg("someone-elses", {}),
        "sg_other_cluster": sg("other-cluster", {"kubernetes.io/cluster/other-eks": "owned"}),
        "sg_other_deployment": sg("other-deployment", {k: f"{v}-2" for k, v in rendered_tags.items()}),
        "eni_untagged": eni({}),
        "alb": alb("foreign", {"team": "web"}),
        # look-alikes: each differs from an owned resource in one detail the ownership check must read
        "sg_shared": sg("shared-subnet-sg", {"kubernetes.io/cluster/trn-specdec-eks": "shared"}),
        "sg_prefix_cluster": sg("prefix-cluster", {"kubernetes.io/cluster/trn-specdec-eks-2": "owned"}),
        "sg_prefix_deployment": sg("prefix-deployment", {DEPLOYMENT_TAG: "trn-specdec-staging"}),
        "sg_cloudformation": sg(
            "stack-managed", {DEPLOYMENT_TAG: "trn-specdec", CLOUDFORMATION_TAG: "arn:aws:cloudformation:stack/x"}
        ),
        "eni_prefix_cluster": eni({"cluster.k8s.amazonaws.com/name": "trn-specdec-eks-2"}),
        "eni_cloudformation": eni(
            {"cluster.k8s.amazonaws.com/name": "trn-specdec-eks", CLOUDFORMATION_TAG: "arn:aws:cloudformation:x"}
        ),
        "alb_prefix_cluster": alb("k8s-prefix", {"elbv2.k8s.aws/cluster": "trn-specdec-eks-2"}),
    }
    tg = elbv2.create_target_group(
        Name="k8s-owned-tg",
        Protocol="HTTP",
        Port=80,
        VpcId=vpc,
        Tags=[{"Key": "elbv2.k8s.aws/cluster", "Value": "trn-specdec-eks"}],
    )["TargetGroups"][0]["TargetGroupArn"]
    owned["tg"] = tg
    elb.create_load_balancer(
        LoadBalancerName="classic-owned",
        Listeners=[{"Protocol": "tcp", "LoadBalancerPort": 80, "InstancePort": 80}],
        Subnets=[subnets[0]],
        Tags=[{"Key": "kubernetes.io/cluster/trn-specdec-eks", "Value": "owned"}],
    )
    elb.create_load_balancer(
        LoadBalancerName="classic-foreign",
        Listeners=[{"Protocol": "tcp", "LoadBalancerPort": 80, "InstancePort": 80}],
        Subnets=[subnets[0]],
    )
    logs.create_log_group(logGroupName="/aws/eks/trn-specdec-eks/cluster")
    return session, owned, foreign


def _state(session):
    ec2, elbv2, elb = (session.client(n) for n in ("ec2", "elbv2", "elb"))
    return {
        "sgs": {g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"]},
        "enis": {e["NetworkInterfaceId"] for e in ec2.describe_network_interfaces()["NetworkInterfaces"]},
        "albs": {lb["LoadBalancerArn"] for lb in elbv2.describe_load_balancers()["LoadBalancers"]},
        "tgs": {t["TargetGroupArn"] for t in elbv2.describe_target_groups()["TargetGroups"]},
        "classic": {lb["LoadBalancerName"] for lb in elb.describe_load_balancers()["LoadBalancerDescriptions"]},
    }


def test_sweep_deletes_only_resources_with_this_deployments_tags(world):
    session, owned, foreign = world
    report = sweep(session, OWNER, log=lambda _: None, retry_delay_s=0)
    after = _state(session)
    assert not report.failed
    for key in ("sg_deployment", "sg_cluster"):
        assert owned[key] not in after["sgs"]
    assert owned["eni_cni"] not in after["enis"]
    assert owned["alb"] not in after["albs"] and owned["tg"] not in after["tgs"]
    assert "classic-owned" not in after["classic"]
    for key in ("sg_untagged", "sg_other_cluster", "sg_other_deployment"):
        assert foreign[key] in after["sgs"]
    assert foreign["eni_untagged"] in after["enis"] and foreign["alb"] in after["albs"]
    for key, kind in (
        ("sg_shared", "sgs"),
        ("sg_prefix_cluster", "sgs"),
        ("sg_prefix_deployment", "sgs"),
        ("sg_cloudformation", "sgs"),
        ("eni_prefix_cluster", "enis"),
        ("eni_cloudformation", "enis"),
        ("alb_prefix_cluster", "albs"),
    ):
        assert foreign[key] in after[kind], f"the sweep deleted the look-alike {key}"
    assert "classic-foreign" in after["classic"]
    assert any("/aws/eks/trn-specdec-eks/cluster" in item for item in report.left_for_you)


def test_dry_run_deletes_nothing_and_lists_the_same_resources(world):
    session, owned, _ = world
    before = _state(session)
    report = sweep(session, OWNER, dry_run=True, log=lambda _: None, retry_delay_s=0)
    assert _state(session) == before
    listed = "\n".join(report.deleted)
    for ident in (owned["sg_deployment"], owned["sg_cluster"], owned["eni_cni"], owned["alb"], "classic-owned"):
        assert ident in listed


def test_cli_reads_the_config_and_exits_zero_on_a_clean_account(aws_env, capsys):
    assert main(["--dry-run"]) == 0
    assert "sweep: 0 would be deleted, 0 failed" in capsys.readouterr().out


def test_a_dry_run_says_would_be_deleted_and_deletes_nothing(aws_env, capsys):
    ec2 = boto3.session.Session(region_name="us-east-2").client("ec2")
    spec = [{"ResourceType": "security-group", "Tags": [{"Key": DEPLOYMENT_TAG, "Value": "trn-specdec"}]}]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    group = ec2.create_security_group(GroupName="g", Description="g", VpcId=vpc, TagSpecifications=spec)["GroupId"]
    assert main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"would delete security group {group}" in out and "sweep: 1 would be deleted, 0 failed" in out
    assert group in {g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"]}


def test_the_cli_exits_nonzero_when_a_deletion_fails(aws_env, capsys, monkeypatch):
    """`make destroy` must not report success while a resource of the deployment remains. moto deletes a group
    in use, so EC2's refusal is injected at the client: every DeleteSecurityGroup answers UnauthorizedOperation."""
    from botocore.exceptions import ClientError

    from cloud import aws

    real_client = aws.session_client

    def refusing_client(session, service, **kwargs):
        client = real_client(session, service, **kwargs)
        if service == "ec2":

            def refuse(**kwargs):
                raise ClientError({"Error": {"Code": "UnauthorizedOperation"}}, "DeleteSecurityGroup")

            client.delete_security_group = refuse
        return client

    monkeypatch.setattr(aws, "session_client", refusing_client)
    ec2 = boto3.session.Session(region_name="us-east-2").client("ec2")
    spec = [{"ResourceType": "security-group", "Tags": [{"Key": DEPLOYMENT_TAG, "Value": "trn-specdec"}]}]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    group = ec2.create_security_group(GroupName="g", Description="g", VpcId=vpc, TagSpecifications=spec)["GroupId"]
    assert main([]) == 1
    captured = capsys.readouterr()
    assert "sweep: 0 deleted, 1 failed" in captured.out
    assert f"not deleted: security group {group}: UnauthorizedOperation" in captured.err


def test_a_group_still_in_use_is_tried_each_round_and_reported_after_the_last(aws_env, monkeypatch):
    """A security group a draining load balancer still holds answers DependencyViolation: the sweep tries it again
    next round (deleting it once freed) and reports one still held after the last round as failed, never leaves it
    unsaid. moto deletes a group in use, so EC2's answer is injected at the client."""
    from botocore.exceptions import ClientError

    from cloud import aws

    ec2 = boto3.session.Session(region_name="us-east-2").client("ec2")
    spec = [{"ResourceType": "security-group", "Tags": [{"Key": DEPLOYMENT_TAG, "Value": "trn-specdec"}]}]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    freed, held = (
        ec2.create_security_group(GroupName=n, Description=n, VpcId=vpc, TagSpecifications=spec)["GroupId"]
        for n in ("freed", "held")
    )
    tries: dict[str, int] = {freed: 0, held: 0}
    real_client = aws.session_client

    def draining_client(session, service, **kwargs):
        client = real_client(session, service, **kwargs)
        if service == "ec2":
            delete = client.delete_security_group

            def in_use(GroupId, **kwargs):
                tries[GroupId] += 1
                if GroupId == held or tries[GroupId] < 2:
                    raise ClientError({"Error": {"Code": "DependencyViolation"}}, "DeleteSecurityGroup")
                return delete(GroupId=GroupId, **kwargs)

            client.delete_security_group = in_use
        return client

    monkeypatch.setattr(aws, "session_client", draining_client)
    report = sweep(
        boto3.session.Session(region_name="us-east-2"), OWNER, log=lambda _: None, retries=3, retry_delay_s=0
    )
    assert tries == {freed: 2, held: 3}
    assert report.deleted == [f"security group {freed}"]
    assert report.failed == [f"security group {held}: DependencyViolation"]


def test_cli_refuses_while_a_stack_of_this_deployment_exists(aws_env, capsys):
    cfn = boto3.session.Session(region_name="us-east-2").client("cloudformation")
    cfn.create_stack(StackName="TrnSpecdec-Cluster", TemplateBody='{"Resources": {"T": {"Type": "AWS::SNS::Topic"}}}')
    ec2 = boto3.session.Session(region_name="us-east-2").client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    spec = [{"ResourceType": "security-group", "Tags": [{"Key": DEPLOYMENT_TAG, "Value": "trn-specdec"}]}]
    group = ec2.create_security_group(GroupName="g", Description="g", VpcId=vpc, TagSpecifications=spec)["GroupId"]

    assert main([]) == 2
    err = capsys.readouterr().err
    assert "refusing to run while these stacks exist: TrnSpecdec-Cluster (CREATE_COMPLETE)" in err
    assert group in {g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"]}

    assert main(["--force"]) == 2  # --force alone is not enough
    assert "--force needs --reason" in capsys.readouterr().err

    assert main(["--force", "--reason", "stack stuck in DELETE_FAILED on our security group"]) == 0
    assert "because: stack stuck" in capsys.readouterr().out
    assert group not in {g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"]}


def test_cli_without_credentials_says_so_in_one_sentence(monkeypatch, capsys, tmp_path):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # never leaves the machine
    assert main(["--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "check your credentials" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("tags", "owned"),
    [
        ({DEPLOYMENT_TAG: "trn-specdec"}, True),
        ({DEPLOYMENT_TAG: "trn-specdec-staging"}, False),
        ({"kubernetes.io/cluster/trn-specdec-eks": "owned"}, True),
        ({"kubernetes.io/cluster/trn-specdec-eks": "shared"}, False),
        ({"kubernetes.io/cluster/trn-specdec-eks-2": "owned"}, False),
        ({"elbv2.k8s.aws/cluster": "trn-specdec-eks"}, True),
        ({"elbv2.k8s.aws/cluster": "trn-specdec-eks-2"}, False),
        ({"cluster.k8s.amazonaws.com/name": "trn-specdec-eks"}, True),
        ({"cluster.k8s.amazonaws.com/name": "trn-specdec-eks-2"}, False),
        ({"eks:cluster-name": "trn-specdec-eks"}, True),
        ({"eks:cluster-name": "trn-specdec-eks-2"}, False),
        ({DEPLOYMENT_TAG: "trn-specdec", CLOUDFORMATION_TAG: "arn:aws:cloudformation:x"}, False),
        ({}, False),
    ],
)
def test_ownership_reads_exact_tag_values(tags, owned):
    """EC2 filters narrow the listing server-side; this is the check that decides, for every service."""
    assert OWNER.owns(tags) is owned
