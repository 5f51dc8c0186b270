"""`matrix workloads`: every workload a matrix can name, and one workload's parameters, read
from their declarations (defaults.yaml) without importing any framework."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from orchestrator.workload_registry import ParamDecl, available_workloads, load_workload


def show_workloads(console: Console) -> None:
    """One row per workload: where it comes from, what it counts, what it needs."""
    table = Table(title="workloads (`matrix workloads NAME` lists one's parameters)")
    for column in ("name", "source", "item unit", "framework", "presets", "description"):
        table.add_column(column)
    for name in available_workloads():
        info = load_workload(name)
        chooser = next((p for p, decl in info.params.items() if decl.stack_framework), None)
        framework = info.framework or (f"by {chooser}" if chooser else "any")
        table.add_row(name, "built-in", info.item_unit, framework,
                      ", ".join(info.presets) or "-", info.description)
    console.print(table)


def show_workload(name: str, console: Console) -> None:
    """The workload's parameters: type, default, what is allowed, and what each means.
    UnknownWorkloadError (one line at the CLI) for a name no workload has."""
    info = load_workload(name)
    console.print(f"{name} (built-in, version {info.version}): {info.description}\n"
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
