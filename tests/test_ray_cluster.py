"""The Ray cluster-launcher config of a matrix's EC2 hardware, checked with Ray's own schema
offline, and the `matrix cluster-config` command (its AMI from SSM on moto)."""

from __future__ import annotations

import shlex

import boto3
import pytest
import yaml

from orchestrator.providers.aws.aws import DLAMI_PARAMETER, default_ami
from orchestrator.providers.aws.network import rules_of, wanted_rules
from orchestrator.providers.aws.ray_cluster import (
    ClusterConfigError,
    cluster_config,
    node_setup,
    validated,
)
from orchestrator.validate import load_spec
from tests.conftest import PROJECT, run_cli, write

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

SWEEP = """
name: p3-vs-c5
aws: {region: us-west-2, instance_profile: matrix-bench-node, max_lifetime_hours: 6}
hardware:
  - {name: c5.18xlarge, kind: ec2, instance_type: c5.18xlarge}
  - {name: p3.8xlarge-4gpu, kind: ec2, instance_type: p3.8xlarge, gpus: 4, spot: true}
  - {name: laptop, kind: local}
stacks: [{name: here, executor: process}]
workloads: [{name: sleep}]
"""


def render(tmp_path, text: str = SWEEP) -> dict:
    spec = load_spec(write(tmp_path / "m.yaml", text))
    return cluster_config(spec, run_id="r1", ami="ami-0123456789abcdef0", key_name="k1",
                          ssh_private_key="~/.ssh/k1.pem",
                          security_group_id="sg-0123456789abcdef0", setup_commands=node_setup())


def test_one_node_type_per_ec2_entry_offering_its_hw_resource_and_gpus(tmp_path):
    config = validated(render(tmp_path))
    types = config["available_node_types"]
    assert set(types) == {"head", "hw-c5-18xlarge", "hw-p3-8xlarge-4gpu"}  # not the laptop
    p3 = types["hw-p3-8xlarge-4gpu"]
    assert p3["resources"] == {"hw:p3.8xlarge-4gpu": 1, "CPU": 32, "GPU": 4}
    assert p3["node_config"]["InstanceType"] == "p3.8xlarge"
    assert p3["node_config"]["InstanceMarketOptions"]["MarketType"] == "spot"
    assert "InstanceMarketOptions" not in types["hw-c5-18xlarge"]["node_config"]
    assert types["head"]["max_workers"] == 0 and p3["min_workers"] == 0


def test_teardown_terminates_and_every_node_has_its_dead_mans_switch(tmp_path):
    config = validated(render(tmp_path))
    assert config["provider"]["cache_stopped_nodes"] is False
    assert config["provider"]["region"] == "us-west-2"
    assert not config.get("docker", {}).get("image")  # cells run in their own images
    for node_type in config["available_node_types"].values():
        node = node_type["node_config"]
        assert node["InstanceInitiatedShutdownBehavior"] == "terminate"
        assert "shutdown -h +360" in node["UserData"]
        assert node["IamInstanceProfile"] == {"Name": "matrix-bench-node"}
        tags = node["TagSpecifications"][0]["Tags"]
        assert {"Key": "matrix-bench-run", "Value": "r1"} in tags
        assert node["SecurityGroupIds"] == ["sg-0123456789abcdef0"]  # Ray makes no group
        assert node["MetadataOptions"] == {"HttpEndpoint": "enabled", "HttpTokens": "required",
                                           "HttpPutResponseHopLimit": 1}
    assert "security_group" not in config["provider"]


def test_rays_schema_rejection_is_a_clear_error(tmp_path):
    config = render(tmp_path)
    config["available_node_types"]["head"]["max_workers"] = "many"
    with pytest.raises(ClusterConfigError, match="Ray rejects the cluster config"):
        validated(config)


def test_ec2_hardware_needs_an_instance_profile(tmp_path):
    from orchestrator.errors import SpecError

    with pytest.raises(SpecError, match=r"aws\.instance_profile"):
        load_spec(write(tmp_path / "m.yaml", SWEEP.replace(
            "instance_profile: matrix-bench-node, ", "")))


