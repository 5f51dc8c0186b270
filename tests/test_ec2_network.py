"""What a launched EC2 cluster exposes, read back from what AWS (moto) holds after Ray's own
bootstrap has run: SSH from `aws.ssh_cidr` alone, Ray's traffic among the run's nodes, no
other group, and IMDSv2 required on every node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from orchestrator.providers.aws.aws import AwsError
from orchestrator.providers.aws.cluster import Clients, ec2_cluster, prepare
from orchestrator.providers.aws.network import ensure_security_group
from orchestrator.spec.model import MatrixSpec
from orchestrator.validate import load_spec
from tests.aws_env import (
    LoopbackLauncher,
    forget_rays_aws_clients,
    instances_of,
    live,
    moto_account,
)
from tests.conftest import run_cli, write

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

SSH_FROM = "203.0.113.7/32"


@pytest.fixture
def aws(moto_server, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # the run's key file goes to ~/.ssh
    ec2 = boto3.client("ec2", region_name="us-east-1")
    return ec2, moto_account(ec2, boto3.client("iam", region_name="us-east-1"))


def spec_of(tmp_path: Path, ami: str, aws_extra: str = "") -> MatrixSpec:
    return load_spec(write(tmp_path / "m.yaml", f"""
        name: exposure
        aws: {{region: us-east-1, ami: {ami}, instance_profile: matrix-bench-node,
               ssh_cidr: "{SSH_FROM}"{aws_extra}}}
        hardware:
          - {{name: node-a, kind: ec2, instance_type: c5.xlarge}}
          - {{name: node-b, kind: ec2, instance_type: c5.4xlarge, spot: true}}
        stacks: [{{name: here, executor: process}}]
        workloads: [{{name: sleep}}]
        """))


def ingress(group: dict[str, Any]) -> set[tuple[Any, ...]]:
    """Each inbound rule as (protocol, from port, to port, source), as AWS lists them."""
    found = set()
    for perm in group["IpPermissions"]:
        ports = (perm["IpProtocol"], perm.get("FromPort"), perm.get("ToPort"))
        found |= {(*ports, r["CidrIp"]) for r in perm.get("IpRanges", [])}
        found |= {(*ports, r["CidrIpv6"]) for r in perm.get("Ipv6Ranges", [])}
        found |= {(*ports, r["GroupId"]) for r in perm.get("UserIdGroupPairs", [])}
        found |= {(*ports, r["PrefixListId"]) for r in perm.get("PrefixListIds", [])}
    return found


def groups_of(ec2: Any, instances: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ids = sorted({g["GroupId"] for i in instances for g in i["SecurityGroups"]})
    return ec2.describe_security_groups(GroupIds=ids)["SecurityGroups"]


def cluster_groups(ec2: Any) -> list[str]:
    """Every group a launch could have made: the tool's and Ray's (ray-autoscaler-*)."""
    return sorted(g["GroupName"] for g in ec2.describe_security_groups()["SecurityGroups"]
                  if g["GroupName"].startswith(("matrix-bench-", "ray-autoscaler-")))


def test_a_launched_cluster_takes_ssh_from_ssh_cidr_alone_and_requires_imdsv2(aws, tmp_path):
    ec2, ami = aws
    launcher = LoopbackLauncher("http://127.0.0.1:1")  # Ray's real bootstrap_aws, then nodes
    with ec2_cluster(spec_of(tmp_path, ami), "exposure", tmp_path, launcher,
                     Clients.for_region("us-east-1"), say=print):
        instances = [i for i in instances_of(ec2, "exposure")
                     if i["InstanceId"] in live(instances_of(ec2, "exposure"))]
        assert len(instances) == 3  # the head and one node per EC2 hardware entry
        (group,) = groups_of(ec2, instances)  # one group, the run's, on every node
        assert group["GroupName"] == "matrix-bench-exposure"
        assert ingress(group) == {("tcp", 22, 22, SSH_FROM),
                                  ("-1", None, None, group["GroupId"])}
        assert cluster_groups(ec2) == ["matrix-bench-exposure"]  # Ray made none of its own
        for instance in instances:
            options = instance["MetadataOptions"]
            assert options["HttpTokens"] == "required", instance["InstanceId"]
            assert options["HttpPutResponseHopLimit"] == 1
            assert options["HttpEndpoint"] == "enabled"
    assert cluster_groups(ec2) == []  # and the teardown removed it


def test_rays_bootstrap_of_the_cli_config_adds_no_rule_and_no_group(aws, tmp_path):
    from ray.autoscaler._private.aws.config import bootstrap_aws
    from ray.autoscaler._private.util import prepare_config

    ec2, ami = aws
    spec_of(tmp_path, ami)  # writes m.yaml
    done = run_cli("cluster-config", "m.yaml", "-o", "cluster.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load((tmp_path / "cluster.yaml").read_text())
    (before,) = ec2.describe_security_groups(
        Filters=[{"Name": "group-name", "Values": ["matrix-bench-exposure"]}])["SecurityGroups"]
    forget_rays_aws_clients()
    bootstrapped = bootstrap_aws(prepare_config(config))  # what `ray up cluster.yaml` does first
    assert {g for t in bootstrapped["available_node_types"].values()
            for g in t["node_config"]["SecurityGroupIds"]} == {before["GroupId"]}
    (after,) = ec2.describe_security_groups(GroupIds=[before["GroupId"]])["SecurityGroups"]
    assert ingress(after) == ingress(before) == {("tcp", 22, 22, SSH_FROM),
                                                 ("-1", None, None, before["GroupId"])}
    assert cluster_groups(ec2) == ["matrix-bench-exposure"]


def test_a_leftover_group_open_to_the_world_is_put_right(aws):
    ec2, _ = aws
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]
    group = ec2.create_security_group(GroupName="matrix-bench-old", Description="as Ray left it",
                                      VpcId=vpc["VpcId"])["GroupId"]
    ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
         "IpRanges": [{"CidrIp": "0.0.0.0/0"}, {"CidrIp": SSH_FROM}]},
        {"IpProtocol": "tcp", "FromPort": 8265, "ToPort": 8265,
         "Ipv6Ranges": [{"CidrIpv6": "::/0"}]}])
    assert ensure_security_group(ec2, "old", "198.51.100.9", None) == group
    (held,) = ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"]
    assert ingress(held) == {("tcp", 22, 22, "198.51.100.9/32"), ("-1", None, None, group)}


def test_the_group_is_made_in_the_vpc_of_aws_subnet_id(aws, tmp_path):
    ec2, ami = aws
    vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.20.1.0/24")["Subnet"]["SubnetId"]
    ec2.modify_subnet_attribute(SubnetId=subnet, MapPublicIpOnLaunch={"Value": True})
    launcher = LoopbackLauncher("http://127.0.0.1:1")
    spec = spec_of(tmp_path, ami, f", subnet_id: {subnet}")
    with ec2_cluster(spec, "in-subnet", tmp_path, launcher, Clients.for_region("us-east-1"),
                     say=print):
        instances = instances_of(ec2, "in-subnet")
        assert {i["SubnetId"] for i in instances} == {subnet}
        (group,) = groups_of(ec2, instances)
        assert group["VpcId"] == vpc and ingress(group) == {
            ("tcp", 22, 22, SSH_FROM), ("-1", None, None, group["GroupId"])}


def test_without_a_default_vpc_or_a_subnet_the_launch_stops_in_one_line(aws, tmp_path):
    ec2, ami = aws
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]
    for subnet in ec2.describe_subnets(Filters=[{"Name": "vpc-id",
                                                 "Values": [vpc["VpcId"]]}])["Subnets"]:
        ec2.delete_subnet(SubnetId=subnet["SubnetId"])
    ec2.delete_vpc(VpcId=vpc["VpcId"])
    with pytest.raises(AwsError, match=r"no default VPC: set aws\.subnet_id"):
        prepare(spec_of(tmp_path, ami), "no-vpc", tmp_path, Clients.for_region("us-east-1"))
    assert not (tmp_path / ".ssh" / "matrix-bench-no-vpc.pem").exists()  # nothing made
    assert ec2.describe_key_pairs()["KeyPairs"] == []
