"""What a run's matrix declared of its command workloads (`command:`), kept beside its
journal as `workloads.json`, so that `matrix report` in a later process knows their item
unit, parameters and metrics without the matrix file. A folder's and a package's workloads
declare themselves (`defaults.yaml`) and are not kept here."""

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
    """The command workloads' declarations the run directory keeps ([] for none)."""
    try:
        raw = json.loads((root / DECLARATIONS).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    return [WorkloadInfo.model_validate(value) for value in raw.values()]
