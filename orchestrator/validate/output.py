"""Where a run's folder is to be: checked at `matrix validate` as `matrix run` would find
it, so a matrix that validates does not fail at its first step.

`output: /proc/self` validated "ok" while `run` refused it (a folder on a filesystem of the
kernel's, where no file can be made). The nearest folder that exists on the way to `output`
must be a folder, writable, and on a filesystem that holds files; the filesystem is read
from the mount table (also what Slurm's check of a shared run directory asks).
"""

from __future__ import annotations

import os
from pathlib import Path

# the kernel's own filesystems: no run's files can be made there
PSEUDO_FILESYSTEMS = frozenset({"proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2",
                                "debugfs", "securityfs", "tracefs", "configfs", "pstore",
                                "bpf", "mqueue", "fusectl", "binfmt_misc", "hugetlbfs"})


def output_problem(output: str) -> str | None:
    """Why a run could not make its folder at `output` (relative: to this folder), or
    None."""
    path = Path(output).expanduser().absolute()
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    kind = filesystem_type(existing)
    if kind in PSEUDO_FILESYSTEMS:
        return f"{output} is on {kind}, a filesystem of the kernel's: no run can be kept there"
    if not existing.is_dir():
        return f"{existing} is not a folder, so no run folder can be made at {output}"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} cannot be written here, so no run folder can be made at {output}"
    return None


def filesystem_type(path: Path) -> str:
    """The type of the filesystem `path` (or its nearest existing parent) is on, from the
    longest mount point above it in /proc/mounts; "" where that cannot be read."""
    while not path.exists() and path != path.parent:
        path = path.parent
    best, kind = "", ""
    try:
        mounts = Path("/proc/mounts").read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    target = str(path.resolve())
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best):
            best, kind = point, fields[2]
    return kind
