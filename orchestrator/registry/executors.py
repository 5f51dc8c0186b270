"""The executors' registry: the light declaration of each executor (`ExecutorKind`: its
name, the image its cells need, how to load it) and the interface an implementation meets
(`Executor`). A stack names one as its `executor`; the matrix's checks, the plan and the
images read the declarations without importing an implementation, which is loaded only when
a cell runs or a run is cleaned up (orchestrator/executors/). Installed distributions add
theirs by entry point (`matrix_bench.executors`, orchestrator/plugins.py), read the first
time the registry is, in every process. `orchestrator.executors` re-exports all of it for
plugin authors.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from orchestrator.plugins import EXECUTORS, load_plugins
from orchestrator.spec.entry_settings import ExecutorSettings, SettingsCatalogue

if TYPE_CHECKING:
    from orchestrator.registry.cell_run import Cell, CellRun
    from orchestrator.results.records import Record
    from orchestrator.spec.model import Stack


class Executor(Protocol):
    """How one kind of executor runs cells, and cleans up after them on this machine.

    An executor that starts the worker as a process of this machine does it through
    `orchestrator.executors.launch_worker`, which keeps every guarantee a worker has (no
    credential, the cell's GPUs, memory limit and timeout, nothing left running)."""

    def run_cell(self, run: CellRun) -> list[Record]:
        """Run `run.cell` and return its records, whatever happened: failures are records,
        never exceptions. Call `run.started()` when the cell's own clock starts."""
        ...

    def remove_leftovers(self, run: str) -> int:
        """Remove what a killed sweep of `run` left on this machine; how many things."""
        ...

    def stop_cell(self, cell: Cell) -> None:
        """Stop what is left of `cell` on this machine after the driver gave up on it."""
        ...


@dataclass(frozen=True)
class ImageNeed:
    """The image an executor's cells run in and where it comes from, said for people (the
    plan and the docs). Every such image is the stack's, built from its pinned lock by
    the Docker engine where the sweep runs (orchestrator/images/); `arrives` says how the
    executor's runtime on a node comes to hold it."""

    runtime: str  # what runs the container: "the Docker engine", "Podman"
    arrives: str


@dataclass(frozen=True)
class ExecutorKind:
    """A registered executor: its name, the image its cells run in (None: they run in this
    Python environment), how to load its implementation (imported only then), and the keys
    only its stacks take, as a model (spec/entry_settings.py: ExecutorSettings; light:
    validating a matrix imports it, never the implementation)."""

    name: str
    image: ImageNeed | None
    load: Callable[[], Executor]
    settings: type[ExecutorSettings] = ExecutorSettings


_REGISTRY: dict[str, ExecutorKind] = {}


def register_executor(kind: ExecutorKind) -> None:
    """Make `kind` available to matrix files as `executor: <name>` (a name already taken
    is replaced: the last registration wins)."""
    _REGISTRY[kind.name] = kind


@functools.cache
def _plugins() -> list[str]:
    """The executors installed distributions declare, registered once per process."""
    return load_plugins(EXECUTORS, ExecutorKind, lambda: list(_REGISTRY), register_executor)


def executor_names() -> list[str]:
    _plugins()
    return sorted(_REGISTRY)


def executor_kind(name: str) -> ExecutorKind:
    """The registered executor called `name` (KeyError if none is)."""
    _plugins()
    return _REGISTRY[name]


def executor_settings_of(name: str) -> type[ExecutorSettings] | None:
    """The settings model of the executor called `name`, or None: none is registered."""
    _plugins()
    kind = _REGISTRY.get(name)
    return kind.settings if kind is not None else None


def executor_setting_owners(key: str) -> list[str]:
    """The executors whose settings take `key`, for the line that says a stack of another
    executor set it."""
    _plugins()
    return sorted(name for name, kind in _REGISTRY.items() if key in kind.settings.model_fields)


EXECUTOR_SETTINGS = SettingsCatalogue(settings=executor_settings_of,
                                      owners=executor_setting_owners)


def needs_image(stack: Stack) -> bool:
    """Whether the stack's cells run in an image built for it."""
    return executor_kind(stack.effective_executor).image is not None


def _builtin(module: str) -> Callable[[], Executor]:
    def load() -> Executor:
        executor: Executor = importlib.import_module(module).EXECUTOR
        return executor
    return load


register_executor(ExecutorKind("process", image=None,
                               load=_builtin("orchestrator.executors.process")))
register_executor(ExecutorKind("docker", image=ImageNeed(
    runtime="the Docker engine",
    arrives="the engine that built it holds it; another node's pulls it by digest from "
            "images.registry"), load=_builtin("orchestrator.executors.docker")))
