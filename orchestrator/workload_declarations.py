"""The declarations of a run's own workloads (every one that is not built in: `command:`,
`path:` and installed packages'), kept beside its journal as `workloads.json`, so that
`matrix report` in a later process knows their item unit, parameters and metrics without
the matrix file, and without the code: a folder since moved or a package no longer
installed is reported from its recorded declaration (report/frame.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from orchestrator.workload_registry import WorkloadInfo

DECLARATIONS = "workloads.json"


def save_declarations(root: Path, declared: Iterable[WorkloadInfo]) -> None:
    """Keep `declared` in the run directory `root`, with those of earlier sweeps of it."""
    kept = {info.name: info for info in load_declarations(root)}
    kept |= {info.name: info for info in declared}
    if not kept:
        return
    path = root / DECLARATIONS
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps({name: info.model_dump(mode="json") for name, info in
                                   sorted(kept.items())}, indent=1) + "\n", encoding="utf-8")
    os.replace(partial, path)


def load_declarations(root: Path) -> list[WorkloadInfo]:
    """The declarations the run directory keeps ([] for none)."""
    try:
        raw = json.loads((root / DECLARATIONS).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    return [WorkloadInfo.model_validate(value) for value in raw.values()]
