"""`matrix workloads`: every workload a matrix can name (the built-ins, the installed
packages' and a matrix's own folders), and one workload's parameters, read from their
declarations (defaults.yaml) without importing any framework. With a matrix, one workload
is shown with what that matrix's entry of it sets (epochs, timeout, values...): what its
cells get, where the declaration's defaults are only what an entry leaves out (a
`command:` workload's, 1 epoch and 3600 s, are no one's choice)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from orchestrator.errors import UnknownWorkloadError
from orchestrator.report.markdown import plain_text
from orchestrator.worker.units import plural
from orchestrator.workload_packages import WorkloadPackageError, package_workloads
from orchestrator.workload_registry import ParamDecl, WorkloadInfo, available_workloads
from orchestrator.workload_scope import Workloads

if TYPE_CHECKING:
    from orchestrator.spec.model import MatrixSpec, WorkloadEntry


def show_workloads(console: Console, matrix: Path | None = None) -> None:
    """Two lines per workload, readable at 80 columns: its name, where it comes from, what
    it counts, its framework and presets; then what it is. With `matrix`, that matrix's own
    workloads too (`path:` and `command:`, as it declares them)."""
    workloads = matrix_workloads(matrix)
    console.print("workloads (`matrix workloads NAME` lists one's parameters)\n",
                  highlight=False)
    # a package's workload named like a built-in or a folder is hidden by it: list it once
    for name in dict.fromkeys([*available_workloads(), *workloads.declared,
                               *package_workloads()]):
        try:
            info = workloads.load(name)
        except WorkloadPackageError as exc:  # one broken package hides no other workload
            _entry(console, f"{name}  {package_workloads()[name].source}: cannot load", str(exc))
            continue
        chooser = next((p for p, decl in info.params.items() if decl.stack_framework), None)
        framework = info.framework or (f"by {chooser}" if chooser else "any framework")
        presets = f"; presets {', '.join(info.presets)}" if info.presets else ""
        _entry(console, f"{name}  {workloads.source(name)}; counts {plural(info.item_unit)}; "
                        f"{framework}{presets}", info.description)


def matrix_workloads(matrix: Path | None) -> Workloads:
    """The workloads `matrix` can name: its own (`path:`, `command:`) over the built-ins and
    installed packages; those alone without a matrix."""
    return _loaded(matrix)[1]


def _loaded(matrix: Path | None) -> tuple[MatrixSpec | None, Workloads]:
    """The matrix (None without one) and the workloads it can name."""
    if matrix is None:
        return None, Workloads()
    from orchestrator.spec.loaded import workloads_of
    from orchestrator.validate import load_spec

    spec = load_spec(matrix)
    return spec, workloads_of(spec)


def _entry(console: Console, head: str, description: str) -> None:
    width = max(console.width, 40)
    lines = textwrap.wrap(plain_text(head), width, subsequent_indent="    ",
                          break_on_hyphens=False)
    lines += textwrap.wrap(plain_text(description), width, initial_indent="    ",
                           subsequent_indent="    ", break_on_hyphens=False)
    console.print("\n".join(lines), highlight=False, markup=False, soft_wrap=True)


def show_workload(name: str, console: Console, matrix: Path | None = None) -> None:
    """The workload's parameters: type, default, what is allowed, and what each means; with
    `matrix`, one of that matrix's own workloads too, and what the matrix's entry of it
    sets. UnknownWorkloadError (one line at the CLI) for a name no workload has, which
    points to `-m` where no matrix was given: a matrix's own workload is known only there."""
    spec, workloads = _loaded(matrix)
    try:
        info = workloads.load(name)
    except UnknownWorkloadError as exc:
        if matrix is not None and spec is not None:
            own = ", ".join(entry.name for entry in spec.workloads)
            raise UnknownWorkloadError(f"{exc}; nor does {matrix} name it (it names "
                                       f"{own})") from None
        raise UnknownWorkloadError(
            f"{exc}; a matrix's own workload (path:, command:) needs its matrix: "
            f"matrix workloads {name} -m MATRIX") from None
    entry = next((e for e in spec.workloads if e.name == name), None) if spec else None
    console.print(f"{name} ({workloads.source(name)}, version {info.version}): "
                  f"{info.description}\n"
                  f"throughput counts {plural(info.item_unit)}; "
                  + _per_cell(info, entry, matrix), highlight=False)
    table = Table(title=f"{len(info.params)} parameters")
    for column in ("parameter", "type", "default", "allowed", "help"):
        table.add_column(column)
    for param, decl in info.params.items():
        table.add_row(param, decl.type, repr(decl.default), allowed(decl), decl.help)
    console.print(table)
    for preset, values in info.presets.items():
        settings = ", ".join(f"{k}={v}" for k, v in values.items())
        console.print(f"preset {preset}: {settings}", highlight=False)


def _per_cell(info: WorkloadInfo, entry: WorkloadEntry | None, matrix: Path | None) -> str:
    """What a cell of the workload runs for: the epochs and timeout `matrix`'s `entry` of it
    gives its cells, with whatever else the entry sets, then what a cell gets where an entry
    sets none (the declaration's; a `command:` entry has no other)."""
    own = f"{info.epochs} epoch(s) and a {info.timeout_s:g} s timeout per cell"
    if matrix is None:
        return f"{own} unless the matrix says otherwise"
    if entry is None:
        return f"{own}; {matrix} does not name it"
    memory = (f" and a {entry.memory_limit_mb} MB memory limit"
              if entry.memory_limit_mb is not None else "")
    return (f"in {matrix}: {entry.epochs or info.epochs} epoch(s), a "
            f"{entry.timeout_s or info.timeout_s:g} s timeout{memory} per cell"
            + "".join(f"; {setting}" for setting in _entry_settings(entry))
            + f"\nwhere an entry sets none: {own}")


def _entry_settings(entry: WorkloadEntry) -> list[str]:
    """What a matrix's entry sets besides its name, command, epochs, timeout and memory
    limit, as the matrix author wrote it."""
    from orchestrator.spec.model import entry_grid

    found = [f"{param}={', '.join(str(v) for v in values)}"
             for param, values in entry_grid(entry).items()]
    written = entry.model_dump(exclude_unset=True, exclude={
        "name", "command", "params", "dataset", "preset", "epochs", "timeout_s",
        "memory_limit_mb"})
    found += [f"{key} {', '.join(map(str, value)) if isinstance(value, list) else value}"
              for key, value in written.items()]
    return found


def allowed(decl: ParamDecl) -> str:
    """What a value may be, as the matrix author needs to know it."""
    if decl.choices is not None:
        allowed = ", ".join(str(choice) for choice in decl.choices)
    elif decl.min is not None or decl.max is not None:
        low = "" if decl.min is None else f"{decl.min:g}"
        high = "" if decl.max is None else f"{decl.max:g}"
        allowed = f"{low}..{high}"
    else:
        allowed = f"any {decl.type}"
    if decl.gpu_only:
        allowed += f" ({', '.join(str(v) for v in decl.gpu_only)}: GPU only)"
    return allowed
