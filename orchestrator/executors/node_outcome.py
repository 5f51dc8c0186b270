"""How a cell across nodes ends, whichever dispatcher ran its nodes (Ray's gang, Slurm's
steps): node 0's records are the cell's, failed where another node failed it, the error
naming that node. One rule, so a cell across nodes reads the same from every dispatcher.
"""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.results.records import CellRecord, Record, Status


def node_failure(ended: Mapping[int, CellRecord], nodes: int) -> str | None:
    """Why another node failed the cell (`ended`: the other nodes' cell records by rank),
    the first in node order; None where every one ended ok."""
    for rank, record in sorted(ended.items()):
        if record.status is not Status.OK:
            return (f"node {rank} of {nodes} ended {record.status.value}: "
                    f"{record.error or 'no reason given'}")
    return None


def with_node_failure(records: list[Record], failure: str | None) -> list[Record]:
    """Node 0's records as the cell's, failed where `failure` (node_failure) says another
    node failed it: its error names that node, after node 0's own where it failed too."""
    if failure is None or not records:
        return records
    cell_record = records[-1]
    assert isinstance(cell_record, CellRecord)
    if cell_record.status is Status.OK:
        update = {"status": Status.FAILED, "error": failure}
    else:
        update = {"error": f"{cell_record.error}; {failure}"}
    return [*records[:-1], cell_record.model_copy(update=update)]
