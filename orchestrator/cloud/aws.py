"""The tool's own boto3 calls (boto3 is imported by the callers' clients, lazily).

So far: the AMI that EC2 nodes boot. Prices, quotas, tagging sweeps and S3 come with the
rest of the EC2 issue.
"""

from __future__ import annotations

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
