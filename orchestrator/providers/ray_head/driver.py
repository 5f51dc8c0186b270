"""The sweep's driver on the cluster's head, run as a Ray job: `python -m
orchestrator.providers.ray_head.driver driver_input.json` (docs/ARCHITECTURE.md: EC2 model).

It dispatches the cluster's cells, keeps the spend within the budget, and prints each cell's
records to the job's log as one numbered line; the user's `matrix run` follows that log
(follower.py) and merges the lines into its journal. Living on the head, it goes on if the
user's machine goes away, and then tears the cluster down itself, with the provider's own
`teardown`, once its follower has had `follower_grace_s` to collect the last lines.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.executors.environment import thread_settings
from orchestrator.registry.cell_run import Cell, ImageRef, ToolInfo
from orchestrator.registry.providers import validation_context
from orchestrator.results.records import Record
from orchestrator.run.cell_policy import CellPolicy
from orchestrator.run.costs import budget_guard
from orchestrator.run.dispatch import NODE_WAIT_GRACE_S, RayDispatcher

RECORDS_LINE = "matrix-bench-records "  # then {"seq": n, "cell_id": ..., "records": [...]}
DONE_LINE = "matrix-bench-done"


class Teardown(BaseModel):
    """How the head removes its own cluster: `function` ("module:name") called with `args`,
    returning one line per action. The provider's; the head imports it only then."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    function: str
    args: dict[str, str] = {}


class DriverInput(BaseModel):
    """Everything the head needs, written by the follower beside the job's code."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str  # the run tag of the cluster's nodes
    teardown: Teardown | None = None  # None: the cluster outlives a lost follower
    run_root: str  # on every node; may start with ~
    cells: list[Cell]
    images: dict[str, ImageRef]
    tool: ToolInfo
    budget_usd: float | None = None
    usd_per_hour: dict[str, float] = {}  # hardware name -> price of its node
    head_usd_per_hour: float = 0.0
    estimate_s: dict[str, float] = {}  # cell id -> estimated seconds
    follower_grace_s: float = 600.0
    node_wait_grace_s: float = NODE_WAIT_GRACE_S
    # the thread settings (OMP_NUM_THREADS ...) of the environment the input is made in, the
    # user's, for every cell: a Ray job's own has Ray's OMP_NUM_THREADS=1 where none is set
    threads: dict[str, str] = Field(default_factory=lambda: thread_settings(os.environ))


def records_line(seq: int, cell_id: str, records: list[Record]) -> str:
    batch = {"seq": seq, "cell_id": cell_id,
             "records": [r.model_dump(mode="json", exclude_none=True) for r in records]}
    return RECORDS_LINE + json.dumps(batch, separators=(",", ":"))


def drive(driver_input: DriverInput) -> None:
    """Run the cells on this cluster, printing each cell's records as it ends."""
    given = driver_input
    policy = CellPolicy(budget_guard(given.budget_usd, given.usd_per_hour,
                                     dict(given.estimate_s),
                                     fixed_usd_per_hour=given.head_usd_per_hour))
    dispatcher = RayDispatcher(Path(given.run_root).expanduser(), given.tool, [],
                               address="auto", node_wait_grace_s=given.node_wait_grace_s,
                               threads=given.threads)
    try:
        for seq, (cell, records) in enumerate(dispatcher.run(given.cells, given.images, policy)):
            print(records_line(seq, cell.cell_id, records), flush=True)
    finally:
        dispatcher.close()
    print(DONE_LINE, flush=True)


def tear_down_own_cluster(driver_input: DriverInput) -> None:
    """Remove every node of the run, the head included, as its provider says: the follower
    did not."""
    import importlib

    teardown = driver_input.teardown
    if teardown is None:
        print("head driver: the provider gave no teardown; the cluster stays", flush=True)
        return
    module, _, name = teardown.function.partition(":")
    for action in getattr(importlib.import_module(module), name)(**teardown.args):
        print(f"head driver: {action}", flush=True)


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # stopping the job (the follower did) unwinds the cells


def main(argv: list[str]) -> int:
    driver_input = DriverInput.model_validate_json(Path(argv[0]).read_text(encoding="utf-8"),
                                                   context=validation_context())
    signal.signal(signal.SIGTERM, _stop)
    failed = False
    try:
        drive(driver_input)
    except KeyboardInterrupt:
        return 130  # stopped by the follower, which tears the cluster down
    except Exception:  # a bug: shown in the job's log, and the cluster still goes
        traceback.print_exc()
        failed = True
    try:
        # The follower tears the cluster down as soon as it has the last line (and stops
        # this job); if it is gone, the cluster must not outlive the sweep.
        time.sleep(driver_input.follower_grace_s)
    except KeyboardInterrupt:
        return 130
    print(f"head driver: no follower took the results within {driver_input.follower_grace_s:g} s; "
          "tearing the cluster down", flush=True)
    tear_down_own_cluster(driver_input)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
