"""The hardware catalogue: EC2 instance types, datasheet peak FLOP/s per GPU model and
precision, and the local machine as detected (Contracts: hardware catalogue).

Peaks are dense (no sparsity) figures from the vendors' datasheets; rows carry the peak they
were judged against and its source, so a figure above it is caught as implausible.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from orchestrator.host import cpu_model, hostname

TERA = 1e12

# GPU model substring -> peak FLOP/s by precision. fp32 is the plain (non-tensor-core) rate;
# tf32, fp16 and bf16 the dense tensor-core rates. Matched case-insensitively, longest first.
DATASHEET_PEAKS: dict[str, dict[str, float]] = {
    "P100-SXM2": {"fp32": 10.6 * TERA, "fp16": 21.2 * TERA},
    "P100-PCIE": {"fp32": 9.3 * TERA, "fp16": 18.7 * TERA},
    "V100-SXM2": {"fp32": 15.7 * TERA, "fp16": 125 * TERA},
    "V100": {"fp32": 14 * TERA, "fp16": 112 * TERA},
    "T4": {"fp32": 8.1 * TERA, "fp16": 65 * TERA},
    "A10G": {"fp32": 31.2 * TERA, "tf32": 31.2 * TERA, "fp16": 70 * TERA, "bf16": 70 * TERA},
    "L4": {"fp32": 30.3 * TERA, "tf32": 60 * TERA, "fp16": 121 * TERA, "bf16": 121 * TERA},
    "A100": {"fp32": 19.5 * TERA, "tf32": 156 * TERA, "fp16": 312 * TERA, "bf16": 312 * TERA},
    "H100 PCIe": {"fp32": 51 * TERA, "tf32": 378 * TERA, "fp16": 756 * TERA,
                  "bf16": 756 * TERA},
    "H100": {"fp32": 67 * TERA, "tf32": 494.5 * TERA, "fp16": 989.5 * TERA, "bf16": 989.5 * TERA},
    "H200": {"fp32": 67 * TERA, "tf32": 494.5 * TERA, "fp16": 989.5 * TERA, "bf16": 989.5 * TERA},
    "GTX TITAN X": {"fp32": 6.7 * TERA},
    "TITAN RTX": {"fp32": 16.3 * TERA, "fp16": 130 * TERA},
    "RTX 3090": {"fp32": 35.6 * TERA, "tf32": 35.6 * TERA, "fp16": 71 * TERA, "bf16": 71 * TERA},
}


@dataclass(frozen=True)
class InstanceType:
    """An EC2 instance type as cells see it: its CPUs, memory and GPUs."""

    name: str
    vcpus: int
    memory_gib: float
    gpus: int = 0
    gpu_model: str | None = None  # as the driver names it, so datasheet_peak() finds it
    gpu_memory_gib: float | None = None  # per GPU


# Shipped, from the EC2 instance-type pages (accelerated computing and compute optimized);
# describe_instance_types() refreshes these fields where credentials exist.
EC2_INSTANCE_TYPES: dict[str, InstanceType] = {t.name: t for t in (
    InstanceType("m5.large", 2, 8),  # the default head node
    InstanceType("c5.xlarge", 4, 8),
    InstanceType("c5.4xlarge", 16, 32),
    InstanceType("c5.18xlarge", 72, 144),
    InstanceType("p3.2xlarge", 8, 61, 1, "Tesla V100-SXM2-16GB", 16),
    InstanceType("p3.8xlarge", 32, 244, 4, "Tesla V100-SXM2-16GB", 16),
    InstanceType("p3.16xlarge", 64, 488, 8, "Tesla V100-SXM2-16GB", 16),
    InstanceType("p3dn.24xlarge", 96, 768, 8, "Tesla V100-SXM2-32GB", 32),
    InstanceType("g4dn.xlarge", 4, 16, 1, "Tesla T4", 16),
    InstanceType("g4dn.12xlarge", 48, 192, 4, "Tesla T4", 16),
    InstanceType("g5.xlarge", 4, 16, 1, "NVIDIA A10G", 24),
    InstanceType("g5.12xlarge", 48, 192, 4, "NVIDIA A10G", 24),
    InstanceType("g6.xlarge", 4, 16, 1, "NVIDIA L4", 24),
    InstanceType("g6.12xlarge", 48, 192, 4, "NVIDIA L4", 24),
    InstanceType("p4d.24xlarge", 96, 1152, 8, "NVIDIA A100-SXM4-40GB", 40),
    InstanceType("p5.48xlarge", 192, 2048, 8, "NVIDIA H100 80GB HBM3", 80),
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
    types the region does not offer are left out."""
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
                gpu_memory_gib=gpu["MemoryInfo"]["SizeInMiB"] / 1024 if gpu else None)
    return found


