"""Cluster stack: the properties that matter for Trainium2, DRA and a clean teardown."""

from __future__ import annotations

import json

from config.versions import CHARTS, NEURON


def _one(resources: dict) -> dict:
    assert len(resources) == 1, list(resources)
    return next(iter(resources.values()))["Properties"]


def _trn2_nodegroup(synth) -> dict:
    groups = synth.resources("Cluster", "AWS::EKS::Nodegroup")
    (props,) = [r["Properties"] for r in groups.values() if r["Properties"].get("AmiType") == "AL2023_x86_64_NEURON"]
    return props


def test_cluster_runs_the_configured_version_with_logging_and_secret_encryption(synth):
    props = _one(synth.resources("Cluster", "AWS::EKS::Cluster"))
    assert props["Version"] == "1.35"
    assert props["Name"] == "trn-specdec-eks"
    types = {t["Type"] for t in props["Logging"]["ClusterLogging"]["EnabledTypes"]}
    assert types == {"api", "audit", "authenticator", "controllerManager", "scheduler"}
    assert props["EncryptionConfig"][0]["Resources"] == ["secrets"]
    assert "ComputeConfig" not in props or not props["ComputeConfig"].get("Enabled")  # not Auto Mode


def test_kubectl_layer_matches_the_cluster_version(synth, variant_synth, newest_kubernetes_synth):
    for s, version in ((synth, "1.35"), (variant_synth, "1.34"), (newest_kubernetes_synth, "1.36")):
        assert s.config.kubernetes_version == version
        assert _one(s.resources("Cluster", "AWS::EKS::Cluster"))["Version"] == version
        layers = s.resources("Cluster", "AWS::Lambda::LayerVersion")
        descriptions = [r["Properties"].get("Description", "") for r in layers.values()]
        assert any(d.startswith(f"/opt/kubectl/kubectl {version}.") for d in descriptions), descriptions


def test_admin_principal_gets_a_cluster_admin_access_entry(synth):
    entries = [r["Properties"] for r in synth.resources("Cluster", "AWS::EKS::AccessEntry").values()]
    (admin,) = [e for e in entries if e["PrincipalArn"] == synth.config.admin_principal_arn]
    (policy,) = admin["AccessPolicies"]
    assert policy["AccessScope"] == {"Type": "cluster"}
    assert "AmazonEKSClusterAdminPolicy" in json.dumps(policy["PolicyArn"])


def test_trn2_nodegroup_uses_neuron_ami_launch_template_and_taint(synth):
    ng = _trn2_nodegroup(synth)
    assert ng["CapacityType"] == "ON_DEMAND"
    assert ng["Taints"] == [{"Effect": "NO_SCHEDULE", "Key": "aws.amazon.com/neuron", "Value": "true"}]
    assert ng["Labels"] == {"trn-specdec/node-role": "trn2"}
    assert "InstanceTypes" not in ng and "DiskSize" not in ng  # both live in the launch template
    assert ng["ScalingConfig"] == {"MinSize": 1, "DesiredSize": 1, "MaxSize": 2}  # floor 1, ceiling 2
    assert len(ng["Subnets"]) == 1  # one AZ: placement group and EFA need it


def test_trn2_launch_template_sets_instance_disk_imdsv2_and_efa(synth):
    lt = synth.trn2_launch_template()
    assert lt["InstanceType"] == "trn2.48xlarge"
    ebs = lt["BlockDeviceMappings"][0]["Ebs"]
    assert (ebs["VolumeSize"], ebs["VolumeType"], ebs["Encrypted"]) == (1024, "gp3", True)
    assert (ebs["Iops"], ebs["Throughput"]) == (16000, 1000)
    nics = lt["NetworkInterfaces"]
    assert [n["NetworkCardIndex"] for n in nics] == list(range(16))
    assert nics[0]["InterfaceType"] == "efa" and {n["InterfaceType"] for n in nics[1:]} == {"efa-only"}
    assert "Placement" in lt and "InstanceMarketOptions" not in lt
    pg = _one(synth.resources("Cluster", "AWS::EC2::PlacementGroup"))
    assert pg["Strategy"] == "cluster"


