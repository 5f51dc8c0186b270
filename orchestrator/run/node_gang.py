"""A cell across nodes on Ray (docs/ARCHITECTURE.md: a cell across nodes): a placement group
of one bundle per node, each bundle the hardware's `hw:<name>` unit (and its GPUs), spread
STRICTLY so no two land on one node, and one Ray task per bundle, node 0's first.

Node 0's task is the cell's: the dispatcher follows it as it follows any cell (its start,
its timeout, its node's loss), and its records are the cell's. The tasks find each other
through the start board (ray_task.py), and all their ranks join one group
(worker/nodes.py). Any node's failure fails the cell on every node: the dispatcher cancels
the tasks still running (each task's executor ends its worker's process group), removes the
placement group, and names the node that failed in the cell's error.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from orchestrator.executors.node_outcome import node_failure, with_node_failure
from orchestrator.executors.outcome import not_run_records
from orchestrator.registry.cell_run import Cell
from orchestrator.results.records import CellRecord, Record, Status, parse_record

# After node 0's task ends, how long the others may take to end on their own (their ranks
# leave the group and exit with it) before they are cancelled.
FOLLOWER_GRACE_S = 10.0


@dataclass
class Gang:
    """One cell's tasks across its nodes, node 0's first, and its placement group."""

    cell: Cell
    group: Any  # ray.util.placement_group.PlacementGroup
    refs: list[Any]
    ended: dict[int, CellRecord] = field(default_factory=dict)  # other nodes', by rank
    lost: str | None = None  # another node's Ray node died under it
    submitted: float = field(default_factory=time.monotonic)

    @property
    def lead(self) -> Any:
        return self.refs[0]

    @property
    def followers(self) -> list[Any]:
        return self.refs[1:]

    def rank_of(self, ref: Any) -> int:
        return self.refs.index(ref)

    def failure(self) -> str | None:
        """Why another node failed the cell, in node order, or None."""
        return node_failure(self.ended, len(self.refs))


def bundle(cell: Cell, resource: str) -> dict[str, float]:
    """One node's share of the cell: its hardware's unit and its GPUs."""
    return {resource: 1.0, **({"GPU": float(cell.hardware.gpus)} if cell.hardware.gpus else {})}


def start_gang(ray: Any, task: Any, cell: Cell, resource: str, args: tuple[Any, ...]) -> Gang:
    """The placement group and one task per node; `args` are the task's, before the
    node's rank (run_cell_on_node's node_rank)."""
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    nodes = cell.hardware.nodes
    group = placement_group([bundle(cell, resource)] * nodes, strategy="STRICT_SPREAD",
                            name=f"cell-{cell.cell_id}")
    refs = [task.options(
        resources={resource: 1.0}, num_gpus=cell.hardware.gpus, num_cpus=0, max_retries=0,
        name=f"cell-{cell.cell_id}-node{rank}",
        scheduling_strategy=PlacementGroupSchedulingStrategy(
            placement_group=group, placement_group_bundle_index=rank),
    ).remote(*args, rank) for rank in range(nodes)]
    return Gang(cell=cell, group=group, refs=refs)


def take_follower(ray: Any, gang: Gang, ref: Any) -> bool:
    """Read another node's ended task into `gang`; True where that fails the cell (its
    worker failed, or its Ray node died), so the rest are to be cancelled."""
    rank = gang.rank_of(ref)
    try:
        raw = ray.get(ref)
    except ray.exceptions.TaskCancelledError:
        return False  # the dispatcher's own cancel: the cell has already ended
    except ray.exceptions.RayError as exc:
        gang.lost = f"node {rank} of {len(gang.refs)}: {str(exc).splitlines()[0]}"
        return True
    record = [parse_record(r) for r in raw][-1]
    assert isinstance(record, CellRecord)
    gang.ended[rank] = record
    return record.status is not Status.OK


def end_gang(ray: Any, gang: Gang, force: bool = False) -> None:
    """Cancel the tasks still running (their executors end their workers) and remove the
    placement group: nothing of the cell is left on any node."""
    from ray.util.placement_group import remove_placement_group

    cancel_pending(ray, gang.refs, force)
    with contextlib.suppress(Exception):
        remove_placement_group(gang.group)


def cancel_pending(ray: Any, refs: list[Any], force: bool = False) -> None:
    """Cancel those of `refs` still running, never one that has ended: the driver's core
    worker aborted ("Tried to complete task that was not pending") when cancels met ended
    tasks."""
    _, pending = ray.wait(refs, num_returns=len(refs), timeout=0)
    for ref in pending:
        ray.cancel(ref, force=force)


def settle_followers(ray: Any, gang: Gang) -> None:
    """Once node 0's task has ended: the other nodes' ends, each given FOLLOWER_GRACE_S to
    come; those that do not are cancelled by `end_gang`."""
    pending = [ref for ref in gang.followers if gang.rank_of(ref) not in gang.ended]
    if not pending:
        return
    done, _ = ray.wait(pending, num_returns=len(pending), timeout=FOLLOWER_GRACE_S)
    for ref in done:
        take_follower(ray, gang, ref)


def with_followers(gang: Gang, records: list[Record]) -> list[Record]:
    """Node 0's records as the cell's, failed where another node failed it
    (node_outcome.py)."""
    return with_node_failure(records, gang.failure())


def cancelled_records(gang: Gang) -> list[Record]:
    """The records of a cell whose node 0 the dispatcher cancelled because another node
    failed it."""
    records = not_run_records(gang.cell, Status.FAILED, gang.failure() or "another node failed")
    cell_record = records[-1]
    assert isinstance(cell_record, CellRecord)
    # the time it held its nodes, its start included: what the cell cost
    return [*records[:-1], cell_record.model_copy(
        update={"wall_s": round(time.monotonic() - gang.submitted, 3)})]
