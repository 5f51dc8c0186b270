"""A sweep's Slurm cells, followed from the login node: submitted as one job array per
hardware entry, adopted where a killed driver left them running, journalled as they end,
and cancelled with the sweep.

Entering the group first takes over what an earlier driver of the same run left: records
its tasks wrote after it died are journalled, and its tasks still queued or running (found
by job name and comment) are followed instead of submitted again. Only the cells with
neither are submitted. A follower thread then asks Slurm every `slurm.poll_s` seconds how
each task stands, reads the records a task wrote, and judges the tasks that Slurm ended
first (outcomes.py). Leaving the group by Ctrl-C, SIGTERM or an error cancels every task
still live; those are not journalled, and the next `matrix run` runs them again.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType

from orchestrator.executors.logs import tail_of
from orchestrator.executors.outcome import not_run_records
from orchestrator.providers import Launch
from orchestrator.providers.slurm import commands
from orchestrator.providers.slurm.jobs import (
    Submission,
    job_name,
    memory_asked_mb,
    new_submission,
    parse_comment,
    read_submission,
    sbatch_options,
    task_script,
)
from orchestrator.providers.slurm.outcomes import TaskState, ended_status, task_states
from orchestrator.providers.slurm.settings import SlurmSection, slurm_settings
from orchestrator.registry.cell_run import Cell
from orchestrator.results.records import (
    CellRecord,
    Record,
    Status,
    parse_record,
    with_startup,
)
from orchestrator.run.cell_policy import CellPolicy
from orchestrator.run.costs import budget_guard

RECORDS_GRACE_S = 30.0  # records may show on a shared filesystem after Slurm says it ended
FAILED_POLLS_ALLOWED = 30  # consecutive polls Slurm may fail before the sweep gives up
THROTTLED = "JobArrayTaskLimit"  # pending behind max_parallel: not waiting on the cluster
PENDING_SAID_EVERY_S = 180.0  # a wait in Slurm's queue that goes on is said again this often
# what the commonest pending reasons mean for a sweep (squeue's %r, scontrol's Reason)
PENDING_MEANS = {
    "Resources": "the partition's nodes are busy, or have less free than a task asks "
                 "(cpus, mem_gb, gpus)",
    "Priority": "other jobs are ahead in the queue",
    "ReqNodeNotAvail": "the nodes it may run on are down, drained or reserved",
    "PartitionDown": "the partition is down",
    "PartitionNodeLimit": "the partition has too few nodes for it",
}


@dataclass
class _Task:
    """One cell's array task the group follows."""

    cell: Cell
    submission: Submission
    index: int
    array_id: str
    queued_since: float  # monotonic; restarts while the task waits on max_parallel only
    # the same on the wall clock, for the cell's recorded queue wait; None for a task an
    # earlier driver submitted (when is not known)
    waiting_since: float | None = None
    ended_since: float | None = None  # when it was first seen ended (or gone) without records

    @property
    def task_id(self) -> str:
        return f"{self.array_id}_{self.index}"


