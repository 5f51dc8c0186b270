"""What resuming a large sweep costs, and what one journal append costs.

Resume: a journal of 1,000 finished cells (5 epochs each, as `matrix run` writes them) is
loaded, deduplicated and planned against its matrix, as a rerun of `matrix run` does
before it dispatches anything: load_spec, lock and torn-tail check, read, make_plan.
Append: one cell's batch (provenance, 5 measurements, cell record) appended and fsync'd
through RunDirectory.append, reported per batch and per record. Medians of several runs.
Usage: python bench/resume_cost.py [--cells 1000]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchestrator.hardware.local import detect_local
from orchestrator.plan.cells import expand
from orchestrator.plan.planner import make_plan
from orchestrator.registry.cell_run import Cell
from orchestrator.results.records import CellRecord, MeasurementRecord, ProvenanceRecord, Record
from orchestrator.results.run_directory import RunDirectory
from orchestrator.validate import load_spec

EPOCHS = 5


def matrix_text(cells: int) -> str:
    steps = list(range(1, cells // 10 + 1))
    return f"""
name: resume-bench
hardware: [{{name: box, kind: local}}]
stacks: [{{name: here, executor: process}}]
workloads:
  - {{name: sleep, epochs: {EPOCHS},
     params: {{seconds: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0], steps: {steps}}}}}
"""


def batch(cell: Cell) -> list[Record]:
    ident = {"run": cell.run, "cell_id": cell.cell_id, "config_id": cell.config_id,
             "repeat": cell.repeat}
    measurements = [MeasurementRecord(**ident, epoch=e, train_s=1.0, items=100,
                                      item_unit="sample", items_per_s=100.0, warmup_steps=0,
                                      step_s_median=0.01, host_rss_peak_bytes=2**28)
                    for e in range(1, EPOCHS + 1)]
    return [ProvenanceRecord(**ident, hostname="bench", python="3.11.7", cpu_count=2),
            *measurements,
            CellRecord(**ident, status="ok", started_at="2026-11-22T00:00:00+00:00",
                       wall_s=5.0, hardware=cell.hardware.name, stack=cell.stack.name,
                       workload=cell.workload,
                       **{f"param.{k}": v for k, v in cell.params.items()})]


def resume(matrix: Path, run_dir: Path) -> int:
    """What `matrix run` does before dispatching; returns the cells left to run."""
    spec = load_spec(matrix)
    store = RunDirectory(run_dir)
    store.acquire()
    try:
        return len(make_plan(spec, detect_local(), store.results()).to_run)
    finally:
        store.release()


def filesystem(path: Path) -> str:
    """The type of the file system holding `path` (fsync's cost depends on it)."""
    best = ("", "?")
    for line in Path("/proc/mounts").read_text().splitlines():
        _, mount, kind, *_ = line.split()
        if str(path).startswith(mount) and len(mount) > len(best[0]):
            best = (mount, kind)
    return best[1]


def median_s(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        matrix = Path(tmp) / "m.yaml"
        matrix.write_text(matrix_text(args.cells))
        cells = expand(load_spec(matrix))
        run_dir = Path(tmp) / "run"
        store = RunDirectory(run_dir)
        store.acquire()
        batches = [batch(cell) for cell in cells]
        append_s = []
        for records in batches:
            start = time.perf_counter()
            store.append(records)
            append_s.append(time.perf_counter() - start)
        store.release()
        per_batch = statistics.median(append_s)
        left = resume(matrix, run_dir)
        assert left == 0, f"{left} cells planned again: dedupe failed"
        resume_s = median_s(lambda: resume(matrix, run_dir), 5)
        half = Path(tmp) / "half"
        half_store = RunDirectory(half)
        half_store.acquire()
        for records in batches[::2]:
            half_store.append(records)
        half_store.release()
        assert resume(matrix, half) == len(cells) - len(batches[::2])
        resume_half_s = median_s(lambda: resume(matrix, half), 5)
        result = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": f"{platform.node()} {platform.processor() or platform.machine()}",
            "python": platform.python_version(),
            "filesystem": filesystem(Path(tmp)),
            "cells": len(cells), "records": sum(len(b) for b in batches),
            "journal_bytes": store.journal.stat().st_size,
            "resume_all_done_s": round(resume_s, 3),
            "resume_half_done_s": round(resume_half_s, 3),
            "append_batch_ms_median": round(per_batch * 1e3, 3),
            "append_batch_ms_p90": round(sorted(append_s)[int(0.9 * len(append_s))] * 1e3, 3),
            "append_record_ms": round(per_batch * 1e3 / len(batches[0]), 3),
        }
    print(json.dumps(result, indent=2))
    out = Path(__file__).parent / "results" / "resume_cost.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written {out}")


if __name__ == "__main__":
    main()
