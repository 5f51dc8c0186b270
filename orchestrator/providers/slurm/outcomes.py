"""How an array task ended, read from Slurm, and the status that is.

Two sources, the same answers: `sacct` where accounting is on (it keeps every job), and
otherwise the controller (`scontrol show job`, which holds a job for MinJobAge after it
ends) with the task's own log as evidence. A task that wrote its records is judged by
them (group.py); these rules cover the tasks that Slurm ended first:

- TIMEOUT (and DEADLINE) -> `timeout`; OUT_OF_MEMORY, or slurmstepd's "Exceeded job memory
  limit" in the task's log (jobacct_gather's OverMemoryKill leaves FAILED) -> `oom`;
- NODE_FAIL, PREEMPTED, BOOT_FAIL -> `node_lost`, which the driver retries;
- CANCELLED by someone else -> `crashed`, with who and why; the sweep's own cancels are
  the driver's to judge (not journalled, or `queue_timeout`, or `budget_stopped`);
- anything else that ends without records -> `crashed`, with Slurm's state and exit code.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from orchestrator.providers.slurm import commands
from orchestrator.providers.slurm.jobs import time_limit_s
from orchestrator.results.records import Status

ENDED = frozenset({"COMPLETED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "CANCELLED", "NODE_FAIL",
                   "PREEMPTED", "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT"})
NODE_LOST = frozenset({"NODE_FAIL", "PREEMPTED", "BOOT_FAIL"})
MEMORY_KILL = re.compile(r"Exceeded job memory limit|exceeded memory limit|oom-kill|"
                         r"OUT_OF_MEMORY", re.IGNORECASE)
TIME_KILL = re.compile(r"DUE TO TIME LIMIT|DUE TO DEADLINE")


@dataclass(frozen=True)
class TaskState:
    """One array task as Slurm last described it."""

    index: int
    state: str  # Slurm's base state: PENDING, RUNNING, COMPLETED, CANCELLED, ...
    detail: str = ""  # what follows the state ("by 0"), or the pending reason
    exit_code: str = ""  # "0:0", "1:0", "0:9" (code:signal)
    node: str = ""
    elapsed_s: float = 0.0  # how long it ran (what an allocation is billed for)

    @property
    def ended(self) -> bool:
        return self.state in ENDED


def task_states(array_id: str, accounting: bool) -> dict[int, TaskState]:
    """Index -> state of every task of the array that Slurm still knows (`merged`)."""
    return _from_sacct(array_id) if accounting else _from_controller(array_id)


def merged(lines: Iterable[tuple[str, TaskState]]) -> dict[int, TaskState]:
    """Index -> state from Slurm's lines of an array, each its indices as listed ("4",
    "[5-9%2]") and its state. A task's own line wins over a range that lists it too:
    sacct and the controller list a pending range a moment after one of its tasks started,
    and once the sweep cancels the rest, that range reads CANCELLED for the started task as
    well (a running cell journalled as cancelled, and left running). Between two lines of
    one kind, the state past PENDING wins."""
    states: dict[int, TaskState] = {}
    own: set[int] = set()
    for listed, state in lines:
        single = listed.isdigit()
        for index in _indices(listed):
            if index in states and (
                    (index in own and not single)
                    or (state.state == "PENDING" and single == (index in own))):
                continue
            states[index] = replace(state, index=index)
            if single:
                own.add(index)
    return states


def _from_sacct(array_id: str) -> dict[int, TaskState]:
    lines = []
    for row in commands.accounted(array_id):
        base, _, detail = row.get("State", "").partition(" ")
        lines.append((row.get("JobID", "").partition("_")[2], TaskState(
            -1, base, detail or row.get("Reason", ""), row.get("ExitCode", ""),
            row.get("NodeList", ""), _seconds(row.get("Elapsed", "")))))
    return merged(lines)


def _from_controller(array_id: str) -> dict[int, TaskState]:
    lines = []
    for job in commands.show_jobs(array_id):
        if job.get("ArrayJobId") != array_id:
            continue
        reason = job.get("Reason", "")
        lines.append((job.get("ArrayTaskId", ""), TaskState(
            -1, job.get("JobState", ""), "" if reason == "None" else reason,
            job.get("ExitCode", ""), job.get("NodeList", ""), _seconds(job.get("RunTime", "")))))
    return merged(lines)


def _seconds(text: str) -> float:
    """Slurm's elapsed time ([D-]HH:MM:SS) in seconds; 0 where there is none."""
    return float(time_limit_s(text) or 0) if text.count(":") == 2 else 0.0


def _indices(text: str) -> list[int]:
    """Array indices as Slurm lists them: "4", "5-9%2", "[3,5-7]" -> [4], [5..9], [3,5,6,7]."""
    text = text.strip("[]").split("%")[0]
    found: list[int] = []
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            found.extend(range(int(low), int(high or low) + 1))
    return found


def ended_status(task: TaskState, task_id: str, log: str) -> tuple[Status, str]:
    """The status and message of a task that Slurm ended without the worker's records
    (never called for the sweep's own cancels)."""
    said = f"Slurm task {task_id} ended {task.state}" + (
        f" {task.detail}" if task.detail and task.state == "CANCELLED" else "") + (
        f" (exit code {task.exit_code})" if task.exit_code not in ("", "0:0") else "")
    if task.state in ("TIMEOUT", "DEADLINE") or TIME_KILL.search(log):
        return Status.TIMEOUT, f"{said}: its time limit was reached"
    if task.state == "OUT_OF_MEMORY" or MEMORY_KILL.search(log):
        return Status.OOM, f"{said}: Slurm killed it over its memory request (mem_gb)"
    if task.state in NODE_LOST:
        return Status.NODE_LOST, f"{said}: its node was lost" + (
            f" on {task.node}" if task.node else "")
    if task.state == "CANCELLED":
        return Status.CRASHED, f"{said}: cancelled outside this sweep"
    return Status.CRASHED, f"{said} without the worker's records"
