"""The workloads one matrix can name: the user's own that it declares (`path:` folders and
`command:` scripts), over the built-ins and installed packages every matrix shares.

`spec/load.py` reads a matrix's own workloads into a `Workloads` that the loaded matrix
carries (spec/loaded.py: `workloads_of`); expansion, validation, the plan, the sweep, the
images and `matrix workloads --matrix` ask it. Nothing of a matrix's is kept per process,
so two matrices loaded in one process whose workloads share a name each resolve their own,
and loading one changes nothing another resolves. Only the built-ins' and packages'
declarations are cached per process (workload_registry.load_workload): they are the same
for every matrix.

A report reads a store's rows, not a matrix: report/frame.py adds the workloads its runs
came from to the process's `reported()` ones, which the report's modules ask by name. A
row's verdict reads its workload by name and folder (`as_recorded`): two runs of one name
from two folders are each judged by their own FLOP model, in whichever order they come.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from orchestrator.errors import MatrixError
from orchestrator.results.columns import param_column
from orchestrator.worker.workload_code import optional_module, workload_package
from orchestrator.workload_packages import package_workloads
from orchestrator.workload_registry import (
    Scalar,
    WorkloadInfo,
    check_own_name,
    folder_code,
    folder_declaration,
    is_built_in,
    load_workload,
)

# a workload's checks.py `problem(params, gpus, nodes)`: (parameter, why) it refuses, or None
ConfigurationCheck = Callable[[dict[str, Scalar], int, int], tuple[str, str] | None]


@dataclass(frozen=True)
class Workloads:
    """A user's own workloads by name, over the built-ins and installed packages. Never
    changed in place (its mappings are typed read-only): `with_folder`, `with_command` and
    `with_recorded` give a new one, so a matrix's workloads are what its loading made."""

    # a `path:` workload's folder, resolved
    folders: Mapping[str, Path] = field(default_factory=dict)
    # a `command:` workload's code files (what its version hashed and its image carries)
    commands: Mapping[str, tuple[Path, ...]] = field(default_factory=dict)
    # the declarations of the above, and of a run's workload recorded where its code is not
    declared: Mapping[str, WorkloadInfo] = field(default_factory=dict)

    def with_folder(self, name: str, folder: Path) -> Workloads:
        """These and the workload folder `folder` as `name`; WorkloadFolderError (one line)
        when the name shadows a built-in or the folder is no workload."""
        info = folder_declaration(name, folder)
        return self._with(info, folder=folder.resolve())

    def with_command(self, info: WorkloadInfo, code: Iterable[Path] = ()) -> Workloads:
        """These and a command workload's declaration (spec/command_workloads.py), with the code
        files of its folder; WorkloadFolderError where the name is not the user's to take."""
        check_own_name(info.name)
        return self._with(info, code=tuple(code))

    def with_recorded(self, info: WorkloadInfo) -> Workloads:
        """These and a run's recorded declaration of a user's workload whose code is not
        here (its folder moved, its package not installed): a report reads its item unit,
        parameters and metrics; its FLOP model and views are code, and are left out."""
        return self._with(info)

    def _with(self, info: WorkloadInfo, folder: Path | None = None,
              code: tuple[Path, ...] | None = None) -> Workloads:
        name = info.name
        folders = {k: v for k, v in self.folders.items() if k != name}
        commands = {k: v for k, v in self.commands.items() if k != name}
        if folder is not None:
            folders[name] = folder
        if code is not None:
            commands[name] = code
        return Workloads(folders, commands, {**self.declared, name: info})

    def as_recorded(self, name: str, folder: object) -> Workloads:
        """These workloads as a row of workload `name` recorded from `folder` (its
        `workload_dir`) reads them: with that folder for the name where it is another
        workload folder than these hold, else these. Two runs of one name from two folders,
        reported together, are each judged by their own declaration and FLOP model."""
        if not isinstance(folder, str) or not folder or name not in self.folders:
            return self
        if self.folders[name] == Path(folder):
            return self
        info = _folder_declaration(name, folder)
        if info is None:
            return self
        return self._with(info, folder=Path(folder))

    def load(self, name: str) -> WorkloadInfo:
        """The declaration of workload `name`: the user's own, else a built-in's or an
        installed package's (UnknownWorkloadError, WorkloadPackageError)."""
        own = self.declared.get(name)
        return own if own is not None else load_workload(name)

    def folder(self, name: str) -> Path | None:
        """The user's folder of `path:` workload `name`; None for any other."""
        return self.folders.get(name)

    def is_command(self, name: str) -> bool:
        """Whether `name` is a training script run as a command (no module to import)."""
        return name in self.commands

    def code_files(self, name: str, folder: Path) -> list[Path]:
        """The code of the user's workload `name` in `folder` that an image carries: a
        command's files as its version hashed them, else the folder's (folder_code)."""
        return list(self.commands[name]) if name in self.commands else folder_code(folder)

    def package_module(self, name: str) -> str | None:
        """The importable package of workload `name` where an installed distribution
        provides it (and no built-in or user's workload has the name), else None."""
        if name in self.folders or name in self.commands or is_built_in(name):
            return None
        package = package_workloads().get(name)
        return package.module if package else None

    def importable(self, name: str) -> str | None:
        """The package to import workload `name`'s modules from (workload, flops, views);
        None for a command, which has none, and for a name not known here."""
        folder = self.folders.get(name)
        package = self.package_module(name)
        if folder is None and package is None and not is_built_in(name):
            return None  # a command, or a store's row of a workload this process does not know
        return workload_package(name, None if folder is None else str(folder), package)

    def configuration_problem(self, name: str, params: dict[str, Scalar], gpus: int,
                              nodes: int = 1) -> tuple[str, str] | None:
        """(parameter, why) where workload `name`'s own `checks.py` refuses this
        configuration on `nodes` nodes of `gpus` GPUs, else None (and for one without it)."""
        check = self.configuration_check(name)
        return None if check is None else check(params, gpus, nodes)

    def configuration_check(self, name: str) -> ConfigurationCheck | None:
        """Workload `name`'s own `checks.problem`, or None where it has none, taking the
        cell's `nodes` (a check written before node counts existed is asked without them):
        for a caller judging many configurations of one workload (a missing module is looked
        for anew at each import, 1,000 times for a 1,000-configuration grid)."""
        package = self.importable(name)
        module = None if package is None else optional_module(f"{package}.checks")
        if module is None:
            return None
        problem = module.problem
        if "nodes" in inspect.signature(problem).parameters:  # it judges node counts too
            return cast(ConfigurationCheck, problem)
        return lambda params, gpus, nodes: problem(params, gpus)  # written for one node

    def source(self, name: str) -> str:
        """Where workload `name` comes from: built-in, path <folder>, command, or package
        <dist>==<v>."""
        if name in self.folders:
            return f"path {self.folders[name]}"
        if name in self.commands:
            return "command"
        if self.package_module(name) is not None:
            return package_workloads()[name].source
        return "built-in"

    def device_param_columns(self, workloads: Iterable[str]) -> tuple[str, ...]:
        """`param.<name>` of each workload's device-count parameter (sets_devices); none
        for a workload not known here (a store's rows of a user's workload elsewhere)."""
        names = set()
        for workload in set(workloads):
            try:
                names.add(self.load(workload).device_param)
            except MatrixError:
                continue
        return tuple(sorted(param_column(name) for name in names if name))


@functools.lru_cache(maxsize=64)
def _folder_declaration(name: str, folder: str) -> WorkloadInfo | None:
    """The declaration of the workload folder `folder` as `name` (read once per folder:
    a report asks it for every row), or None where it is no workload folder now."""
    try:
        return folder_declaration(name, Path(folder))
    except MatrixError:
        return None


# the workloads of the runs this process reports on (report/frame.py adds a store's)
_REPORTED = [Workloads()]


def reported() -> Workloads:
    """The workloads of the runs reported on in this process, over the shared ones."""
    return _REPORTED[0]


def report_on(workloads: Workloads) -> None:
    """Make `workloads` the ones reports in this process read (report/frame.py)."""
    _REPORTED[0] = workloads
