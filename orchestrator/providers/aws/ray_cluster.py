"""The Ray cluster-launcher config of a matrix's EC2 hardware (docs/ARCHITECTURE.md: EC2 model).

One node type per EC2 hardware entry, offering one unit of `hw:<name>` (a node runs one
cell at a time) and the entry's GPUs, plus a small head. Ray runs on the hosts of a GPU
AMI with Docker; cells run in their stack images through the docker executor, so there is
no Ray `docker:` section. Teardown must terminate, never stop: `cache_stopped_nodes` is
off, instances terminate when they shut down, and each shuts itself down after the
matrix's `max_lifetime_hours` whatever happens to the driver (a dead man's switch).
Every node type launches into the run's own security group (providers/aws/network.py), so Ray's
bootstrap makes none, and every node requires IMDSv2 tokens.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from orchestrator.errors import MatrixError
from orchestrator.providers.aws.catalogue import EC2_INSTANCE_TYPES
from orchestrator.providers.aws.network import RUN_TAG
from orchestrator.providers.aws.settings import AwsSection, aws_section, ec2_settings
from orchestrator.spec.model import Hardware, MatrixSpec

HEAD_TYPE = "head"
SSH_USER = "ubuntu"  # the Deep Learning Base AMIs are Ubuntu


class ClusterConfigError(MatrixError):
    """A matrix whose EC2 part cannot become a cluster config."""


def node_type_name(hardware: Hardware) -> str:
    """Ray node-type names allow letters, digits, '-' and '_'."""
    return "hw-" + re.sub(r"[^A-Za-z0-9_-]", "-", hardware.name)


def cluster_config(spec: MatrixSpec, run_id: str, ami: str, key_name: str,
                   ssh_private_key: str, security_group_id: str, setup_commands: list[str]
                   ) -> dict[str, Any]:
    """The cluster-launcher config (a dict, as Ray reads its YAML) for `spec`'s EC2 hardware,
    every node in the security group `security_group_id` (`network.ensure_security_group`)."""
    aws = aws_section(spec)
    ec2 = [h for h in spec.hardware if h.kind == "ec2"]
    if aws is None or aws.instance_profile is None or not ec2:
        raise ClusterConfigError("the matrix has no EC2 hardware with aws.instance_profile set")
    def node_config(instance_type: str, spot: bool) -> dict[str, Any]:
        return _node_config(aws, instance_type, ami, key_name, run_id, spot,
                            security_group_id)

    node_types = {HEAD_TYPE: {
        "node_config": node_config(aws.head_instance_type, spot=False),
        "resources": {}, "min_workers": 0, "max_workers": 0}}
    for hardware in ec2:
        instance = EC2_INSTANCE_TYPES[str(hardware.instance_type)]
        node_types[node_type_name(hardware)] = {
            "node_config": node_config(instance.name, spot=ec2_settings(hardware).spot),
            "resources": {f"hw:{hardware.name}": 1, "CPU": instance.vcpus,
                          "GPU": hardware.gpus},
            "min_workers": 0, "max_workers": aws.max_workers,
        }
    return {
        "cluster_name": f"matrix-bench-{run_id}",
        "max_workers": aws.max_workers * len(ec2),
        "idle_timeout_minutes": aws.idle_timeout_minutes,
        "upscaling_speed": 1.0,
        "provider": {
            "type": "aws", "region": aws.region,
            # Stopped nodes keep their EBS volumes, and those keep billing: terminate.
            "cache_stopped_nodes": False,
        },
        "auth": {"ssh_user": SSH_USER, "ssh_private_key": ssh_private_key},
        "available_node_types": node_types,
        "head_node_type": HEAD_TYPE,
        "setup_commands": setup_commands,
        # Ray's AWS default serves the dashboard (which runs jobs) on 0.0.0.0; here it
        # answers on the head's loopback only, reached through the run's SSH tunnel.
        "head_start_ray_commands": [
            "ray stop",
            "ulimit -n 65536; ray start --head --port=6379 --object-manager-port=8076 "
            "--autoscaling-config=~/ray_bootstrap_config.yaml --dashboard-host=127.0.0.1",
        ],
    }


def _node_config(aws: AwsSection, instance_type: str, ami: str, key_name: str, run_id: str,
                 spot: bool, security_group_id: str) -> dict[str, Any]:
    profile_key = "Arn" if str(aws.instance_profile).startswith("arn:") else "Name"
    minutes = max(1, round(aws.max_lifetime_hours * 60))
    config: dict[str, Any] = {
        "InstanceType": instance_type,
        "ImageId": ami,
        "KeyName": key_name,
        "IamInstanceProfile": {profile_key: aws.instance_profile},
        "InstanceInitiatedShutdownBehavior": "terminate",
        # Given, so Ray's bootstrap makes no group (its own would take SSH from anywhere).
        "SecurityGroupIds": [security_group_id],
        # IMDSv2 only: the role's credentials need a session token, which a request forged
        # through a proxy or a redirect cannot get. One hop: the host's processes (Ray's
        # autoscaler, the ECR pull) reach it; a cell's container, which has no network and
        # needs no credentials, could not even on a bridge.
        "MetadataOptions": {"HttpEndpoint": "enabled", "HttpTokens": "required",
                            "HttpPutResponseHopLimit": 1},
        # The dead man's switch: shut down (so terminate) after the lifetime, whatever the
        # driver does. Booted by cloud-init as the instance's first user data.
        "UserData": f"#!/bin/bash\nshutdown -h +{minutes} 'matrix-bench max lifetime'\n",
        "TagSpecifications": [{"ResourceType": kind, "Tags": [
            {"Key": RUN_TAG, "Value": run_id}]} for kind in ("instance", "volume")],
        "BlockDeviceMappings": [{"DeviceName": "/dev/sda1", "Ebs": {
            "VolumeSize": 200, "VolumeType": "gp3", "DeleteOnTermination": True}}],
    }
    if aws.subnet_id:
        config["SubnetIds"] = [aws.subnet_id]
    if spot:
        config["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": {
            "SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}}
    return config


# What a node installs beside Ray, each at the version the driver runs (import name first).
NODE_PACKAGES = {"ray": "ray[default]", "docker": "docker", "pydantic": "pydantic",
                 "PyYAML": "pyyaml", "boto3": "boto3"}


def node_setup() -> list[str]:
    """What every node installs on the AMI's Python: this Ray and the cell runner's needs,
    pinned to the versions this driver runs, so a node never drifts from its driver. The
    tool's code reaches the head with the sweep's Ray job (its working_dir)."""
    from importlib import metadata

    pins = []
    for distribution, requirement in NODE_PACKAGES.items():
        try:
            pins.append(f"{requirement}=={metadata.version(distribution)}")
        except metadata.PackageNotFoundError:
            raise ClusterConfigError(f"{distribution} is not installed here, and the nodes "
                                     "install the driver's version: pip install "
                                     "'matrix-bench[cloud]'") from None
    return [shlex.join(["python3", "-m", "pip", "install", "--user", "-q", *pins])]


def validated(config: dict[str, Any]) -> dict[str, Any]:
    """The config filled with Ray's defaults and checked against Ray's own schema, offline;
    ClusterConfigError with Ray's message when it does not pass."""
    import jsonschema
    from ray.autoscaler._private.util import prepare_config, validate_config

    try:
        prepared = prepare_config(config)
        validate_config(prepared)
    except (jsonschema.ValidationError, ValueError) as exc:
        raise ClusterConfigError(f"Ray rejects the cluster config: "
                                 f"{str(exc).splitlines()[0]}") from None
    return prepared