def test_capacity_block_variant_targets_the_reservation(variant_synth):
    ng = _trn2_nodegroup(variant_synth)
    assert ng["CapacityType"] == "CAPACITY_BLOCK"
    lt = variant_synth.trn2_launch_template()
    assert lt["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    ebs = lt["BlockDeviceMappings"][0]["Ebs"]
    assert (ebs["Iops"], ebs["Throughput"]) == (6000, 500)
    target = lt["CapacityReservationSpecification"]["CapacityReservationTarget"]
    assert target == {"CapacityReservationId": "cr-0123456789abcdef0"}
    subnets = variant_synth.resources("Cluster", "AWS::EC2::Subnet")
    azs = {k: r["Properties"]["AvailabilityZone"] for k, r in subnets.items()}
    (chosen,) = ng["Subnets"]
    assert azs[chosen["Ref"]] == "us-east-2b"


def test_neuron_dra_chart_is_the_pinned_oci_chart_with_device_plugin_off(synth):
    chart = synth.helm_chart("neuron-helm-chart")
    assert chart["Repository"] == CHARTS[NEURON].repository == "oci://public.ecr.aws/neuron/neuron-helm-chart"
    assert chart["Version"] == CHARTS[NEURON].version
    assert chart["Namespace"] == "kube-system" and chart.get("CreateNamespace") is not True
    values = json.loads(chart["Values"])
    assert values["devicePlugin"] == {"enabled": False}
    assert values["draDriver"]["enabled"] is True
    assert values["npd"] == {"enabled": False} and values["scheduler"] == {"enabled": False}


def test_managed_addons_include_csi_cloudwatch_and_pod_identity_once(synth):
    addons = {
        r["Properties"]["AddonName"]: r["Properties"] for r in synth.resources("Cluster", "AWS::EKS::Addon").values()
    }
    assert set(addons) == {
        "vpc-cni",
        "kube-proxy",
        "coredns",
        "eks-pod-identity-agent",
        "aws-mountpoint-s3-csi-driver",
        "amazon-cloudwatch-observability",
    }
    csi_values = json.loads(addons["aws-mountpoint-s3-csi-driver"]["ConfigurationValues"])
    assert csi_values == {"node": {"tolerateAllTaints": True}}


def test_charts_install_after_the_system_nodes_and_signed_ones_after_the_pod_identity_agent(synth):
    """Every Helm release waits for the system node group; KEDA, the Cluster Autoscaler and Grafana sign their AWS
    calls with Pod Identity, whose agent must run before their pods start, and the DRA driver does not."""
    resources = synth.template("Cluster")["Resources"]
    (system_nodes,) = [
        k
        for k, r in resources.items()
        if r["Type"] == "AWS::EKS::Nodegroup" and r["Properties"]["Labels"] == {"trn-specdec/node-role": "system"}
    ]
    (agent,) = [
        k
        for k, r in resources.items()
        if r["Type"] == "AWS::EKS::Addon" and r["Properties"]["AddonName"] == "eks-pod-identity-agent"
    ]
    waits = {
        r["Properties"]["Release"]: r.get("DependsOn", [])
        for r in resources.values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    }
    assert set(waits) == {"neuron-dra", "keda", "cluster-autoscaler", "grafana"}
    for release, depends_on in waits.items():
        assert system_nodes in depends_on, release
        assert (agent in depends_on) == (release != "neuron-dra"), release


def test_every_node_group_keeps_imds_to_the_node_itself(synth, variant_synth):
    """Hop limit 1: a pod on the pod network cannot fetch an IMDSv2 token, so not the node role either."""
    for s in (synth, variant_synth):
        templates = {k: r["Properties"] for k, r in s.resources("Cluster", "AWS::EC2::LaunchTemplate").items()}
        groups = s.resources("Cluster", "AWS::EKS::Nodegroup").values()
        assert len(groups) == 2
        for group in groups:
            template_id = group["Properties"]["LaunchTemplate"]["Id"]["Ref"]
            metadata = templates[template_id]["LaunchTemplateData"]["MetadataOptions"]
            assert metadata == {"HttpEndpoint": "enabled", "HttpPutResponseHopLimit": 1, "HttpTokens": "required"}


def test_system_nodes_have_an_encrypted_root_volume(synth):
    (system,) = [
        r["Properties"]
        for r in synth.resources("Cluster", "AWS::EKS::Nodegroup").values()
        if r["Properties"]["AmiType"] == "AL2023_x86_64_STANDARD"
    ]
    assert system["InstanceTypes"] == ["m7i.xlarge"] and "DiskSize" not in system
    template = synth.resources("Cluster", "AWS::EC2::LaunchTemplate")[system["LaunchTemplate"]["Id"]["Ref"]]
    ebs = template["Properties"]["LaunchTemplateData"]["BlockDeviceMappings"][0]["Ebs"]
    assert (ebs["VolumeSize"], ebs["VolumeType"], ebs["Encrypted"]) == (100, "gp3", True)


def test_api_endpoint_is_private_by_default_and_public_only_to_listed_networks(synth, variant_synth):
    access = _one(synth.resources("Cluster", "AWS::EKS::Cluster"))["ResourcesVpcConfig"]
    assert access["EndpointPublicAccess"] is False and access["EndpointPrivateAccess"] is True
    assert "PublicAccessCidrs" not in access
    access = _one(variant_synth.resources("Cluster", "AWS::EKS::Cluster"))["ResourcesVpcConfig"]
    assert access["EndpointPublicAccess"] is True and access["EndpointPrivateAccess"] is True
    assert access["PublicAccessCidrs"] == ["203.0.113.0/24"]


def test_mountpoint_driver_has_no_role_of_its_own(synth):
    """Volumes use authenticationSource: pod; a driver-level role would only widen what a future PV reads."""
    assocs = synth.resources("Cluster", "AWS::EKS::PodIdentityAssociation").values()
    assert "s3-csi-driver-sa" not in {a["Properties"]["ServiceAccount"] for a in assocs}


def test_every_pod_identity_role_trusts_only_its_cluster_namespace_and_service_account(synth):
    """Each association's role is assumable by EKS Pod Identity only with matching session tags."""
    checked = 0
    for stack in synth.templates:
        template = synth.templates[stack]
        for assoc in (r for r in template["Resources"].values() if r["Type"] == "AWS::EKS::PodIdentityAssociation"):
            props = assoc["Properties"]
            role = template["Resources"][props["RoleArn"]["Fn::GetAtt"][0]]["Properties"]
            (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
            assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
            assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
            tags = statement["Condition"]["StringEquals"]
            assert tags["aws:RequestTag/kubernetes-namespace"] == props["Namespace"]
            assert tags["aws:RequestTag/kubernetes-service-account"] == props["ServiceAccount"]
            arn = json.dumps(tags["aws:RequestTag/eks-cluster-arn"])
            assert ":eks:" in arn and ":cluster/" in arn and json.dumps(props["ClusterName"]) in arn, arn
            checked += 1
    assert checked >= 4, checked  # CloudWatch agent plus the workloads' roles


def test_no_resource_is_retained_on_teardown(synth):
    for name, template in synth.templates.items():
        for logical_id, res in template["Resources"].items():
            assert res.get("DeletionPolicy", "Delete") == "Delete", f"{name}/{logical_id} would survive cdk destroy"


def test_no_iam_policy_grants_full_access(synth, variant_synth):
    for s in (synth, variant_synth):
        for template in s.templates.values():
            assert "FullAccess" not in json.dumps(template)


def test_capacity_block_launch_template_attaches_no_placement_group(variant_synth):
    """EC2 already places a Capacity Block in a cluster placement group; a second one must not be attached."""
    assert variant_synth.config.efa_required  # EFA stays on: only the placement group goes
    lt = variant_synth.trn2_launch_template()
    assert "Placement" not in lt
    assert {n["InterfaceType"] for n in lt["NetworkInterfaces"]} == {"efa", "efa-only"}
    assert variant_synth.resources("Cluster", "AWS::EC2::PlacementGroup") == {}


def test_every_namespace_the_add_ons_use_is_refused_as_the_workloads_namespace(synth):
    """Read from the rendered template, not from our constants: an add-on moved to a new namespace must not
    become a namespace the charts may take over (and cover with a default-deny ingress policy)."""
    import pytest

    from config import ConfigError, parse_config
    from tests.conftest import default_config_dict

    used = {
        r["Properties"]["Namespace"]
        for suffix in ("Cluster", "Workloads")
        for r in synth.template(suffix)["Resources"].values()
        if isinstance(r.get("Properties", {}).get("Namespace"), str)
    } - {synth.config.namespace}
    assert {"kube-system", "amazon-cloudwatch"} <= used
    for namespace in sorted(used):
        with pytest.raises(ConfigError, match="is a system namespace"):
            parse_config({**default_config_dict(), "namespace": namespace})


def test_every_vpc_size_the_config_accepts_holds_its_subnets_and_one_bit_less_does_not():
    """Against aws-cdk-lib's own subnet allocator (no synth): per zone count, the smallest accepted VPC builds,
    and the next smaller one fails in CDK (so the rule is as loose as it can be). /19 to /24 crashed synth."""
    import pytest
    from aws_cdk import App, Stack
    from aws_cdk import aws_ec2 as ec2

    from config.catalogue import smallest_vpc_prefix
    from stacks.constructs.network import VPC_SUBNETS

    def build(prefix: int, zones: int) -> None:
        stack = Stack(App(), "Net")
        ec2.Vpc(
            stack,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(f"10.64.0.0/{prefix}"),
            availability_zones=[f"us-east-2{z}" for z in "abcdef"[:zones]],
            nat_gateways=1,
            subnet_configuration=VPC_SUBNETS,
        )

    for zones in range(2, 7):
        prefix = smallest_vpc_prefix(zones)
        build(prefix, zones)
        with pytest.raises(RuntimeError, match="exceeds remaining space"):
            build(prefix + 1, zones)


def test_the_flow_log_role_trusts_the_service_only_for_this_accounts_flow_logs(synth):
    (role,) = [
        r["Properties"]
        for r in synth.resources("Cluster", "AWS::IAM::Role").values()
        if "vpc-flow-logs.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])
    ]
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    condition = statement["Condition"]
    assert condition["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    source_arn = json.dumps(condition["ArnLike"]["aws:SourceArn"])
    assert ":vpc-flow-log/*" in source_arn and "AWS::AccountId" in source_arn


def _private_route_tables(s) -> set[str]:
    """Route tables whose default route goes to a NAT gateway: the private subnets', where nodes and pods live."""
    routes = s.resources("Cluster", "AWS::EC2::Route").values()
    return {r["Properties"]["RouteTableId"]["Ref"] for r in routes if "NatGatewayId" in r["Properties"]}


def test_every_private_route_table_routes_s3_through_the_gateway_endpoint(synth, variant_synth):
    """S3 bytes (checkpoints, artifacts, Mountpoint reads) must not cross the NAT gateway, which bills per GB."""
    for s in (synth, variant_synth):
        private = _private_route_tables(s)
        assert len(private) == len(s.config.network.availability_zones)
        (endpoint,) = s.resources("Cluster", "AWS::EC2::VPCEndpoint").values()
        props = endpoint["Properties"]
        assert props["VpcEndpointType"] == "Gateway"
        assert ".s3" in json.dumps(props["ServiceName"])
        assert {t["Ref"] for t in props["RouteTableIds"]} == private


def test_a_capacity_block_deployment_forwards_ec2s_expiration_warning_for_its_reservation(synth, variant_synth):
    """EC2's own event, 40 minutes before the block ends, to the alarm topic; an on-demand deployment has none."""
    assert synth.resources("Cluster", "AWS::Events::Rule") == {}
    (rule,) = variant_synth.resources("Cluster", "AWS::Events::Rule").values()
    props = rule["Properties"]
    assert props["EventPattern"]["source"] == ["aws.ec2"]
    assert "Capacity Block Expiration Warning" in props["EventPattern"]["detail-type"]
    assert props["EventPattern"]["detail"] == {"capacity-reservation-id": ["cr-0123456789abcdef0"]}
    (target,) = props["Targets"]
    assert target["Arn"] == variant_synth.config.observability.alarm_topic_arn
    assert "<detail-capacity-reservation-id> ends at <detail-end-date>" in json.dumps(target["InputTransformer"])


def test_the_cluster_authenticates_with_access_entries_so_amp_grants_the_scraper_itself(synth, variant_synth):
    """AMP user guide, "Configuring your Amazon EKS cluster" (AMP-collector-how-to.html): with authentication mode API
    or API_AND_CONFIG_MAP, creating a scraper creates its access entry and access policy; the aws-auth recipe
    (ClusterRole bound to `aps-collector-user`) is for ConfigMap clusters. So we render no RBAC for that user."""
    for s in (synth, variant_synth):
        cluster = _one(s.resources("Cluster", "AWS::EKS::Cluster"))
        assert cluster["AccessConfig"]["AuthenticationMode"] in ("API", "API_AND_CONFIG_MAP")
        assert "aps-collector" not in json.dumps(s.templates)
