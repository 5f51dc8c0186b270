"""What runs on a Ray node for one cell: the Ray task the dispatcher submits (dispatch.py),
and, for a cell across nodes (node_gang.py), how each node's task finds the rendezvous.

The task runs the cell with its stack's executor and the driver's thread settings, and
tells the driver's start board when the cell's clock starts. Across nodes, node 0's task
publishes its node's address and a free port on the board; every other node's task reads
it there, waiting at most rendezvous_wait_s, and its worker joins node 0's group.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

from orchestrator.executors import execute
from orchestrator.executors.environment import with_thread_settings
from orchestrator.executors.outcome import not_run_records
from orchestrator.registry.cell_run import Cell, ImageRef, ToolInfo
from orchestrator.registry.providers import validation_context
from orchestrator.results.records import Record, Status
from orchestrator.run.cell_starts import START_REPORT_TIMEOUT_S
from orchestrator.worker.nodes import NodePlace, rendezvous_wait_s

RENDEZVOUS_POLL_S = 0.2


def run_cell_on_node(cell_json: str, run_root: str, tool: ToolInfo, image: ImageRef | None,
                     board: Any, token: str, threads: dict[str, str],
                     node_rank: int = 0) -> list[dict[str, Any]]:
    """The Ray task: run one cell (or, across nodes, node `node_rank`'s part of it) on this
    node and return its records as JSON."""
    import ray

    cell = Cell.model_validate_json(cell_json, context=validation_context())
    node_id = ray.get_runtime_context().get_node_id()
    images = {cell.stack.name: image} if image is not None else {}
    nodes = cell.hardware.nodes
    node = None
    if nodes > 1:
        node = (rendezvous_here(board, token, nodes) if node_rank == 0 else
                rendezvous_of(board, token, nodes, node_rank, rendezvous_wait_s(cell.timeout_s)))
        if node is None:
            return _as_json(no_rendezvous_records(cell, node_rank))

    def started() -> None:
        # Awaited, so the board holds the start before the cell's worker exists: a Ray
        # worker that freezes from then on is still ended by the driver.
        if board is None:
            return
        try:
            ray.get(board.started.remote(token), timeout=START_REPORT_TIMEOUT_S)
        except ray.exceptions.TaskCancelledError:
            raise  # the sweep is stopping this cell: its executor must see it
        except (ray.exceptions.RayError, TimeoutError):
            pass  # a board that cannot take it: the executor's own timer still holds

    with with_thread_settings(threads):
        records = execute(cell, Path(run_root).expanduser(), tool, images, node_id=node_id,
                          on_start=started if node_rank == 0 else None, node=node)
    return _as_json(records)


def _as_json(records: list[Record]) -> list[dict[str, Any]]:
    return [r.model_dump(mode="json", exclude_none=True) for r in records]


def rendezvous_here(board: Any, token: str, nodes: int) -> NodePlace:
    """Node 0's task: this node's address and a free port, published on the board for the
    others, and its place (how long its ranks wait for the others is the worker's own to
    decide: worker/nodes.py, node_place)."""
    import ray

    address = ray.util.get_node_ip_address()
    with socket.socket() as probe:
        probe.bind(("", 0))
        port = int(probe.getsockname()[1])
    ray.get(board.publish.remote(token, f"{address}:{port}"), timeout=START_REPORT_TIMEOUT_S)
    return NodePlace(nodes=nodes, node_rank=0, addr=address, port=port)


def rendezvous_of(board: Any, token: str, nodes: int, rank: int,
                  wait_s: float) -> NodePlace | None:
    """Another node's task: node 0's rendezvous from the board, None where node 0 has not
    published it within `wait_s`."""
    import ray

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            published = ray.get(board.address.remote(token), timeout=START_REPORT_TIMEOUT_S)
        except (ray.exceptions.GetTimeoutError, TimeoutError):
            published = None
        if published:
            address, _, port = str(published).rpartition(":")
            return NodePlace(nodes=nodes, node_rank=rank, addr=address, port=int(port))
        time.sleep(RENDEZVOUS_POLL_S)
    return None


def no_rendezvous_records(cell: Cell, rank: int) -> list[Record]:
    """Another node's records where node 0 never published the rendezvous."""
    return not_run_records(
        cell, Status.FAILED,
        f"the rendezvous did not complete: node {rank} of {cell.hardware.nodes} waited "
        f"{rendezvous_wait_s(cell.timeout_s):g} s for node 0 to start")
