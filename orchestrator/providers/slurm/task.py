"""What one array task runs on its node: the cell of its index, with its stack's executor.

The task reads its submission's manifest, runs the cell as any executor here would (the
process executor in this environment, the docker executor with the node's engine; Podman
answers to the same API at DOCKER_HOST), and writes the attempt's records next to the
manifest, renamed into place whole so the driver never reads half a batch. A task that
Slurm ends (time limit, memory, cancel) writes nothing: the driver reads the outcome from
Slurm (outcomes.py).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

from orchestrator.executors import execute
from orchestrator.providers.slurm.jobs import Submission
from orchestrator.registry.providers import validation_context


def main(argv: list[str]) -> int:
    if len(argv) != 1 or "SLURM_ARRAY_TASK_ID" not in os.environ:
        print("usage: task.py MANIFEST, as a task of a Slurm job array", file=sys.stderr)
        return 2
    submission = Submission.model_validate_json(Path(argv[0]).read_text(encoding="utf-8"),
                                                context=validation_context())
    index = int(os.environ["SLURM_ARRAY_TASK_ID"])
    cell = submission.cells[index]
    job = f"{os.environ.get('SLURM_ARRAY_JOB_ID', '?')}_{index}"
    print(f"matrix-bench: cell {cell.cell_id} ({cell.workload} on {cell.hardware.name}/"
          f"{cell.stack.name}) as Slurm task {job} on {socket.gethostname()}", flush=True)
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
