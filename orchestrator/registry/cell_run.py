"""What a dispatcher hands an executor (or a provider's nodes) for one cell, and so what a
plugin sees of it: the cell (`Cell`: everything a worker needs, and its identity), the
tool's identity for its records (`ToolInfo`), its stack's built image (`ImageRef`), and the
three together with where the cell writes (`CellRun`). They sit in the seam's own layer,
below the plan that makes cells, the images that build them and the executors that run
them, so the registry's interfaces name them without importing any of those.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from orchestrator.spec.model import Hardware, Stack
from orchestrator.worker.cell_file import CellFields
from orchestrator.worker.nodes import NodePlace
from orchestrator.workload_registry import WorkloadInfo


class Cell(BaseModel, CellFields, frozen=True):
    """One unit of work: everything a worker needs to run it, and its identity. Its fields
    are the cell file's (worker/cell_file.py: CellFields, declared once, so the two never
    drift), with its hardware and stack entries as the matrix has them."""

    model_config = ConfigDict(extra="forbid")

    hardware: Hardware
    stack: Stack
    # the declaration of a workload that is not built in, for the node that runs the cell,
    # which may not know it (a folder it does not have, a command the matrix declared)
    workload_info: WorkloadInfo | None = None
    # what shapes its end besides its ids (plan/retry.py), recorded with that end; the
    # driver's, never in the cell file
    inputs: str | None = None


@dataclass(frozen=True)
class ToolInfo:
    """The orchestrator's own provenance, computed once by the driver."""

    version: str
    git_revision: str | None


@dataclass(frozen=True)
class ImageRef:
    """A built image as cells and provenance see it."""

    stack: str
    tag: str
    image_id: str
    size_bytes: int
    repo_digest: str | None = None  # registry/repo@sha256:..., once pushed


@dataclass(frozen=True)
class CellRun:
    """One cell as a dispatcher hands it to an executor: the cell, the run folder it writes
    into (`cells/`, `logs/`), the tool's identity for its records, its stack's built image
    (None for an executor that needs none), the node it runs on, and what to call the
    moment the cell's own clock starts (a dispatcher holds it to its timeout from then).
    For a cell across nodes, `node` is this worker's place among them (worker/nodes.py):
    its files are its node's own and its worker gets the rendezvous; the launch and the
    container executors see to both."""

    cell: Cell
    run_root: Path
    tool: ToolInfo
    image: ImageRef | None = None
    node_id: str | None = None
    on_start: Callable[[], None] | None = None
    node: NodePlace = field(default_factory=NodePlace)

    def started(self) -> None:
        """Say that the cell's clock has started (before its worker exists: whoever sees
        the cell running sees it started)."""
        if self.on_start is not None:
            self.on_start()
