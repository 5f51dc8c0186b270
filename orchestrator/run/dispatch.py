"""The Ray dispatcher: where and in which order cells run on Ray. Like the serial one
(`--no-ray`, serial.py) it yields each cell's records as it ends, and asks the sweep's
`CellPolicy` (cell_policy.py) whether a cell starts, whether one whose node was lost runs
again, and how its end counts.

`RayDispatcher` sends each cell to a node that offers the Ray resource `hw:<hardware name>`
(one unit per node, so a node runs one cell at a time and cells never disturb each other's
timing) and the cell's GPUs; a cell across nodes, to one such node per node it spans
(node_gang.py). Without an address it starts an embedded single-node Ray that offers every
local hardware entry and runs one cell at a time. A Ray task (ray_task.py) runs its cell
with the driver's thread settings (`OMP_NUM_THREADS` ...), not Ray's default for a task, so
a cell computes on the same threads either way.
"""

from __future__ import annotations

import contextlib
import enum
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from orchestrator import failpoints
from orchestrator.errors import DispatchError, DriverNodeLost
from orchestrator.executors import executor_kind
from orchestrator.executors.environment import thread_settings
from orchestrator.executors.logs import tail_of
from orchestrator.executors.outcome import not_run_records
from orchestrator.registry.cell_run import Cell, ImageRef, ToolInfo
from orchestrator.registry.providers import provider_for
from orchestrator.results.records import CellRecord, Record, Status, parse_record
from orchestrator.run.cell_policy import CellPolicy
from orchestrator.run.cell_starts import StartWatch
from orchestrator.run.node_gang import (
    Gang,
    cancel_pending,
    cancelled_records,
    end_gang,
    settle_followers,
    start_gang,
    take_follower,
    with_followers,
)
from orchestrator.run.ray_address import check_reachable
from orchestrator.run.ray_task import run_cell_on_node
from orchestrator.spec.model import Hardware

HW_PREFIX = "hw:"
EMBEDDED_OBJECT_STORE_BYTES = 100 * 1024 * 1024
WAIT_POLL_S = 1.0  # how often the deadlines of waiting cells are checked
# A submitted cell starts at once unless no node can take it yet (an autoscaler's nodes still
# booting): past its timeout plus this, it is given up as node_lost.
NODE_WAIT_GRACE_S = 600.0


class Loss(enum.Enum):
    """What died under a Ray task: nothing, the node that ran it, or the driver's own node
    before the task left it."""

    NONE = "none"
    NODE = "node"
    DRIVER_NODE = "driver_node"


def hw_resource(hardware_name: str) -> str:
    return f"{HW_PREFIX}{hardware_name}"