class SlurmGroup:
    """The provider's CellGroup (providers/__init__.py) for a sweep's Slurm cells."""

    def __init__(self, launch: Launch, settings: SlurmSection) -> None:
        self.launch, self.settings = launch, settings
        self.run_dir = launch.run_dir.resolve()
        self.tasks: dict[str, _Task] = {}  # task id -> task, for the live ones
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.accounting = False
        self.pending_said: tuple[tuple[tuple[str, str], int], ...] = ()
        self.pending_said_at = 0.0
        # the sweep's rules for its cells, as every dispatcher asks them (run/cell_policy.py)
        self.policy = CellPolicy(budget_guard(
            launch.spec.budget_usd, {n: p.usd_per_hour for n, p in launch.prices.items()},
            dict(launch.estimate_s)))

    def __enter__(self) -> SlurmGroup:
        self.accounting = self.settings.outcomes == "sacct" or (
            self.settings.outcomes == "auto" and commands.accounting_on())
        self.script = task_script(self.run_dir, self.settings.python)
        rest = self._take_over()
        # one array per hardware entry and node count: sbatch's --nodes is the array's
        by_hardware: dict[tuple[str, int], list[Cell]] = {}
        for cell in rest:
            by_hardware.setdefault((cell.hardware.name, cell.hardware.nodes), []).append(cell)
        try:
            for cells in by_hardware.values():
                self._submit(cells)
        except BaseException:
            self._cancel_live()
            raise
        self.thread = threading.Thread(target=self._follow, name="slurm-follower", daemon=True)
        self.thread.start()
        return self

    def wait(self) -> None:
        while self.thread is not None and self.thread.is_alive():
            self.thread.join(0.5)  # short joins: Ctrl-C reaches this thread between them
        if self.error is not None:
            raise self.error

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(30)
        self._cancel_live()

    def _cancel_live(self) -> None:
        with self.lock:
            live = sorted(self.tasks)  # task by task: an adopted array may hold others
            arrays = sorted({task.array_id for task in self.tasks.values()})
            self.tasks.clear()
        if live:
            commands.cancel(*live)
            self.launch.say(f"slurm: cancelled {len(live)} task(s) of this run (job array "
                            f"{', '.join(arrays)}); the next matrix run runs them again")

    def _take_over(self) -> list[Cell]:
        """Follow the run's live tasks and journal the records its tasks left; the cells
        with neither, which are still to be submitted."""
        wanted = {cell.cell_id: cell for cell in self.launch.cells}
        adopted = recovered = elsewhere = 0
        for queued in commands.queued(job_name(self.run_dir)):
            found = parse_comment(queued.comment)
            array_id, _, index = queued.job_id.partition("_")
            if found is None or found[0] != str(self.run_dir) or not index.isdigit():
                continue
            submission = read_submission(self.run_dir, found[1])
            cell = submission.cells[int(index)] if submission and \
                int(index) < len(submission.cells) else None
            if submission is None or cell is None or cell.cell_id not in wanted:
                elsewhere += 1  # a cell outside this sweep's selection (--only)
                continue
            self._follow_task(wanted.pop(cell.cell_id), submission, int(index), array_id,
                              submitted_now=False)
            adopted += 1
        for records_file in sorted(self.run_dir.glob("slurm/*/records/*.jsonl")):
            submission = read_submission(self.run_dir, records_file.parent.parent.name)
            number = int(records_file.stem) if records_file.stem.isdigit() else -1
            if submission is None or not 0 <= number < len(submission.cells):
                continue
            cell = submission.cells[number]
            if cell.cell_id in wanted:  # the others wait for a sweep that runs their cell
                self.launch.record(wanted.pop(cell.cell_id), _read_records(records_file))
                records_file.unlink(missing_ok=True)
                recovered += 1
        if elsewhere:
            self.launch.say(f"slurm: {elsewhere} task(s) of this run are for cells this sweep "
                            "does not run; they go on, and a later matrix run journals them")
        if adopted or recovered:
            self.launch.say(f"slurm: {adopted} task(s) of this run still queued or running "
                            f"are followed again, and {recovered} finished while no driver "
                            "followed them (journalled now); none is submitted twice")
        return list(wanted.values())

    def _submit(self, cells: list[Cell]) -> None:
        hardware = cells[0].hardware
        submission = new_submission(self.run_dir, hardware.name, cells, self.launch.images,
                                    self.launch.tool)
        indices = list(range(len(cells)))
        partition = slurm_settings(hardware).partition
        node = commands.partition(partition) if partition else None
        mem_mb = memory_asked_mb(hardware, node.cpus, node.mem_mb) if node else None
        options = sbatch_options(hardware, submission, self.run_dir, indices,
                                 self.settings.max_parallel, mem_mb)
        array_id = commands.submit(str(self.script), options,
                                   [str(submission.folder / "manifest.json")])
        for index, cell in enumerate(cells):
            self._follow_task(cell, submission, index, array_id)
        memory = f", {mem_mb / 1024:.3g} GB each" if mem_mb else ""
        self.launch.say(f"slurm: job array {array_id}: {len(cells)} cell(s) of "
                        f"{hardware.name} on partition {partition}{memory}, at most "
                        f"{self.settings.max_parallel} at once")

    def _follow_task(self, cell: Cell, submission: Submission, index: int, array_id: str,
                     submitted_now: bool = True) -> None:
        with self.lock:
            task = _Task(cell, submission, index, array_id, time.monotonic(),
                         time.time() if submitted_now else None)
            self.tasks[task.task_id] = task

    def _follow(self) -> None:
        failures = 0
        while not self.stopping.is_set():
            with self.lock:
                if not self.tasks:
                    return
            try:
                self._poll()
                failures = 0
            except commands.SlurmError as exc:
                failures += 1
                if failures == 1:
                    self.launch.say(f"slurm: {exc} (asking again)")
                if failures >= FAILED_POLLS_ALLOWED:
                    self.error = exc
                    return
            except BaseException as exc:  # a bug here must end the sweep, not hang it
                self.error = exc
                return
            self.stopping.wait(self.settings.poll_s)

    def _poll(self) -> None:
        with self.lock:
            arrays = sorted({task.array_id for task in self.tasks.values()})
        states: dict[str, TaskState] = {}
        for array_id in arrays:
            for index, state in task_states(array_id, self.accounting).items():
                states[f"{array_id}_{index}"] = state
        now = time.monotonic()
        with self.lock:
            tasks = list(self.tasks.values())
        running = [t.cell for t in tasks if (s := states.get(t.task_id)) and s.state == "RUNNING"]
        self._say_pending(tasks, states, now)  # before a timeout ends one of them
        for task in tasks:
            if self.stopping.is_set():
                return
            self._judge(task, states.get(task.task_id), now, running)

    def _say_pending(self, tasks: list[_Task], states: dict[str, TaskState],
                     now: float) -> None:
        """Why tasks wait in Slurm's queue, when the reasons change and every few minutes
        while they last: a sweep held PENDING for hours is never silent."""
        waiting: dict[tuple[str, str], list[_Task]] = {}
        for task in tasks:
            state = states.get(task.task_id)
            if state is not None and state.state == "PENDING" and state.detail != THROTTLED:
                waiting.setdefault((task.array_id, state.detail or "none given"),
                                   []).append(task)
        said = tuple(sorted((key, len(found)) for key, found in waiting.items()))
        if said == self.pending_said and now - self.pending_said_at < PENDING_SAID_EVERY_S:
            return
        self.pending_said, self.pending_said_at = said, now
        for (array_id, reason), found in sorted(waiting.items()):
            means = f": {PENDING_MEANS[reason]}" if reason in PENDING_MEANS else ""
            waited = max(now - task.queued_since for task in found)
            self.launch.say(f"slurm: job array {array_id}: {len(found)} task(s) pending, "
                            f"reason {reason}{means}; waited {waited:.0f} s of "
                            f"slurm.queue_timeout_s {self.settings.queue_timeout_s:g}")

    def _judge(self, task: _Task, state: TaskState | None, now: float,
               running: list[Cell]) -> None:
        """Journal the task if it ended (its records, or Slurm's word), or cancel it if it
        waited too long or the budget cannot afford it."""
        records_file = task.submission.records_file(task.index)
        if records_file.exists():
            self._end(task, _read_records(records_file))
            records_file.unlink(missing_ok=True)
            return
        if state is not None and state.state == "PENDING":
            if state.detail == THROTTLED:
                task.queued_since = now
                if task.waiting_since is not None:  # behind our own throttle: not a wait
                    task.waiting_since = time.time()
            if now - task.queued_since > self.settings.queue_timeout_s:
                self._stop(task, Status.QUEUE_TIMEOUT, (
                    f"waited {now - task.queued_since:.0f} s in Slurm's queue (reason: "
                    f"{state.detail or 'none given'}), past slurm.queue_timeout_s "
                    f"{self.settings.queue_timeout_s:g}: cancelled before it started"))
            elif refused := self.policy.refusal(task.cell, running, can_wait=False):
                self._stop(task, Status.BUDGET_STOPPED, refused.reason)
            return
        if state is not None and not state.ended:
            return
        # ended (or forgotten) without records: they may still be on their way
        task.ended_since = task.ended_since or now
        if (state is not None and state.state != "COMPLETED") or \
                now - task.ended_since > RECORDS_GRACE_S:
            self._ended_by_slurm(task, state)

    def _ended_by_slurm(self, task: _Task, state: TaskState | None) -> None:
        log = _logs_tail(task)
        if state is None:
            status, message = Status.CRASHED, (f"Slurm no longer knows task {task.task_id}, "
                                               "and it left no records")
        else:
            status, message = ended_status(state, task.task_id, log)
        if status is Status.NODE_LOST and self.policy.again(task.cell):
            with self.lock:
                self.tasks.pop(task.task_id, None)
            self.launch.say(f"slurm: {message}; running {task.cell.cell_id} again")
            self._submit([task.cell])
            return
        records = not_run_records(task.cell, status, message, log_tail=log or None)
        if state is not None:  # what it ran for: Slurm's elapsed time
            records[-1] = records[-1].model_copy(update={"wall_s": state.elapsed_s})
        self._end(task, records)

    def _stop(self, task: _Task, status: Status, reason: str) -> None:
        """Cancel a task the sweep gives up on, and journal why."""
        commands.cancel(task.task_id)
        self._end(task, not_run_records(task.cell, status, reason))

    def _end(self, task: _Task, records: list[Record]) -> None:
        with self.lock:
            if self.tasks.pop(task.task_id, None) is None:
                return  # cancelled by the sweep meanwhile: not journalled
        if task.waiting_since is not None and isinstance(records[-1], CellRecord):
            started = datetime.fromisoformat(records[-1].started_at).timestamp()
            records = with_startup(records, queued_s=max(0.0, started - task.waiting_since))
        self.launch.record(task.cell, self.policy.ended(task.cell, records))


def _read_records(path: Path) -> list[Record]:
    return [parse_record(json.loads(line))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _logs_tail(task: _Task) -> str:
    """What the cell's worker printed, then what Slurm's task said (slurmstepd's kills)."""
    worker = tail_of(Path(task.submission.run_dir) / "logs" / f"{task.cell.cell_id}.log")
    slurm = tail_of(task.submission.task_log(task.index))
    return "\n".join(filter(None, [worker, slurm]))
