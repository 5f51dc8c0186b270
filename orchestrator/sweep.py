"""One sweep: plan the matrix, dispatch the cells, journal every result, derive the outputs.

This is what `matrix run` does. Results reach the journal as each cell ends, so an
interrupted sweep loses only the cells that were running; running it again resumes.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from orchestrator import __version__
from orchestrator.budget import BudgetGuard
from orchestrator.build import build_images, failed_image_records, image_stacks
from orchestrator.costs import Price, budget_guard, check_budget, priced, with_price
from orchestrator.dispatch import RayDispatcher, SerialDispatcher
from orchestrator.errors import DriverNodeLost
from orchestrator.executors import remove_leftovers
from orchestrator.executors.outcome import ToolInfo
from orchestrator.hardware import LocalMachine, detect_local
from orchestrator.images import ImageRef
from orchestrator.interrupts import signals_deferred
from orchestrator.matrix import Cell
from orchestrator.plan import Plan, Selector, make_plan
from orchestrator.progress import SweepProgress
from orchestrator.providers import Launch, provider_named, providers, registered_for
from orchestrator.records import CellRecord, Record, with_attempts
from orchestrator.report import write_report
from orchestrator.results import FULL, ResultStore, disk_full
from orchestrator.spec import MatrixSpec, load_spec

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class SweepOptions:
    output: Path | None = None  # run directory; default the spec's output or reports/<name>
    ray_address: str | None = None
    no_ray: bool = False
    only: tuple[Selector, ...] = ()
    rerun: bool = False
    allow_over_budget: bool = False
    # Settings a launching provider reads (`Launch.options`): for aws, `launcher` (how its
    # cluster comes up; tests bring one up locally) and `follower_grace_s`.
    provider_options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SweepSummary:
    run_dir: Path
    ran: int
    skipped: int
    statuses: dict[str, int]  # of the cells run now
    interrupted: bool
    stopped: str | None = None  # the fault that stopped it early (DriverNodeLost)


def run_dir_for(spec: MatrixSpec, output: Path | None) -> Path:
    return output or Path(spec.output or Path("reports") / spec.name)


def tool_info() -> ToolInfo:
    """This tool's version and git revision ("+dirty" when the tree has changes)."""
    try:
        def git(*args: str) -> str:
            return subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], capture_output=True,
                                  text=True, check=True, timeout=10).stdout.strip()

        revision = git("rev-parse", "HEAD")
        if git("status", "--porcelain", "--untracked-files=no"):
            revision += "+dirty"
    except (OSError, subprocess.SubprocessError):
        revision = None
    return ToolInfo(version=__version__, git_revision=revision)


def run_sweep(spec_path: Path, options: SweepOptions, console: Console) -> SweepSummary:
    spec = load_spec(spec_path)
    store = ResultStore(run_dir_for(spec, options.output))
    store.acquire()
    previous = signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    try:
        store.check_appendable(spec.name)
        return _run_locked(spec, store, options, console)
    except OSError as exc:
        if exc.errno in FULL:  # a cell's files or the outputs: the journal is whole
            raise disk_full(Path(exc.filename or store.root), exc) from None
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
        store.release()


def _terminate_as_interrupt(signum: int, frame: object) -> None:
    """SIGTERM (a scheduler, `kill`) stops the sweep the way Ctrl-C does."""
    raise KeyboardInterrupt