class RayDispatcher:
    """Runs cells as Ray tasks pinned to nodes by their `hw:` resource."""

    def __init__(self, run_root: Path, tool: ToolInfo, hardware: list[Hardware],
                 address: str | None = None,
                 node_wait_grace_s: float = NODE_WAIT_GRACE_S,
                 say: Callable[[str], None] = lambda line: None,
                 ray_log: Path | None = None,
                 threads: Mapping[str, str] | None = None) -> None:
        """`threads`: the thread settings every cell runs with; by default this process's
        (a head driver passes those of the user's, which Ray has replaced in its own)."""
        try:
            import ray
        except ImportError:
            raise DispatchError("Ray is not installed here: install it (pip install ray) "
                                "or run the cells serially with --no-ray") from None
        self.ray = ray
        self.run_root, self.tool, self.say = run_root, tool, say
        self.node_wait_grace_s = node_wait_grace_s
        self.threads = thread_settings(os.environ if threads is None else threads)
        self.address = address or os.environ.get("RAY_ADDRESS")
        self.embedded = not self.address
        with stderr_into(ray_log):
            self._connect(hardware)
        failpoints.reached("ray-start")  # the fault tests kill a sweep here, Ray just up
        self._task = ray.remote(run_cell_on_node)
        self._starts: StartWatch | None = None  # made with the first cell
        self._gangs: dict[Any, Gang] = {}  # node 0's ref -> a cell across nodes' tasks

    def _connect(self, hardware: list[Hardware]) -> None:
        """Start the embedded Ray, or connect to the cluster through a node of this machine."""
        ray = self.ray
        # ray.init installs its own SIGTERM handler, which ends the driver at once; the
        # sweep's handler (stop like Ctrl-C, keep what finished) is put back afterwards.
        sigterm = signal.getsignal(signal.SIGTERM)
        try:
            if self.embedded:
                # This machine offers the hardware whose provider runs its cells here;
                # address "local": always a new instance, never a cluster that runs here.
                local = {hw_resource(h.name): 1.0 for h in hardware
                         if not provider_for(h.kind).launches}
                ray.init(address="local", resources=local, include_dashboard=False,
                         log_to_driver=False, object_store_memory=EMBEDDED_OBJECT_STORE_BYTES,
                         configure_logging=False, namespace="matrix-bench")
            else:
                check_reachable(self.address or "")  # ray.init would retry for minutes
                ray.init(address=self.address, log_to_driver=False, configure_logging=False,
                         namespace="matrix-bench")
        except (ConnectionError, RuntimeError, ValueError) as exc:
            what = "start an embedded Ray" if self.embedded else f"reach Ray at {self.address}"
            raise DispatchError(f"cannot {what}: {str(exc).splitlines()[0]}") from None
        finally:
            if sigterm is not None:
                signal.signal(signal.SIGTERM, sigterm)

    def cluster_hardware(self) -> dict[str, int] | None:
        """The hardware names the cluster's live nodes offer, with how many nodes offer
        each (None for an embedded Ray: this machine, which the plan judges itself)."""
        if self.embedded:
            return None
        return {key.removeprefix(HW_PREFIX): int(amount)
                for key, amount in self.ray.cluster_resources().items()
                if key.startswith(HW_PREFIX)}

    def run(self, cells: list[Cell], images: dict[str, ImageRef],
            policy: CellPolicy | None = None) -> Iterator[tuple[Cell, list[Record]]]:
        """Submit as many cells of each hardware as nodes offer it (one in embedded mode)
        and yield each as it ends. A cell whose node died runs again on another node of its
        hardware where the `policy` says so; where none is left, it waits its timeout for
        one and is `node_lost`. A cell no node ever started is given up after its timeout
        plus the grace for nodes to boot, so no cell waits forever. A cell the policy holds
        back waits for running cells to end, and one it stops is `budget_stopped`. If the
        driver's own node dies, the cells it still runs end as they may, and
        then the driver connects again through another node on this machine, or raises
        DriverNodeLost with the cells not yet started left unrecorded."""
        ray = self.ray
        policy = policy or CellPolicy()
        if self._starts is None and cells:
            self._starts = StartWatch(ray)
        starts = self._starts
        queue = list(cells)
        in_flight: dict[Any, tuple[Cell, float]] = {}  # ref -> (cell, submitted at)
        seen: set[str] = set()  # hardware a live node has offered during this sweep
        unoffered_since: dict[str, float] = {}  # hardware offered once, now by no node
        own_node_lost = False  # this driver's raylet died: submit nothing until reconnected
        try:
            while queue or in_flight:
                if own_node_lost and not in_flight:  # the cells it ran have all ended
                    self._reconnect(len(queue))
                    starts = self._starts = StartWatch(ray)
                    own_node_lost = False
                running = [c for c, _ in in_flight.values()]
                for cell in [] if own_node_lost else self._submittable(queue, running):
                    refused = policy.refusal(cell, running)
                    if refused is not None and refused.waits:
                        continue
                    queue.remove(cell)
                    if refused is not None:
                        yield cell, policy.stopped(cell, refused.reason)
                        continue
                    running.append(cell)
                    ref = self._submit(cell, images, starts, _token(cell, policy.attempt(cell)))
                    in_flight[ref] = (cell, time.monotonic())
                followers = [r for gang in self._gangs.values() for r in gang.followers
                             if gang.rank_of(r) not in gang.ended]
                ready, _ = ray.wait([*in_flight, *followers], num_returns=1,
                                    timeout=WAIT_POLL_S)
                for ref in ready:
                    if ref not in in_flight:  # another node's part of a cell across nodes
                        gang = next(g for g in self._gangs.values() if ref in g.refs)
                        if take_follower(ray, gang, ref):  # it fails the cell
                            cancel_pending(ray, [gang.lead])
                        continue
                    cell, _ = in_flight.pop(ref)
                    records, lost = self._collect(ref, cell)
                    if lost is Loss.DRIVER_NODE:
                        own_node_lost = True
                        queue.insert(0, cell)  # it never started: not an attempt
                        continue
                    if lost is Loss.NODE and policy.again(cell):
                        queue.insert(0, cell)  # again, on another node of its hardware
                        continue
                    yield cell, policy.ended(cell, records)
                now = time.monotonic()
                live = self.cluster_hardware()
                if live is not None:
                    seen |= set(live)
                    unoffered_since = {name: unoffered_since.get(name, now)
                                       for name in seen - set(live)}
                if starts is not None:
                    starts.poll()
                for ref, (cell, since) in list(in_flight.items()):
                    overdue_s = starts.overdue(_token(cell, policy.attempt(cell)),
                                               cell.timeout_s) if starts else None
                    if overdue_s is not None:  # its executor cannot act: end it from here
                        ray.cancel(ref, force=True)
                        self._drop_gang(ref, force=True)
                        del in_flight[ref]
                        yield cell, policy.ended(cell, overdue_records(cell, overdue_s,
                                                                       self.run_root))
                        continue
                    reason = self._given_up(cell, now - since,
                                            now - unoffered_since.get(cell.hardware.name, now))
                    if reason:
                        ray.cancel(ref, force=False)
                        self._drop_gang(ref)
                        del in_flight[ref]
                        yield cell, policy.ended(cell, lost_node_records(cell, reason))
        finally:
            # Interrupted: each task's executor kills its worker group or removes its
            # container as Ray stops the task. A cancelled task blocked in a wait does not
            # unwind before the driver shuts down (measured: ray.wait on it times out), so
            # the sweep also removes the run's containers from this machine's engine.
            for ref in in_flight:
                ray.cancel(ref, force=False)
                self._drop_gang(ref)

    def _submit(self, cell: Cell, images: dict[str, ImageRef], starts: StartWatch | None,
                token: str) -> Any:
        """The cell's Ray task (node 0's, for a cell across nodes: node_gang.py)."""
        resource = hw_resource(cell.hardware.name)
        args = (cell.model_dump_json(), str(self.run_root), self.tool,
                images.get(cell.stack.name), starts.board if starts else None, token,
                self.threads)
        if cell.hardware.nodes > 1:
            gang = start_gang(self.ray, self._task, cell, resource, args)
            self._gangs[gang.lead] = gang
            return gang.lead
        return self._task.options(
            resources={resource: 1.0}, num_gpus=cell.hardware.gpus, num_cpus=0,
            max_retries=0, name=f"cell-{cell.cell_id}").remote(*args)

    def _drop_gang(self, ref: Any, force: bool = False) -> None:
        """A cell across nodes that ended: nothing of it left on any node."""
        gang = self._gangs.pop(ref, None)
        if gang is not None:
            end_gang(self.ray, gang, force)

    def _given_up(self, cell: Cell, waited_s: float, unoffered_s: float) -> str | None:
        """Why a submitted cell is given up as node_lost now, or None while it may end."""
        name = hw_resource(cell.hardware.name)
        if unoffered_s > cell.timeout_s:
            return (f"the node offering {name} was lost and no other node offered it "
                    f"within the cell's timeout ({cell.timeout_s:g} s)")
        if waited_s > cell.timeout_s + self.node_wait_grace_s:
            return (f"no node finished the cell within its timeout ({cell.timeout_s:g} s) "
                    f"plus {self.node_wait_grace_s:g} s for a node to come")
        return None

    def _submittable(self, queue: list[Cell], running: list[Cell]) -> list[Cell]:
        """The queued cells that a node can start now: per hardware, as many as nodes
        offer it (at least one, so an autoscaler sees the demand), a cell across nodes
        counting its nodes; one in all if embedded."""
        if self.embedded:
            return queue[:1] if not running else []
        capacity = {key.removeprefix(HW_PREFIX): max(1, int(amount))
                    for key, amount in self.ray.cluster_resources().items()
                    if key.startswith(HW_PREFIX)}
        busy: dict[str, int] = {}
        for cell in running:
            busy[cell.hardware.name] = busy.get(cell.hardware.name, 0) + cell.hardware.nodes
        chosen = []
        for cell in queue:
            name, nodes = cell.hardware.name, cell.hardware.nodes
            if busy.get(name, 0) + nodes <= max(capacity.get(name, 1), nodes):
                busy[name] = busy.get(name, 0) + nodes
                chosen.append(cell)
        return chosen

    def _reconnect(self, waiting: int) -> None:
        """After the driver's own node died: connect again through another live node on
        this machine (several raylets may run on one), or stop the sweep with the cells
        that have not run left for the same command to run again."""
        ray = self.ray
        dead = ray.get_runtime_context().get_node_id()
        here = ray.util.get_node_ip_address()
        try:
            others = [n for n in ray.nodes() if n["Alive"] and n["NodeID"] != dead
                      and n["NodeManagerAddress"] == here]
        except (ray.exceptions.RayError, ConnectionError, TimeoutError):  # GCS gone too
            others = []
        lost = (f"the Ray node this driver runs on ({dead[:12]}) died, so {waiting} "
                "cell(s) could not be started from here")
        if self.embedded or not others:
            raise DriverNodeLost(f"{lost}, and no other Ray node runs on this machine")
        ray.shutdown()
        try:
            self._connect([])
        except DispatchError as exc:
            raise DriverNodeLost(f"{lost}, and connecting again failed: {exc}") from None
        now = ray.get_runtime_context().get_node_id()
        self.say(f"warning: {lost}; connected again through node {now[:12]}")

    def _collect(self, ref: Any, cell: Cell) -> tuple[list[Record], Loss]:
        """The cell's records, and what died under it, if anything. A cell across nodes
        is node 0's records, failed where another node failed it, and its node's loss where
        another node was lost."""
        gang = self._gangs.get(ref)
        if gang is None:
            return self._collect_one(ref, cell)
        try:
            if gang.lost is not None:
                return lost_node_records(cell, gang.lost), Loss.NODE
            if gang.failure() is not None:  # node 0 was cancelled, as another node failed
                try:  # unless it had ended on its own first
                    ended = [parse_record(raw) for raw in self.ray.get(ref)]
                except self.ray.exceptions.RayError:
                    return cancelled_records(gang), Loss.NONE
                return with_followers(gang, ended), Loss.NONE
            records, lost = self._collect_one(ref, cell)
            if lost is Loss.NONE:
                settle_followers(self.ray, gang)
                records = with_followers(gang, records)
            return records, lost
        finally:
            self._drop_gang(ref)

    def _collect_one(self, ref: Any, cell: Cell) -> tuple[list[Record], Loss]:
        try:
            return [parse_record(raw) for raw in self.ray.get(ref)], Loss.NONE
        except self.ray.exceptions.LocalRayletDiedError:
            # The driver's own raylet died before it could hand the task to a node. Every
            # task submitted after that fails so at once, whatever node offers its hardware.
            return [], Loss.DRIVER_NODE
        except self.ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, OSError):
                raise exc.cause from None  # the node's disk or files: the sweep judges it
            raise  # our own executor failed: a bug, shown with its traceback
        except self.ray.exceptions.RayError as exc:  # its node or its Ray worker died
            return lost_node_records(cell, str(exc).splitlines()[0]), Loss.NODE

    def close(self) -> None:
        self.ray.shutdown()


