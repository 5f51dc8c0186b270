"""Cells as the executor writes them, and a workload run in this process through a real
Context, for the workloads' own tests."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from orchestrator.context import Context, RecordWriter
from orchestrator.matrix import Cell, cell_id_of, config_id_of
from orchestrator.registry import load_workload
from orchestrator.spec import Hardware, Stack


def make_cell(workload: str, params: dict[str, Any], epochs: int,
              gpus: int = 0) -> dict[str, Any]:
    """The cell file's content (orchestrator.matrix.Cell as JSON) for `workload`."""
    info = load_workload(workload)
    hardware = Hardware(name="laptop", kind="local", gpus=gpus)
    stack = Stack(name="here", executor="process")
    config_id = config_id_of(hardware, stack, workload, info.version, params, epochs)
    return Cell(run="test", hardware=hardware, stack=stack, workload=workload,
                workload_version=info.version, item_unit=info.item_unit, params=params,
                epochs=epochs, repeat=1, timeout_s=info.timeout_s, memory_limit_mb=None,
                config_id=config_id, cell_id=cell_id_of(config_id, 1)).model_dump(mode="json")


def run_workload(tmp_path: Path, workload: str, params: dict[str, Any], epochs: int,
                 gpus: int = 0) -> list[dict[str, Any]]:
    """Run the workload's `run(ctx)` here and return the records it wrote."""
    module = importlib.import_module(f"workloads.{workload}.workload")
    out = tmp_path / "out.jsonl"
    ctx = Context(cell=make_cell(workload, params, epochs, gpus), writer=RecordWriter(str(out)))
    module.run(ctx)
    assert ctx.framework == "torch"
    return [json.loads(line) for line in out.read_text().splitlines()]
