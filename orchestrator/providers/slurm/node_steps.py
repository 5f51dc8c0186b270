"""A cell across nodes on Slurm (docs/ARCHITECTURE.md: a cell across nodes). Its array task
holds N nodes, one task each (`--nodes N --ntasks-per-node 1`, jobs.py), and runs on the
first of them: there it picks the rendezvous (that node's address as Slurm reaches it, its
NodeAddr, and a free port) and starts one step task per node with srun. Each step runs its
node's part of the cell (worker/nodes.py) and writes its records beside the submission's;
the array task reads them as the cell's: node 0's, failed where another node failed it
(executors/node_outcome.py), as Ray's gang does.

Every node's worker ends within the cell's timeout (its executor's own timer) or its
rendezvous wait; srun is given that and STEP_GRACE_S more, and is ended past it (the job's
end then ends every step). No rank is left behind: each step's executor ends its worker's
process group, and a node whose rank died fails its peers' collectives.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

from orchestrator.executors import execute
from orchestrator.executors.node_outcome import node_failure, with_node_failure
from orchestrator.executors.outcome import not_run_records
from orchestrator.providers.slurm import commands
from orchestrator.providers.slurm.jobs import Submission
from orchestrator.registry.cell_run import Cell
from orchestrator.results.records import CellRecord, Record, Status, parse_record
from orchestrator.worker.nodes import NodePlace

NODE_FLAG = "--node"  # task.py's argument for a step task: one node's part of a cell
RENDEZVOUS_VARIABLE = "MATRIX_BENCH_RENDEZVOUS"  # ADDRESS:PORT, from the array task
STEP_GRACE_S = 60.0  # past the cell's timeout, for the steps' start and their records


def run_across_nodes(cell: Cell, submission: Submission, index: int, script: Path
                     ) -> list[Record]:
    """The array task's part: the rendezvous, one step per node, and the cell's records."""
    nodes = cell.hardware.nodes
    address = commands.node_address(os.environ.get("SLURMD_NODENAME") or socket.gethostname())
    with socket.socket() as probe:  # free on every interface: NodeAddr may be a name
        probe.bind(("", 0))
        port = int(probe.getsockname()[1])
    for rank in range(nodes):
        submission.node_records_file(index, rank).unlink(missing_ok=True)
    srun = shutil.which("srun") or "srun"
    command = [srun, f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1",
               "--export=ALL", "--label", str(script), NODE_FLAG,
               str(submission.folder / "manifest.json")]
    print(f"matrix-bench: {nodes} nodes meet at {address}:{port}", flush=True)
    try:
        code: int | str = subprocess.run(
            command, env={**os.environ, RENDEZVOUS_VARIABLE: f"{address}:{port}"},
            stdin=subprocess.DEVNULL, timeout=cell.timeout_s + STEP_GRACE_S,
            check=False).returncode
    except subprocess.TimeoutExpired:
        code = f"no end within {cell.timeout_s + STEP_GRACE_S:g} s"
    ended = {rank: read_node_records(submission, index, rank) for rank in range(nodes)}
    lead = ended.pop(0)
    if not lead:
        return not_run_records(cell, Status.FAILED,
                               f"node 0 of {nodes} wrote no records (srun: {code})")
    missing = [rank for rank, records in ended.items() if not records]
    failure = node_failure({rank: _cell_record(records) for rank, records in ended.items()
                            if records}, nodes)
    if failure is None and missing:
        failure = f"node {missing[0]} of {nodes} wrote no records (srun: {code})"
    return with_node_failure(lead, failure)


def run_node_part(submission: Submission, index: int) -> int:
    """A step task's part: its node's share of the cell, its records written for the
    array task to read."""
    cell = submission.cells[index]
    rank = int(os.environ["SLURM_NODEID"])
    address, _, port = os.environ[RENDEZVOUS_VARIABLE].rpartition(":")
    here = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    print(f"matrix-bench: node {rank} of {cell.hardware.nodes} of cell {cell.cell_id} on "
          f"{here}", flush=True)
    records = execute(cell, Path(submission.run_dir), submission.tool, submission.images,
                      node_id=f"slurm:{here}",
                      node=NodePlace(nodes=cell.hardware.nodes, node_rank=rank, addr=address,
                                     port=int(port)))
    target = submission.node_records_file(index, rank)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_text("".join(json.dumps(r.model_dump(mode="json")) + "\n" for r in records),
                       encoding="utf-8")
    os.replace(partial, target)
    return 0


def read_node_records(submission: Submission, index: int, rank: int) -> list[Record]:
    """What node `rank`'s step wrote ([] where it wrote nothing)."""
    try:
        lines = submission.node_records_file(index, rank).read_text(encoding="utf-8")
    except OSError:
        return []
    return [parse_record(json.loads(line)) for line in lines.splitlines() if line.strip()]


def _cell_record(records: list[Record]) -> CellRecord:
    record = records[-1]
    assert isinstance(record, CellRecord)
    return record
