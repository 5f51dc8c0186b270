"""`matrix workloads`: every workload a matrix can name (the built-ins, the installed
packages' and a matrix's own folders), and one workload's parameters, read from their
declarations (defaults.yaml) without importing any framework."""

from __future__ import annotations

import textwrap
from pathlib import Path

from rich.console import Console
from rich.table import Table

from orchestrator.report.markdown import plain_text
from orchestrator.worker.units import plural
from orchestrator.workload_packages import WorkloadPackageError, package_workloads
from orchestrator.workload_registry import ParamDecl, available_workloads
from orchestrator.workload_scope import Workloads


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
    if matrix is None:
        return Workloads()
    from orchestrator.spec.loaded import workloads_of
    from orchestrator.validate import load_spec

    return workloads_of(load_spec(matrix))


def _entry(console: Console, head: str, description: str) -> None:
    width = max(console.width, 40)
    lines = textwrap.wrap(plain_text(head), width, subsequent_indent="    ",
                          break_on_hyphens=False)
    lines += textwrap.wrap(plain_text(description), width, initial_indent="    ",
                           subsequent_indent="    ", break_on_hyphens=False)
    console.print("\n".join(lines), highlight=False, markup=False, soft_wrap=True)


def show_workload(name: str, console: Console, matrix: Path | None = None) -> None:
    """The workload's parameters: type, default, what is allowed, and what each means; with
    `matrix`, one of that matrix's own workloads too. UnknownWorkloadError (one line at the
    CLI) for a name no workload has."""
    workloads = matrix_workloads(matrix)
    info = workloads.load(name)
    console.print(f"{name} ({workloads.source(name)}, version {info.version}): "
                  f"{info.description}\n"
                  f"throughput counts {plural(info.item_unit)}; {info.epochs} epoch(s) and a "
                  f"{info.timeout_s:g} s timeout per cell unless the matrix says otherwise",
                  highlight=False)
    table = Table(title=f"{len(info.params)} parameters")
    for column in ("parameter", "type", "default", "allowed", "help"):
        table.add_column(column)
    for param, decl in info.params.items():
        table.add_row(param, decl.type, repr(decl.default), allowed(decl), decl.help)
    console.print(table)
    for preset, values in info.presets.items():
        settings = ", ".join(f"{k}={v}" for k, v in values.items())
        console.print(f"preset {preset}: {settings}", highlight=False)


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
