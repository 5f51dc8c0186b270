"""The tool's own boto3 calls (boto3 is imported by the callers' clients, lazily).

The AMI that EC2 nodes boot, this machine's public address (the one SSH ingress), and ECR
credentials for image pushes and pulls. Prices, quotas,
the orphan sweep and S3 have modules of their own beside this one.
"""

from __future__ import annotations

import contextlib
from typing import Any

from orchestrator.errors import MatrixError

# AWS Deep Learning Base AMI (Ubuntu 22.04): NVIDIA driver, Docker, NVIDIA container toolkit.
DLAMI_PARAMETER = ("/aws/service/deeplearning/ami/x86_64/"
                   "base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id")


class AwsError(MatrixError):
    """An AWS call that cannot give the tool what it needs; the message says which."""


def default_ami(ssm: Any) -> str:
    """The newest Deep Learning Base AMI of the client's region, from its public SSM parameter."""
    try:
        return str(ssm.get_parameter(Name=DLAMI_PARAMETER)["Parameter"]["Value"])
    except Exception as exc:  # botocore's ClientError and its no-credentials errors
        raise AwsError(f"cannot resolve the Deep Learning Base AMI from SSM parameter "
                       f"{DLAMI_PARAMETER}: {str(exc).splitlines()[0]} (or set aws.ami)"
                       ) from None


def is_ecr(registry: str) -> bool:
    return ".dkr.ecr." in registry.partition("/")[0]


def ecr_auth(registry: str, for_push: bool = True) -> dict[str, str]:
    """Docker credentials for an ECR registry from boto3; a push first creates the repository
    if needed (a node that pulls only reads). The token is handed to the engine and never
    printed or stored."""
    import base64

    import boto3

    host, _, repository = registry.partition("/")
    region = host.split(".")[3]
    ecr = boto3.client("ecr", region_name=region)
    if for_push:
        with contextlib.suppress(ecr.exceptions.RepositoryAlreadyExistsException):
            ecr.create_repository(repositoryName=repository.split("@")[0])
    token = ecr.get_authorization_token()["authorizationData"][0]["authorizationToken"]
    username, password = base64.b64decode(token).decode().split(":", 1)
    return {"username": username, "password": password}


def public_cidr() -> str:
    """This machine's public IPv4 address as a /32: the only source SSH ingress allows."""
    import ipaddress
    import urllib.request

    try:
        with urllib.request.urlopen("https://checkip.amazonaws.com", timeout=10) as answer:
            address = ipaddress.IPv4Address(answer.read().decode().strip())
    except (OSError, ValueError) as exc:
        raise AwsError(f"cannot find this machine's public address ({exc}): set aws.ssh_cidr "
                       "to the address the nodes may accept SSH from") from None
    return f"{address}/32"
