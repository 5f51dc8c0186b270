"""`matrix workloads`: every workload a matrix can name (the built-ins, the installed
packages' and a matrix's own folders), and one workload's parameters, read from their
declarations (defaults.yaml) without importing any framework."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from orchestrator.workload_packages import WorkloadPackageError, package_workloads
from orchestrator.workload_registry import (
    ParamDecl,
    available_workloads,
    load_workload,
    workload_source,
)


def show_workloads(console: Console, matrix: Path | None = None) -> None:
    """One row per workload: where it comes from, what it counts, what it needs; with
    `matrix`, that matrix's own workloads too (registered as it is loaded)."""
    own: list[str] = []
    if matrix is not None:
        from orchestrator.spec.load import load_spec

        own = list(load_spec(matrix).workload_folders())
    table = Table(title="workloads (`matrix workloads NAME` lists one's parameters)")
    for column in ("name", "source", "item unit", "framework", "presets", "description"):
        table.add_column(column)
    # a package's workload named like a built-in or a folder is hidden by it: list it once
    for name in dict.fromkeys([*available_workloads(), *own, *package_workloads()]):
        try:
            info = load_workload(name)
        except WorkloadPackageError as exc:  # one broken package hides no other workload
            table.add_row(name, package_workloads()[name].source, "-", "-", "-", str(exc))
            continue
        chooser = next((p for p, decl in info.params.items() if decl.stack_framework), None)
        framework = info.framework or (f"by {chooser}" if chooser else "any")
        table.add_row(name, workload_source(name), info.item_unit, framework,
                      ", ".join(info.presets) or "-", info.description)
    console.print(table)


def show_workload(name: str, console: Console) -> None:
    """The workload's parameters: type, default, what is allowed, and what each means.
    UnknownWorkloadError (one line at the CLI) for a name no workload has."""
    info = load_workload(name)
    console.print(f"{name} ({workload_source(name)}, version {info.version}): "
                  f"{info.description}\n"
                  f"throughput counts {info.item_unit}s; {info.epochs} epoch(s) and a "
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
