"""The CPU threads a cell computes with: the CPUs its process may use, the math libraries'
settings it started with, and the count its framework reports.

A CPU cell's time depends on its threads as much as on its cores: torch, oneDNN and the
BLAS libraries start one thread per core unless `OMP_NUM_THREADS` (or `MKL_*`,
`OPENBLAS_*` ...) says otherwise. So these settings are provenance: two rows timed on
different threads are not the same measurement, and `history regressions` names the change.
Stdlib only (torch is read only where the workload imported it).

`os.cpu_count()` is the machine's count: it ignores `taskset`, a container's or a Slurm
task's cpuset and a cgroup's CPU quota (`docker --cpus`), so a rank that asks for
`os.cpu_count() // ranks` threads on 4 CPUs of a 64-core node starts 64. `usable_cpus` is
what the process may really compute on, and `rank_threads` shares it out unless the user
set the threads.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

# The variables that set how many threads the math libraries compute with
THREAD_PREFIXES = ("OMP_", "KMP_", "MKL_", "OPENBLAS_", "GOTO_", "BLIS_", "NUMEXPR_")
# Where the user says how many threads a process computes with, first that counts first:
# torch's intra-op pool follows OMP_NUM_THREADS, then MKL_NUM_THREADS
USER_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
# The CPUs a Slurm task was allotted (`--cpus-per-task`): a cluster without task/affinity or
# task/cgroup binds none, so this count is the only trace of the allocation in the task
SLURM_CPUS = "SLURM_CPUS_PER_TASK"
CGROUP_ROOT = Path("/sys/fs/cgroup")


def thread_variables(source: Mapping[str, str]) -> dict[str, str]:
    """The variables of `source` that set the math libraries' threads."""
    return {name: value for name, value in sorted(source.items())
            if name.startswith(THREAD_PREFIXES)}


def framework_threads() -> int | None:
    """The intra-op threads torch computes with, where the workload imported torch; None
    for a framework that does not say (TensorFlow reports 0 for its default, JAX nothing)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        return int(torch.get_num_threads())
    except Exception:  # provenance is best effort, never a failure
        return None



def user_threads(source: Mapping[str, str]) -> int | None:
    """The threads per process the user set (OMP_NUM_THREADS, else MKL_NUM_THREADS; the
    first figure of a nested list such as "4,2"), or None where none is set or it is not a
    positive count."""
    for name in USER_THREAD_VARIABLES:
        first = source.get(name, "").split(",")[0].strip()
        if first.isdigit() and int(first) > 0:
            return int(first)
    return None


def usable_cpus(source: Mapping[str, str] | None = None,
                cgroup_root: Path = CGROUP_ROOT) -> int:
    """The CPUs this process may compute on: its affinity mask (taskset, a cpuset), capped
    by its cgroup's CPU quota (rounded up) and by the CPUs its Slurm task was allotted."""
    source = os.environ if source is None else source
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    quota = cgroup_cpu_quota(cgroup_root)
    if quota is not None:
        cpus = min(cpus, math.ceil(quota))
    allotted = source.get(SLURM_CPUS, "")
    if allotted.isdigit() and int(allotted) > 0:
        cpus = min(cpus, int(allotted))
    return max(1, cpus)


def rank_threads(ranks: int, source: Mapping[str, str] | None = None,
                 cgroup_root: Path = CGROUP_ROOT) -> int:
    """The intra-op threads each of a cell's `ranks` processes computes with: the user's
    setting where there is one (it is per process, as OpenMP reads it), else an equal share
    of the CPUs the process may use."""
    source = os.environ if source is None else source
    return user_threads(source) or max(1, usable_cpus(source, cgroup_root) // max(1, ranks))


def cgroup_cpu_quota(root: Path = CGROUP_ROOT,
                     membership: Path = Path("/proc/self/cgroup")) -> float | None:
    """The CPUs this process's cgroup may use per period (its quota over its period; the
    smallest along its path up to the root), or None where no quota is set or none is
    readable. cgroup v2 (`cpu.max`) and v1 (`cpu.cfs_quota_us`) alike."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return None
    found: list[float] = []
    for line in lines:
        if line.count(":") < 2:
            continue
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2's unified hierarchy
            found += _quotas(root, path, _v2_quota)
        elif "cpu" in controllers.split(","):
            found += _quotas(root / "cpu", path, _v1_quota)
    return min(found) if found else None


def _quotas(base: Path, path: str, read: Callable[[Path], float | None]) -> list[float]:
    """Each quota set on the cgroup at `path` under `base` or on one of its parents: a
    parent's limit binds its children. A container sees its own cgroup as the root."""
    folder = base / path.lstrip("/")
    quotas = []
    for each in (folder, *folder.parents):
        if not each.is_relative_to(base):
            break
        quota = read(each)
        if quota is not None:
            quotas.append(quota)
    return quotas


def _v2_quota(folder: Path) -> float | None:
    try:
        quota, period = (folder / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else _ratio(quota, period)


def _v1_quota(folder: Path) -> float | None:
    try:
        quota = (folder / "cpu.cfs_quota_us").read_text().strip()
        period = (folder / "cpu.cfs_period_us").read_text().strip()
    except OSError:
        return None
    return None if quota.startswith("-") else _ratio(quota, period)


def _ratio(quota: str, period: str) -> float | None:
    try:
        value = int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None
    return value if value > 0 else None
