"""Which ceilings a node has measured in a run, so each is measured once (issue 40).

A node's ceiling (worker/ceiling.py) depends on the machine, the cell's share of it (the
hardware entry), the stack, the precision and the framework that computes. The executor
runs on the node, so it keeps the answer where the node sees it: one marker file per
measured ceiling under the run directory's `ceilings/<node, hardware, stack, precision>/`,
named after the framework. Before a cell it tells the worker which frameworks are measured
(the cell file's `ceilings_measured`); after it, a cell that measured one leaves its marker.
A run resumed on another node measures again; on the same node it does not. Cells running
at once on one node may each measure (a marker is written when a cell ends): the report
takes the best of a node's probes, as the probe takes its best block.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
from pathlib import Path

from orchestrator.registry.cell_run import Cell
from orchestrator.results.records import ProvenanceRecord
from orchestrator.worker.ceiling import FRAMEWORKS


def node_name() -> str:
    """The machine this executor runs on, as the provenance's `node` names it."""
    return socket.gethostname()


def measured_here(cell: Cell, run_root: Path) -> tuple[str, ...]:
    """The frameworks whose ceiling this node measured in this run for the cell's hardware,
    stack and precision."""
    folder = _folder(cell, run_root)
    if not folder.is_dir():
        return ()
    return tuple(sorted(path.stem for path in folder.glob("*.json")))


def remember(cell: Cell, run_root: Path, provenance: ProvenanceRecord) -> None:
    """Leave the marker of the ceiling this cell measured, if it measured one."""
    framework = provenance.framework or ""
    if provenance.ceiling_flops is None or framework not in FRAMEWORKS:  # a file name
        return
    folder = _folder(cell, run_root)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{framework}.json").write_text(json.dumps(
        {"cell_id": cell.cell_id, "flops": provenance.ceiling_flops,
         "probe": provenance.ceiling_probe}))


def forget_ceilings(run_root: Path) -> None:
    """Forget every measured ceiling of a run directory whose journal starts afresh (its
    probes went with the journal)."""
    shutil.rmtree(run_root / "ceilings", ignore_errors=True)


def _folder(cell: Cell, run_root: Path) -> Path:
    precision = str(cell.params.get("precision", "fp32"))
    key = json.dumps([node_name(), cell.hardware.name, cell.stack.name, precision])
    return run_root / "ceilings" / hashlib.sha256(key.encode()).hexdigest()[:16]
