"""This machine as detected: its host name, CPUs and NVIDIA GPUs, for plans and
compatibility checks (plan/planner.py, the local provider's skip_reason)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from orchestrator.worker.host import cpu_model, hostname


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
