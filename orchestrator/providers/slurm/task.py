"""What one array task runs on its node: the cell of its index, with its stack's executor.

The task reads its submission's manifest, runs the cell as any executor here would (the
process executor in this environment, the docker executor with the node's engine; Podman
answers to the same API at DOCKER_HOST), and writes the attempt's records next to the
manifest, renamed into place whole so the driver never reads half a batch. A task that
Slurm ends (time limit, memory, cancel) writes nothing: the driver reads the outcome from
Slurm (outcomes.py). A cell across nodes starts one step per node from here
(node_steps.py); `--node` runs one such step.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

from orchestrator.executors import execute
from orchestrator.providers.slurm.jobs import Submission
from orchestrator.providers.slurm.node_steps import NODE_FLAG, run_across_nodes, run_node_part
from orchestrator.registry.providers import validation_context


def main(argv: list[str]) -> int:
    step = argv[:1] == [NODE_FLAG]
    manifest = argv[1:] if step else argv
    if len(manifest) != 1 or "SLURM_ARRAY_TASK_ID" not in os.environ:
        print("usage: task.py [--node] MANIFEST, as a task of a Slurm job array",
              file=sys.stderr)
        return 2
    submission = Submission.model_validate_json(Path(manifest[0]).read_text(encoding="utf-8"),
                                                context=validation_context())
    index = int(os.environ["SLURM_ARRAY_TASK_ID"])
    if step:  # one node's part of a cell across nodes, started by its array task
        return run_node_part(submission, index)
    cell = submission.cells[index]
    job = f"{os.environ.get('SLURM_ARRAY_JOB_ID', '?')}_{index}"
    print(f"matrix-bench: cell {cell.cell_id} ({cell.workload} on {cell.hardware.name}/"
          f"{cell.stack.name}) as Slurm task {job} on {socket.gethostname()}", flush=True)
    if cell.hardware.nodes > 1:
        records = run_across_nodes(cell, submission, index, Path(sys.argv[0]).resolve())
    else:
        records = execute(cell, Path(submission.run_dir), submission.tool, submission.images,
                          node_id=f"slurm:{socket.gethostname()}")
    target = submission.records_file(index)
    partial = target.with_suffix(".partial")
    partial.write_text("".join(json.dumps(r.model_dump(mode="json")) + "\n" for r in records),
                       encoding="utf-8")
    os.replace(partial, target)
    print(f"matrix-bench: {records[-1].model_dump().get('status')}: records in {target}",
          flush=True)
    return 0
