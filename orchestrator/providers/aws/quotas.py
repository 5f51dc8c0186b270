"""EC2 service quotas, checked before a launch: a sweep that cannot get its instances
should say so at once, naming the quota, not wait for nodes that never come.

EC2 counts running instances in vCPUs per instance family and market. The check compares
what the plan may run at once (nodes per hardware entry, capped by `aws.max_workers`, plus
the head) with the quota's value, through the Service Quotas API.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import MatrixError
from orchestrator.providers.aws.catalogue import EC2_INSTANCE_TYPES

# (family letters, spot) -> (quota code, quota name), as Service Quotas names them.
QUOTAS: dict[tuple[str, bool], tuple[str, str]] = {
    ("p", False): ("L-417A185B", "Running On-Demand P instances"),
    ("g", False): ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    ("standard", False): ("L-1216C47A",
                          "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
    ("p", True): ("L-7212CCBC", "All P Spot Instance Requests"),
    ("g", True): ("L-3819A6DF", "All G and VT Spot Instance Requests"),
    ("standard", True): ("L-34B43A08",
                         "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"),
}


class QuotaError(MatrixError):
    """A launch that the account's EC2 quotas would refuse."""


@dataclass(frozen=True)
class Need:
    code: str
    name: str
    vcpus: int


def quota_for(instance_type: str, spot: bool) -> tuple[str, str]:
    family = instance_type[0].lower()
    return QUOTAS[(family if family in ("p", "g") else "standard", spot)]


def vcpus_needed(nodes: list[tuple[str, bool, int]]) -> list[Need]:
    """(instance type, spot, nodes at once) -> vCPUs per quota."""
    totals: dict[tuple[str, str], int] = defaultdict(int)
    for instance_type, spot, count in nodes:
        totals[quota_for(instance_type, spot)] += EC2_INSTANCE_TYPES[instance_type].vcpus * count
    return [Need(code, name, vcpus) for (code, name), vcpus in sorted(totals.items())]


def check_quotas(service_quotas: Any, needs: list[Need], region: str) -> None:
    """QuotaError naming the first quota too small for what the plan needs."""
    for need in needs:
        answer = service_quotas.get_service_quota(ServiceCode="ec2", QuotaCode=need.code)
        value = float(answer["Quota"]["Value"])
        if need.vcpus > value:
            raise QuotaError(
                f"the sweep may run {need.vcpus} vCPUs of '{need.name}' ({need.code}) at once "
                f"in {region}, and the account's quota is {value:g}: request an increase in "
                f"Service Quotas, or lower aws.max_workers")
