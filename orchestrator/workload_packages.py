"""Workloads that installed Python distributions provide, through the entry-point group
`matrix_bench.workloads`: a team publishes its benchmarks as a package, and a matrix names
them like built-ins.

An entry point's name is the workload's name; its value is the importable package that
holds the workload's `defaults.yaml` and `workload.py` (the built-in contract), e.g. in the
distribution's pyproject.toml:

    [project.entry-points."matrix_bench.workloads"]
    tiny_mlp = "acme_bench.tiny_mlp"

The workload's version is its declared one plus the distribution's name and version, so a
new release of the package gives its results new ids. Its package is found without being
imported (only its parents are), so a framework it needs is not loaded to list it.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import MatrixError

ENTRY_POINT_GROUP = "matrix_bench.workloads"


class WorkloadPackageError(MatrixError):
    """An installed package's workload entry point that names no workload."""


@dataclass(frozen=True)
class PackageWorkload:
    """One workload an installed distribution provides."""

    name: str  # the entry point's name: what a matrix names
    module: str  # the importable package holding defaults.yaml and workload.py
    distribution: str
    distribution_version: str

    @property
    def source(self) -> str:
        """Where the workload comes from, as a person reads it."""
        return f"package {self.distribution}=={self.distribution_version}"

    def folder(self) -> Path:
        """The package's folder; WorkloadPackageError (one line) where it is not a workload."""
        where = f"the entry point {self.name} = {self.module!r} of {self.source}"
        try:
            spec = importlib.util.find_spec(self.module)
        except (ImportError, ValueError) as exc:
            raise WorkloadPackageError(f"{where} cannot be found: {exc}") from None
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not locations:
            raise WorkloadPackageError(f"{where} names no package (a folder with "
                                       "defaults.yaml and workload.py)")
        folder = Path(locations[0])
        for needed in ("defaults.yaml", "workload.py"):
            if not (folder / needed).is_file():
                raise WorkloadPackageError(f"{where} is not a workload: {folder} has no "
                                           f"{needed}")
        return folder


@functools.cache
def package_workloads() -> dict[str, PackageWorkload]:
    """Every workload the installed distributions provide, by name (the first distribution
    wins a name two provide). Read once per process: installing a package takes effect in
    the next command."""
    from importlib.metadata import distributions

    found: dict[str, PackageWorkload] = {}
    for dist in distributions():
        for entry in dist.entry_points:
            if entry.group == ENTRY_POINT_GROUP and entry.name not in found:
                found[entry.name] = PackageWorkload(
                    name=entry.name, module=entry.value.split(":")[0].strip(),
                    distribution=dist.metadata["Name"], distribution_version=dist.version)
    return dict(sorted(found.items()))
