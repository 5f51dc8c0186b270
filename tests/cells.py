"""Cells as the executor writes them, and a workload run in this process through a real
Context, for the workloads' own tests."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from orchestrator.executors.outcome import cell_file_content
from orchestrator.plan.identity import cell_id_of, config_id_of
from orchestrator.registry.cell_run import Cell
from orchestrator.spec.model import Hardware, Stack
from orchestrator.worker.cell_file import CellFile
from orchestrator.worker.context import Context, RecordWriter
from orchestrator.workload_registry import load_workload

PROJECT = Path(__file__).resolve().parents[1]


def make_cell_model(workload: str, params: dict[str, Any], epochs: int,
                    gpus: int = 0) -> Cell:
    """The driver's Cell for `workload`, its parameters resolved as the matrix resolves them
    (declared defaults filled in)."""
    info = load_workload(workload)
    params = info.resolve(params)
    hardware = Hardware(name="laptop", kind="local", gpus=gpus)
    stack = Stack(name="here", executor="process")
    config_id = config_id_of(hardware, stack, info, params, epochs)
    return Cell(run="test", hardware=hardware, stack=stack, workload=workload,
                workload_version=info.version, item_unit=info.item_unit, params=params,
                epochs=epochs, repeat=1, timeout_s=info.timeout_s, memory_limit_mb=None,
                config_id=config_id, cell_id=cell_id_of(config_id, 1))


def make_cell(workload: str, params: dict[str, Any], epochs: int,
              gpus: int = 0) -> dict[str, Any]:
    """The cell file's content (cell_file.py) for `workload`, as the executor writes it."""
    return cell_file_content(make_cell_model(workload, params, epochs, gpus))


def context_for(cell: dict[str, Any], out: Path) -> Context:
    """The Context a workload gets in the worker, for the cell file content `cell`."""
    return Context(cell=CellFile.from_dict(cell), writer=RecordWriter(str(out)))


def run_workload(tmp_path: Path, workload: str, params: dict[str, Any], epochs: int,
                 gpus: int = 0) -> list[dict[str, Any]]:
    """Run the workload's `run(ctx)` here and return the records it wrote."""
    module = importlib.import_module(f"workloads.{workload}.workload")
    out = tmp_path / "out.jsonl"
    ctx = context_for(make_cell(workload, params, epochs, gpus), out)
    module.run(ctx)
    assert ctx.framework == "torch"
    return [json.loads(line) for line in out.read_text().splitlines()]


def run_worker(tmp_path: Path, cell: dict[str, Any], env: dict[str, str] | None = None
               ) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """Run `python -m orchestrator.worker` on `cell` in a process of its own, as an executor
    does (with `env` added to this environment); its exit, output and records."""
    cell_file, out = tmp_path / "cell.json", tmp_path / "out.jsonl"
    cell_file.write_text(json.dumps(cell))
    done = subprocess.run([sys.executable, "-m", "orchestrator.worker", str(cell_file), str(out)],
                          cwd=PROJECT, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=300, check=False)
    return done, [json.loads(line) for line in out.read_text().splitlines()]


def cpu_has_bf16_lstm() -> bool:
    """Whether oneDNN has bf16 kernels on this CPU (AVX-512 or AMX), which nn.LSTM needs to
    run in bf16 there."""
    import torch

    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