def _run_locked(spec: MatrixSpec, store: ResultStore, options: SweepOptions,
                console: Console) -> SweepSummary:
    tool = tool_info()
    local = detect_local()
    say = _say(console)
    dispatcher: RayDispatcher | SerialDispatcher | None = None
    if options.ray_address and not options.no_ray:  # a cluster decides which hardware exists
        dispatcher = RayDispatcher(store.root, tool, spec.hardware, options.ray_address,
                                   say=say)
    offered = dispatcher.offered() if dispatcher else None
    plan = make_plan(spec, local, store.results(), options.only, offered, options.rerun,
                     launch=not options.no_ray)
    _print_plan_line(console, plan, store.root)
    launched = _launched(plan.to_run) if offered is None else {}
    prices = priced(spec, plan, say, warn=lambda line: console.print(f"[yellow]{line}[/]"))
    check_budget(spec, plan, prices, options.allow_over_budget, say)
    for name, cells in launched.items():  # quotas and SDKs, before anything is built
        provider_named(name).check_launch(spec, cells, say)
    statuses: Counter[str] = Counter()
    interrupted = False
    stopped: str | None = None  # why a fault stopped the sweep before its cells all ran
    try:
        intake = _Intake(store, prices, statuses, spec.target_cv)
        to_run, images = _images_for(spec, plan.to_run, store.root, intake.take, console)
        launched = {name: kept for name, cells in launched.items()
                    if (kept := [c for c in cells if c in to_run])}
        away = {c.cell_id for cells in launched.values() for c in cells}
        here = [c for c in to_run if c.cell_id not in away]
        if here and dispatcher is None:
            dispatcher = (SerialDispatcher(store.root, tool) if options.no_ray else
                          RayDispatcher(store.root, tool, spec.hardware, say=say))
        serial = dispatcher is None or options.no_ray or dispatcher.offered() is None
        in_flight = (1 if serial else len(here)) + len(away)
        estimate_s = {k: v for k, v in plan.estimate_s.items() if v is not None}
        with SweepProgress(console, to_run, in_flight) as progress:
            intake.progress = progress
            with contextlib.ExitStack() as group_scope:
                groups = [group_scope.enter_context(provider_named(name).launch(Launch(
                    spec=spec, run_dir=store.root, cells=cells, images=images, tool=tool,
                    prices=prices, estimate_s=estimate_s, take=intake.take, say=say,
                    options=options.provider_options))) for name, cells in launched.items()]
                if here and dispatcher is not None:
                    guard = budget_guard(spec.budget_usd,
                                         {n: p.usd_per_hour for n, p in prices.items()},
                                         plan.estimate_s)
                    waves = _Waves(spec, store, options, local, offered, here, console)
                    while here:
                        for cell, records in dispatcher.run(here, images, guard):
                            intake.take(cell, records)
                        here = waves.next(guard, progress)
                for group in groups:
                    group.wait()
    except KeyboardInterrupt:
        interrupted = True
    except DriverNodeLost as exc:
        stopped = str(exc)
    except BaseException:
        if dispatcher is not None:
            dispatcher.close()
        raise
    with signals_deferred() as pending:
        _wind_down(spec, store, plan, dispatcher, interrupted, stopped, console)
    if pending and not interrupted:
        interrupted = True
        console.print("[yellow]interrupted:[/] the results and report above were written "
                      "first; run the same command again to resume.")
    if not pending and store.journal.exists():
        for provider in providers():
            provider.after_run(spec, store.root, say)
    return SweepSummary(run_dir=store.root, ran=sum(statuses.values()),
                        skipped=len(plan.skipped), statuses=dict(statuses),
                        interrupted=interrupted, stopped=stopped)


def _launched(cells: list[Cell]) -> dict[str, list[Cell]]:
    """Provider name -> the cells it brings nodes up for (the rest run here)."""
    groups: dict[str, list[Cell]] = {}
    for cell in cells:
        registered = registered_for(cell.hardware.kind)
        if registered.load().launches:
            groups.setdefault(registered.name, []).append(cell)
    return groups


def _wind_down(spec: MatrixSpec, store: ResultStore, plan: Plan,
               dispatcher: RayDispatcher | SerialDispatcher | None, interrupted: bool,
               stopped: str | None, console: Console) -> None:
    """After the cells, with Ctrl-C and SIGTERM deferred (interrupts.py): an interrupted
    sweep's containers removed, Ray stopped, the parquet and the report written whole."""
    if interrupted or stopped:
        # a backstop for what the executors left on this machine (containers)
        remove_leftovers(spec.name, [c.stack.effective_executor for c in plan.to_run])
        what = "[yellow]interrupted:[/]" if interrupted else f"[red]stopped:[/] {stopped};"
        console.print(f"{what} the cells that finished are in the journal; "
                      "run the same command again to resume.")
    if dispatcher is not None:
        dispatcher.close()
    if store.journal.exists():
        df = store.write_parquet()
        write_report(store.root, df, plan.skipped)
        console.print(f"results: {store.parquet}\nreport:  {store.report}")