def test_the_cli_writes_the_validated_config_and_the_group_it_names(tmp_path, moto_server):
    write(tmp_path / "m.yaml", SWEEP.replace("max_lifetime_hours: 6", "ami: ami-0fedcba98"))
    done = run_cli("cluster-config", "m.yaml", "-o", "cluster.yaml", "--ssh-cidr",
                   "198.51.100.1/32", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load((tmp_path / "cluster.yaml").read_text())
    assert config["available_node_types"]["head"]["node_config"]["ImageId"] == "ami-0fedcba98"
    (group,) = {g for t in config["available_node_types"].values()
                for g in t["node_config"]["SecurityGroupIds"]}
    assert "2 EC2 node types, AMI ami-0fedcba98, region us-west-2, security group " \
        f"{group} (SSH from 198.51.100.1/32 only)" in done.stdout
    ec2 = boto3.client("ec2", region_name="us-west-2")
    (held,) = ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"]
    assert held["GroupName"] == "matrix-bench-p3-vs-c5"
    assert rules_of(held) == wanted_rules(group, "198.51.100.1/32")


@pytest.mark.parametrize(("cidr", "why"), [
    ("0.0.0.0/0", "0.0.0.0/0 would open SSH to the internet at large"),
    ("::/0", "::/0 would open SSH to the internet at large"),
    ("8.0.0.0/8", "8.0.0.0/8 would open SSH to the internet at large"),
    # once "would open SSH to the internet at large": it opens nothing, and reaches nothing
    ("127.0.0.0/8", "127.0.0.0/8 is this machine's own (loopback, link-local or "
                    "unspecified), which no EC2 node is reached from"),
    ("not-a-cidr", "'not-a-cidr' is not an address range"),
    ("198.51.100.1/24", "'198.51.100.1/24' has host bits set: write 198.51.100.0/24")])
def test_the_cli_refuses_an_ssh_range_it_would_not_validate(tmp_path, cidr, why):
    write(tmp_path / "m.yaml", SWEEP.replace("max_lifetime_hours: 6", "ami: ami-0fedcba98"))
    done = run_cli("cluster-config", "m.yaml", "-o", "cluster.yaml", "--ssh-cidr", cidr,
                   cwd=tmp_path)
    assert done.returncode == 2 and not (tmp_path / "cluster.yaml").exists()
    assert done.stderr.startswith(f"error: --ssh-cidr {why}"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_nodes_install_exactly_the_driver_versions():
    from importlib import metadata

    (command,) = node_setup()
    words = shlex.split(command)
    assert words[:5] == ["python3", "-m", "pip", "install", "--user"]
    requirements = [w for w in words[5:] if not w.startswith("-")]
    assert requirements == [f"{req}=={metadata.version(dist)}" for dist, req in (
        ("ray", "ray[default]"), ("docker", "docker"), ("pydantic", "pydantic"),
        ("PyYAML", "pyyaml"), ("boto3", "boto3"))]


def test_without_an_ami_the_cli_asks_ssm_and_says_clearly_when_it_cannot(tmp_path,
                                                                         moto_server):
    write(tmp_path / "m.yaml", SWEEP)  # moto has no Deep Learning AMI parameter
    done = run_cli("cluster-config", "m.yaml", "-o", "cluster.yaml", "--ssh-cidr",
                   "198.51.100.1/32", cwd=tmp_path)
    assert done.returncode == 2 and not (tmp_path / "cluster.yaml").exists()
    assert f"cannot resolve the Deep Learning Base AMI from SSM parameter {DLAMI_PARAMETER}" \
        in done.stderr and "(or set aws.ami)" in done.stderr


def test_the_default_ami_is_the_ssm_parameters_value():
    from botocore.stub import Stubber

    ssm = boto3.client("ssm", region_name="us-east-1", aws_access_key_id="x",
                       aws_secret_access_key="x")
    with Stubber(ssm) as stub:
        stub.add_response("get_parameter", {"Parameter": {
            "Name": DLAMI_PARAMETER, "Type": "String", "Value": "ami-0abc", "Version": 7}},
            {"Name": DLAMI_PARAMETER})
        assert default_ami(ssm) == "ami-0abc"


EXAMPLES = [path for path in sorted((PROJECT / "matrix").glob("*.yaml"))
            if "kind: ec2" in path.read_text()]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_every_example_ec2_matrix_renders_a_config_ray_accepts(example):
    spec = load_spec(example)
    config = validated(cluster_config(spec, run_id="r1", ami="ami-0123456789abcdef0",
                                      key_name="k1", ssh_private_key="~/.ssh/k1.pem",
                                      security_group_id="sg-0123456789abcdef0",
                                      setup_commands=node_setup()))
    assert config["provider"]["cache_stopped_nodes"] is False
    ec2 = [h for h in spec.hardware if h.kind == "ec2"]
    assert len(config["available_node_types"]) == len(ec2) + 1  # and the head


def test_the_seed_instance_sets_are_shipped():
    assert {path.name for path in EXAMPLES} >= {"aws_p3.yaml", "aws_modern.yaml"}
    p3 = load_spec(PROJECT / "matrix" / "aws_p3.yaml")
    assert {(h.instance_type, h.gpus) for h in p3.hardware} == {
        ("c5.xlarge", 0), ("c5.18xlarge", 0), ("p3.8xlarge", 1), ("p3.8xlarge", 4),
        ("p3.16xlarge", 8)}  # seed 002's
