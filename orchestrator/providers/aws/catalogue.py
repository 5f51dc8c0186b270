"""EC2's catalogue, the aws provider's own: the instance types cells may name, with
their CPUs, memory and GPUs (`EC2_INSTANCE_TYPES`, shipped; `described_instance_types`
asks AWS), and which names are instance types and regions at all. The core asks it only
through the provider (provider.py: `hardware_problem`, `host_memory_gib`) and an ec2
entry's settings (settings.py: `Ec2Settings.instance_gpu_model`). Light: no SDK at import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class InstanceType:
    """An EC2 instance type as cells see it: its CPUs, memory and GPUs."""

    name: str
    vcpus: int
    memory_gib: float
    gpus: int = 0
    gpu_model: str | None = None  # as the driver names it (hardware/peaks.py)
    gpu_memory_gib: float | None = None  # per GPU
    # the network bandwidth EC2 states for it, Gbit/s (its "up to" figure where it bursts):
    # what a cell across nodes' bus bandwidth is judged against
    network_gbps: float | None = None


# Shipped, from the EC2 instance-type pages (accelerated computing and compute optimized;
# network bandwidth from their "Network bandwidth (Gbps)" column, as of 2026-11);
# describe_instance_types() refreshes these fields where credentials exist.
EC2_INSTANCE_TYPES: dict[str, InstanceType] = {t.name: t for t in (
    InstanceType("m5.large", 2, 8, network_gbps=10),  # the default head node
    InstanceType("c5.xlarge", 4, 8, network_gbps=10),
    InstanceType("c5.4xlarge", 16, 32, network_gbps=10),
    InstanceType("c5.18xlarge", 72, 144, network_gbps=25),
    InstanceType("p3.2xlarge", 8, 61, 1, "Tesla V100-SXM2-16GB", 16, network_gbps=10),
    InstanceType("p3.8xlarge", 32, 244, 4, "Tesla V100-SXM2-16GB", 16, network_gbps=10),
    InstanceType("p3.16xlarge", 64, 488, 8, "Tesla V100-SXM2-16GB", 16, network_gbps=25),
    InstanceType("p3dn.24xlarge", 96, 768, 8, "Tesla V100-SXM2-32GB", 32, network_gbps=100),
    InstanceType("g4dn.xlarge", 4, 16, 1, "Tesla T4", 16, network_gbps=25),
    InstanceType("g4dn.12xlarge", 48, 192, 4, "Tesla T4", 16, network_gbps=50),
    InstanceType("g5.xlarge", 4, 16, 1, "NVIDIA A10G", 24, network_gbps=10),
    InstanceType("g5.12xlarge", 48, 192, 4, "NVIDIA A10G", 24, network_gbps=40),
    InstanceType("g6.xlarge", 4, 16, 1, "NVIDIA L4", 24, network_gbps=10),
    InstanceType("g6.12xlarge", 48, 192, 4, "NVIDIA L4", 24, network_gbps=40),
    InstanceType("p4d.24xlarge", 96, 1152, 8, "NVIDIA A100-SXM4-40GB", 40, network_gbps=400),
    InstanceType("p5.48xlarge", 192, 2048, 8, "NVIDIA H100 80GB HBM3", 80, network_gbps=3200),
)}


def instance_type_problem(name: str, gpus: int) -> str | None:
    """Why `gpus` GPUs of EC2 instance type `name` cannot be had, or None."""
    known = EC2_INSTANCE_TYPES.get(name)
    if known is None:
        return (f"unknown EC2 instance type {name!r} (the catalogue knows: "
                f"{', '.join(EC2_INSTANCE_TYPES)})")
    if gpus > known.gpus:
        has = f"has {known.gpus} GPU{'s' if known.gpus != 1 else ''}" if known.gpus else \
            "has no GPU"
        return f"{name} {has}, the entry asks for gpus: {gpus}"
    return None


def region_problem(region: str) -> str | None:
    """Why `region` is no AWS region, or None: judged by botocore's endpoint data where the
    cloud extra is installed, else by the shape of a region name."""
    try:
        import botocore.session
    except ImportError:
        if re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d", region):
            return None
        return f"{region!r} is not an AWS region name (e.g. us-east-1)"
    session = botocore.session.get_session()
    known = {r for partition in session.get_available_partitions()
             for r in session.get_available_regions("ec2", partition_name=partition)}
    if region in known:
        return None
    return f"unknown AWS region {region!r} (e.g. us-east-1, us-west-2, eu-west-1)"


def described_instance_types(ec2: Any, names: list[str]) -> dict[str, InstanceType]:
    """The named types as `describe_instance_types` reports them (an EC2 client from boto3);
    types the region does not offer are left out. tests/test_ec2_catalogue.py holds the
    shipped catalogue above against it, so a wrong vCPU or memory figure cannot hide."""
    found: dict[str, InstanceType] = {}
    paginator = ec2.get_paginator("describe_instance_types")
    for page in paginator.paginate(Filters=[{"Name": "instance-type", "Values": names}]):
        for item in page["InstanceTypes"]:
            gpus = item.get("GpuInfo", {}).get("Gpus", [])
            gpu = gpus[0] if gpus else None
            shipped = EC2_INSTANCE_TYPES.get(item["InstanceType"])
            found[item["InstanceType"]] = InstanceType(
                name=item["InstanceType"], vcpus=item["VCpuInfo"]["DefaultVCpus"],
                memory_gib=item["MemoryInfo"]["SizeInMiB"] / 1024,
                gpus=sum(g["Count"] for g in gpus),
                # AWS names the model ("V100"); the shipped name is the driver's, finer.
                gpu_model=(shipped.gpu_model if shipped and shipped.gpu_model else
                           f"{gpu['Manufacturer']} {gpu['Name']}" if gpu else None),
                gpu_memory_gib=gpu["MemoryInfo"]["SizeInMiB"] / 1024 if gpu else None,
                network_gbps=stated_gbps(item.get("NetworkInfo", {}).get("NetworkPerformance")))
    return found


def stated_gbps(performance: object) -> float | None:
    """EC2's "Up to 10 Gigabit", "3200 Gigabit", "4x 100 Gigabit" (four cards) as Gbit/s
    (the "up to" figure: a bound); None for a wording without a figure ("Moderate")."""
    found = re.search(r"(?:(\d+)\s*x\s*)?(\d+(?:\.\d+)?)\s*Gigabit", str(performance or ""))
    if found is None:
        return None
    return float(found.group(1) or 1) * float(found.group(2))