def lost_node_records(cell: Cell, reason: str) -> list[Record]:
    """The records of a cell whose node went away before it reported."""
    return not_run_records(cell, Status.NODE_LOST, f"node lost: {reason}")


def overdue_records(cell: Cell, running_s: float, run_root: Path) -> list[Record]:
    """The records of a cell the driver ended past its timeout (cell_starts.py): `timeout`,
    with what its log holds where the driver can read it. Its container, if it runs on this
    machine's engine, is removed; one elsewhere is removed by that node's next sweep."""
    executor_kind(cell.stack.effective_executor).load().stop_cell(cell)
    records = not_run_records(
        cell, Status.TIMEOUT,
        f"no result within the cell's timeout_s of {cell.timeout_s:g} s: its executor did "
        f"not stop it (its Ray worker froze?), so the driver did, {running_s:.0f} s after "
        "it started", log_tail=tail_of(run_root / "logs" / f"{cell.cell_id}.log") or None)
    cell_record = records[-1]
    assert isinstance(cell_record, CellRecord)
    return [*records[:-1], cell_record.model_copy(update={"wall_s": running_s})]


def _token(cell: Cell, attempt: int) -> str:
    return f"{cell.cell_id}:{attempt}"


@contextlib.contextmanager
def stderr_into(path: Path | None) -> Iterator[None]:
    """This process's stderr into `path` (appended) while the block runs, where one is
    given: Ray's banners, and what the processes it starts write there, which inherit it."""
    if path is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
