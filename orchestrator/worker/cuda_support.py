"""What a CUDA release can drive: the GPU architectures its toolkit builds for, and the
oldest Linux driver it runs on. The plan skips a cell whose GPU its stack's CUDA cannot
drive (plan/cells.py: incompatibility); the worker compares the node's driver with the
stack's CUDA before any work (stack_check.py). Stdlib only: images carry it.

Sources (NVIDIA, as of 2026-11):
- CUDA Toolkit release notes, "CUDA Toolkit and Minimum Required Driver Version for CUDA
  Minor Version Compatibility": a CUDA 11.x application runs on driver 450.80.02 or newer,
  12.x on 525.60.13, 13.x on 580.65.06 (Linux x86_64).
- The same notes, architecture support: CUDA 12.0 dropped Kepler (sm_35, sm_37); CUDA 13.0
  dropped Maxwell, Pascal and Volta (sm_50 to sm_70), so its oldest GPU is Turing (sm_75).
  Ada (sm_89) and Hopper (sm_90) came with CUDA 11.8; Blackwell (sm_100, sm_120) with 12.8.
- Each GPU's compute capability: developer.nvidia.com/cuda-gpus.
"""

from __future__ import annotations

import re
from pathlib import Path

# per CUDA major: the oldest compute capability its toolkit builds for, and the oldest driver
OLDEST_ARCHITECTURE = {"11": (3, 5), "12": (5, 0), "13": (7, 5)}
MINIMUM_DRIVER = {"11": "450.80.02", "12": "525.60.13", "13": "580.65.06"}
# architectures newer than some CUDA release: the first release that builds for them
FIRST_CUDA = {(8, 9): "11.8", (9, 0): "11.8", (10, 0): "12.8", (12, 0): "12.8"}
# a GPU model as drivers and the EC2 catalogue name it -> its compute capability; the first
# name found in the model wins (A10G before A10, L40S before L4)
COMPUTE_CAPABILITY = (
    ("K80", (3, 7)), ("M60", (5, 2)), ("P100", (6, 0)), ("V100", (7, 0)), ("T4", (7, 5)),
    ("A100", (8, 0)), ("A10G", (8, 6)), ("A10", (8, 6)), ("A30", (8, 0)), ("L40S", (8, 9)),
    ("L40", (8, 9)), ("L4", (8, 9)), ("H100", (9, 0)), ("H200", (9, 0)), ("B200", (10, 0)),
    ("B300", (10, 3)), ("RTX PRO 6000", (12, 0)),
)
DRIVER_FILE = Path("/proc/driver/nvidia/version")


def compute_capability(gpu_model: str) -> tuple[int, int] | None:
    """The compute capability of `gpu_model` ("Tesla V100-SXM2-16GB": (7, 0)); None for a
    model this table does not know."""
    return next((cc for name, cc in COMPUTE_CAPABILITY if name in gpu_model), None)


def architecture_problem(gpu_model: str, cuda: str) -> str | None:
    """Why CUDA `cuda` cannot drive `gpu_model`, or None (also for a GPU or CUDA the tables
    do not know: only a known gap is a problem)."""
    capability = compute_capability(gpu_model)
    major = cuda.split(".")[0]
    if capability is None or major not in OLDEST_ARCHITECTURE:
        return None
    sm = f"sm_{capability[0]}{capability[1]}"
    if capability < OLDEST_ARCHITECTURE[major]:
        return f"{gpu_model} ({sm}) is not supported by CUDA {cuda}"
    first = max((version for arch, version in FIRST_CUDA.items() if capability >= arch),
                key=_order, default=None)
    if first is not None and "." in cuda and _order(cuda) < _order(first):
        return f"{gpu_model} ({sm}) needs CUDA {first} or later, not {cuda}"
    return None


def driver_problem(driver: str, cuda: str) -> str | None:
    """Why a node with NVIDIA driver `driver` cannot run CUDA `cuda`, or None."""
    needed = MINIMUM_DRIVER.get(cuda.split(".")[0])
    if needed is None or _order(driver) >= _order(needed):
        return None
    return f"CUDA {cuda} needs NVIDIA driver {needed} or newer, this node has {driver}"


def node_driver_version() -> str | None:
    """The loaded NVIDIA kernel driver's version ("580.65.06"), or None on a node without
    one. Read from the kernel (DRIVER_FILE; no NVML needed), as inside a container."""
    try:
        text = DRIVER_FILE.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", text)
    return found.group(1) if found else None


def _order(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))
