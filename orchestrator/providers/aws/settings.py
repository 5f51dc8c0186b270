"""What a matrix says to AWS: a `kind: ec2` hardware entry's own keys (`Ec2Settings`, which
the core gathers from the entry's flat keys), and the `aws:` section, judged before anything
reaches AWS: a real region, an AMI id, an SSH source that is not the internet at large, an
S3 URI. The validation step (validate/matrix.py) turns a problem into one located line."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import Field

from orchestrator.providers.aws.catalogue import EC2_INSTANCE_TYPES, region_problem
from orchestrator.providers.aws.network import ssh_cidr_problem
from orchestrator.spec.entry_settings import KindSettings, ProviderSection

if TYPE_CHECKING:
    from orchestrator.spec.model import MatrixSpec


class AwsSection(ProviderSection):
    """The matrix's `aws:` section: where and how EC2 hardware runs, one region per matrix
    (docs/aws.md)."""

    region: str = "us-east-1"
    ami: str | None = None  # default: the Deep Learning Base AMI (NVIDIA driver, Docker)
    instance_profile: str | None = None  # the nodes' IAM instance profile, name or ARN
    subnet_id: str | None = None
    head_instance_type: str = "m5.large"
    max_workers: int = Field(default=8, ge=1)  # per EC2 hardware entry
    idle_timeout_minutes: int = Field(default=10, ge=1)
    max_lifetime_hours: float = Field(default=12.0, gt=0, le=24 * 30)  # then nodes shut down
    ssh_cidr: str | None = None  # SSH ingress; default: this machine's address only
    results_uri: str | None = None  # s3://bucket/prefix for the run's results


def aws_section(spec: MatrixSpec) -> AwsSection | None:
    """The matrix's `aws:` section, None where it has none."""
    found = spec.section("aws")
    return found if isinstance(found, AwsSection) else None


class Ec2Settings(KindSettings):
    """An EC2 entry's own keys beside its instance type (a machine size any kind may have)."""

    spot: bool = False  # spot capacity: cheaper, and may be interrupted

    def instance_gpu_model(self, instance_type: str) -> str | None:
        """The GPU of an instance type, as the catalogue names it (the driver's name)."""
        known = EC2_INSTANCE_TYPES.get(instance_type)
        return known.gpu_model if known else None


def ec2_settings(hardware: object) -> Ec2Settings:
    """A `kind: ec2` entry's settings, typed (the provider is only asked of its kind)."""
    settings = getattr(hardware, "settings", None)
    if not isinstance(settings, Ec2Settings):
        raise TypeError(f"{getattr(hardware, 'name', hardware)!r} is not a kind ec2 entry")
    return settings


def aws_of(spec: MatrixSpec) -> AwsSection:
    """The `aws:` section of a matrix with EC2 hardware, which validation required."""
    found = aws_section(spec)
    assert found is not None, "EC2 hardware without an aws: section got past validation"
    return found


def aws_setting_problem(aws: AwsSection) -> tuple[str, str] | None:
    """(the field, what is wrong with it) for the first bad setting, or None."""
    if problem := region_problem(aws.region):
        return "region", problem
    if aws.ami is not None and not re.fullmatch(r"ami-[0-9a-f]{8,17}", aws.ami):
        return "ami", f"{aws.ami!r} is not an AMI id (ami-0123456789abcdef0)"
    if aws.ssh_cidr is not None and (problem := ssh_cidr_problem(aws.ssh_cidr)):
        return "ssh_cidr", problem
    if aws.results_uri is not None and not re.fullmatch(
            r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?", aws.results_uri):
        return "results_uri", f"{aws.results_uri!r} is not an S3 URI (s3://bucket/prefix)"
    return None