@dataclass(frozen=True)
class Peak:
    """The peak a measurement is judged against."""

    flops: float  # FLOP/s of all the devices the cell used together
    source: str  # "datasheet", "measured" or "estimate" (the local CPU)


def datasheet_peak(gpu_model: str | None, precision: str, devices: int) -> Peak | None:
    """Datasheet peak for `devices` GPUs of `gpu_model` at `precision`, or None if unknown."""
    if not gpu_model or devices < 1:
        return None
    for key in sorted(DATASHEET_PEAKS, key=len, reverse=True):
        if key.lower() in gpu_model.lower():
            per_device = DATASHEET_PEAKS[key].get(precision)
            return None if per_device is None else Peak(per_device * devices, "datasheet")
    return None


def cpu_peak_estimate(precision: str = "fp32", cpuinfo: str | None = None,
                      cpus: int | None = None, max_mhz: float | None = None) -> Peak | None:
    """An upper bound on this CPU's FLOP/s at `precision`: usable CPUs x clock x FLOPs per
    cycle.

    fp32 FLOPs per cycle from the widest vector FMA the flags show, assuming two FMA units
    (server cores have them): AVX-512 16 lanes x 2 (FMA) x 2 = 64, AVX2+FMA 32, AVX 16,
    SSE 8. bf16 (and fp16) use the matrix units where the CPU has them: AMX 1024 per cycle,
    AVX512-BF16 twice the fp32 rate. The clock is the highest the kernel reports.
    Hyperthreads share their core's units, so on hosts that count them the bound is loose;
    it is a peak, not a prediction.
    """
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as handle:
                cpuinfo = handle.read()
        except OSError:
            return None
    flags = set()
    mhz = []
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            flags = set(value.split())
        elif key.strip() == "cpu MHz":
            mhz.append(float(value))
    clock = max_mhz or _max_cpu_mhz() or (max(mhz) if mhz else None)
    if not clock:
        return None
    per_cycle = (64 if "avx512f" in flags else 32 if {"avx2", "fma"} <= flags
                 else 16 if "avx" in flags else 8)
    if precision in ("bf16", "fp16"):
        if "amx_bf16" in flags or "amx_fp16" in flags:
            per_cycle = 1024
        elif "avx512_bf16" in flags:
            per_cycle *= 2
    usable = cpus or len(os.sched_getaffinity(0))
    return Peak(usable * clock * 1e6 * per_cycle, "estimate")


def _max_cpu_mhz() -> float | None:
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") as handle:
            return int(handle.read()) / 1000
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class LocalMachine:
    """What this machine offers, for plans and compatibility checks."""

    hostname: str
    cpu_model: str | None
    cpu_count: int
    gpu_count: int
    gpu_model: str | None


def detect_local() -> LocalMachine:
    """This machine's CPUs and NVIDIA GPUs (through NVML, when the driver is there)."""
    gpu_count, gpu_model = 0, None
    try:
        import pynvml

        pynvml.nvmlInit()
        gpu_count = pynvml.nvmlDeviceGetCount()
        if gpu_count:
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
            gpu_model = name.decode() if isinstance(name, bytes) else name
    except Exception:  # no library, no driver, or no GPU: a CPU machine
        gpu_count = 0
    return LocalMachine(
        hostname=hostname(),
        cpu_model=cpu_model(),
        cpu_count=os.cpu_count() or 1,
        gpu_count=gpu_count,
        gpu_model=gpu_model,
    )
