"""What every container executor does the same way, whatever runtime starts the container.

A cell runs in a container of its stack's image as it runs in a subprocess: the worker
reads its cell file and writes OUT_FILE through the run's `cells/` folder, mounted; the
data cache is mounted read-only (the cell's dataset is fetched on the host first, since the
network is off); the user's workload folder is the image's copy, not the path here; files
written in `cells/` stay the user's; of this environment, the container gets only the
thread settings, as a process worker has them (executors/environment.py); it has an init as
PID 1, its run's and cell's labels (so a killed sweep's leftovers are found by the next),
the cell's GPUs and memory limit. `ContainerSpec` says all that as data; each container
executor only says it in its runtime's terms (docker.py through the engine's API, others by
their command line).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.executors.environment import thread_settings
from orchestrator.executors.outcome import CellFiles, WorkerExit, cell_stem, records_for
from orchestrator.images.ref import image_workload_dir
from orchestrator.registry.cell_run import Cell, CellRun, ImageRef
from orchestrator.results.records import Record, Status
from orchestrator.worker import datasets
from orchestrator.worker.nodes import NodePlace

CELLS_MOUNT = "/matrix/cells"
DATA_MOUNT = "/matrix/data"
LABEL_RUN = "matrix-bench.run"
LABEL_CELL = "matrix-bench.cell"


@dataclass(frozen=True)
class Mount:
    host: str
    container: str
    read_only: bool


@dataclass(frozen=True)
class ContainerSpec:
    """One cell's container, as every runtime must start it."""

    image: str  # the local name of the stack's image on this runtime
    command: tuple[str, ...]  # an argument list: matrix values reach the worker as data
    mounts: tuple[Mount, ...]
    environment: dict[str, str]
    labels: dict[str, str]
    name: str
    user: str  # uid:gid of the sweep, so files in cells/ stay the user's
    gpus: int
    memory_limit_mb: int | None  # also the swap limit: no swap to hide in
    host_network: bool = False  # a node of a cell across nodes; else no network at all


def in_image(cell: Cell) -> Cell:
    """`cell` as the container sees it: a user's workload folder, or a command's, is the
    image's copy, not its path here."""
    return cell.model_copy(update={
        key: image_workload_dir(cell.workload) for key in ("workload_dir", "command_cwd")
        if getattr(cell, key) is not None})


def fetch_dataset(cell: Cell) -> None:
    """The container has no network: its dataset is fetched into the host's cache first
    (raises datasets.DatasetError)."""
    dataset = cell.params.get("dataset")
    if isinstance(dataset, str) and dataset in datasets.catalogue():
        datasets.fetch(dataset)
    datasets.data_dir().mkdir(parents=True, exist_ok=True)


def container_spec(cell: Cell, cells_dir: Path, image: str,
                   node: NodePlace | None = None) -> ContainerSpec:
    """The cell's container. A node of a cell across nodes gets its own files and name,
    the rendezvous, and the host's network (its ranks reach the other nodes' over it);
    every other container has none."""
    node = node or NodePlace()
    stem = cell_stem(cell, node.node_rank)
    return ContainerSpec(
        image=image,
        command=("python3", "-m", "orchestrator.worker", f"{CELLS_MOUNT}/{stem}.json",
                 f"{CELLS_MOUNT}/{stem}.out.jsonl"),
        mounts=(Mount(str(cells_dir.resolve()), CELLS_MOUNT, read_only=False),
                Mount(str(datasets.data_dir().resolve()), DATA_MOUNT, read_only=True)),
        environment={**thread_settings(os.environ), "MATRIX_BENCH_DATA": DATA_MOUNT,
                     "HOME": "/tmp", "PYTHONUNBUFFERED": "1", **node.as_environment()},
        host_network=node.spans_nodes,
        labels={LABEL_RUN: cell.run, LABEL_CELL: cell.cell_id},
        name=f"matrix-{cell.run}-{stem}"[:120],
        user=f"{os.getuid()}:{os.getgid()}",
        gpus=cell.hardware.gpus,
        memory_limit_mb=cell.memory_limit_mb)


def provenance(image: ImageRef | None) -> dict[str, Any]:
    """What the cell's provenance record says of the image it ran in."""
    if image is None:
        return {}
    return {"image_tag": image.tag, "image_id": image.image_id,
            "repo_digest": image.repo_digest}


def refusal(run: CellRun, files: CellFiles,
            executor: str) -> Callable[[Status, str], list[Record]]:
    """The records of a cell its runtime never started, with the reason in its log and
    the time it took to find that (a runtime that did not answer held the node)."""
    asked = time.perf_counter()

    def refused(status: Status, why: str) -> list[Record]:
        files.log.write_text(f"{executor} executor: {why}\n")
        exit = WorkerExit(returncode=None, timed_out=False, started_at=files.started_at,
                          wall_s=round(time.perf_counter() - asked, 3), node_id=run.node_id)
        return records_for(run.cell, exit, files, run.tool, provenance(run.image),
                           status_override=(status, why))
    return refused


@dataclass(frozen=True)
class ContainerExecutor:
    """A container runtime's executor (the `Executor` protocol) from its three functions."""

    run: Callable[[CellRun], list[Record]]
    leftovers: Callable[[str], int]
    stop: Callable[[Cell], None]

    def run_cell(self, run: CellRun) -> list[Record]:
        return self.run(run)

    def remove_leftovers(self, run: str) -> int:
        return self.leftovers(run)

    def stop_cell(self, cell: Cell) -> None:
        self.stop(cell)


def as_process_status(code: int) -> int:
    """A container's exit status as a process's: runtimes report death by signal N as
    128 + N, the outcome classifier wants -N."""
    return -(code - 128) if 128 < code <= 128 + 64 else code
