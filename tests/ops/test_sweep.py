"""The teardown sweep against a real EC2/ELB/Logs API on loopback (moto server): it deletes what carries
this deployment's tags and leaves everything else alone."""

from __future__ import annotations

import boto3
import pytest

from ops.sweep import Ownership, main, sweep

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
    assert "sweep: 0 deleted, 0 failed" in capsys.readouterr().out