class _Waves:
    """Adaptive repeats (repeats.py): once a wave of cells has ended, the next wave is the
    repeats the journal now asks for that this sweep has not run. Cells on an EC2 cluster
    launched for the sweep get theirs from the next `matrix run` (each wave would launch
    the cluster again)."""

    def __init__(self, spec: MatrixSpec, store: ResultStore, options: SweepOptions,
                 local: LocalMachine, offered: set[str] | None, first: list[Cell],
                 console: Console) -> None:
        self.spec, self.store, self.options = spec, store, options
        self.local, self.offered, self.console = local, offered, console
        self.attempted = {cell.cell_id for cell in first}

    def next(self, guard: BudgetGuard | None, progress: SweepProgress) -> list[Cell]:
        if self.spec.target_cv is None:
            return []
        # With --rerun, the journal counts only from this sweep's cells on: what it redid.
        history = [r for r in self.store.results()
                   if not self.options.rerun or r.cell.cell_id in self.attempted]
        plan = make_plan(self.spec, self.local, history, self.options.only, self.offered,
                         rerun=False, launch=False)
        wave = [c for c in plan.to_run if c.cell_id not in self.attempted]
        if not wave:
            return []
        self.attempted |= {cell.cell_id for cell in wave}
        if guard is not None:
            guard.estimate_s.update({k: v for k, v in plan.estimate_s.items() if v is not None})
        progress.more(wave)
        configs = len({cell.config_id for cell in wave})
        self.console.print(f"repeats: {configs} configuration(s) above until_cv "
                           f"{self.spec.target_cv:.1%}: one more repeat each", highlight=False)
        return wave


@dataclass
class _Intake:
    """Where every cell's records go, from this thread or the EC2 follower's: the attempt
    number and the price are set, the batch is journalled, the progress shows it."""

    store: ResultStore
    prices: dict[str, Price]
    statuses: Counter[str]
    target_cv: float | None = None  # repeats: {until_cv}, recorded with each cell
    progress: SweepProgress | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.attempts: dict[str, int] = {}  # cell_id -> attempts journalled so far
        for record in self.store.read():
            if isinstance(record, CellRecord):
                self.attempts[record.cell_id] = max(record.attempts,
                                                    self.attempts.get(record.cell_id, 0))

    def take(self, cell: Cell, records: list[Record]) -> None:
        with self.lock:
            record = records[-1]
            assert isinstance(record, CellRecord)
            attempts = self.attempts.get(cell.cell_id, 0) + record.attempts
            self.attempts[cell.cell_id] = attempts
            records = with_attempts(records, attempts)
            if self.target_cv is not None:
                last = records[-1]
                records = [*records[:-1], last.model_copy(update={"target_cv": self.target_cv})]
            records = with_price(records, cell.hardware.instance_type,
                                 self.prices.get(cell.hardware.name))
            self.store.append(records)
            record = records[-1]
            assert isinstance(record, CellRecord)
            self.statuses[record.status.value] += 1
            if self.progress is not None:
                self.progress.finished(cell, record)


def _say(console: Console) -> Callable[[str], None]:
    return lambda line: console.print(line, markup=False, highlight=False)


def _images_for(spec: MatrixSpec, cells: list[Cell], run_root: Path,
                take: Callable[[Cell, list[Record]], None], console: Console
                ) -> tuple[list[Cell], dict[str, ImageRef]]:
    """Build what the cells' stacks need; journal the cells of stacks without an image and
    return the cells left to run with the images they run in."""
    stacks = image_stacks(spec, cells)
    if not stacks:
        return cells, {}
    removed = remove_leftovers(spec.name, [s.effective_executor for s in stacks])
    if removed:
        console.print(f"removed {removed} container(s) a previous sweep left behind")
    built = build_images(spec, stacks, run_root, console)
    runnable = []
    for cell in cells:
        failure = built.failures.get(cell.stack.name)
        if failure is None:
            runnable.append(cell)
            continue
        take(cell, failed_image_records(cell, failure))
    return runnable, built.refs


def _print_plan_line(console: Console, plan: Plan, root: Path) -> None:
    estimate = plan.total_estimate_s()
    eta = f", about {estimate / 60:.1f} min" if estimate else ""
    reasons = Counter(s.reason.split(" (")[0] for s in plan.skipped)
    skipped = ", ".join(f"{n} {reason}" for reason, n in reasons.items())
    more = f" (up to {len(plan.to_run) + len(plan.may_add)} by repeats: until_cv)" \
        if plan.may_add else ""
    console.print(f"run {root}: {len(plan.to_run)} cells to run{more}{eta}"
                  + (f"; skipped: {skipped}" if skipped else ""), highlight=False)
