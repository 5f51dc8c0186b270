"""One sweep: plan the matrix, dispatch the cells, journal every result, derive the outputs.

This is what `matrix run` does. Results reach the journal as each cell ends, so an
interrupted sweep loses only the cells that were running; running it again resumes.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from orchestrator import __version__
from orchestrator.code_identity import git_revision
from orchestrator.database.live import SweepIndex
from orchestrator.errors import DriverNodeLost, MatrixError
from orchestrator.executors import remove_leftovers
from orchestrator.executors.ceilings import forget_ceilings
from orchestrator.hardware.local import detect_local
from orchestrator.plan.planner import Plan, Selector, make_plan
from orchestrator.registry.cell_run import Cell, ImageRef, ToolInfo
from orchestrator.registry.prices import Price
from orchestrator.registry.providers import Launch, provider_named, providers, registered_for
from orchestrator.report.frame import write_results
from orchestrator.report.writer import write_report
from orchestrator.results.records import CellRecord, Record, Status, with_attempts
from orchestrator.results.run_directory import FULL, CellResult, RunDirectory, disk_full
from orchestrator.run.cell_policy import CellPolicy
from orchestrator.run.costs import budget_guard, check_budget, plan_prices, with_price
from orchestrator.run.dispatch import RayDispatcher
from orchestrator.run.image_builds import build_images, failed_image_records, image_stacks
from orchestrator.run.interrupts import signals_deferred
from orchestrator.run.progress import SweepProgress
from orchestrator.run.serial import SerialDispatcher
from orchestrator.run.waves import UntilDecided, Waves
from orchestrator.spec.job import save_job
from orchestrator.spec.loaded import workloads_of
from orchestrator.spec.model import MatrixSpec
from orchestrator.validate import load_spec
from orchestrator.workload_declarations import save_declarations

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class SweepOptions:
    output: Path | None = None  # run directory; default the spec's output or reports/<name>
    ray_address: str | None = None
    no_ray: bool = False
    only: tuple[Selector, ...] = ()
    rerun: bool = False
    retry: frozenset[Status] = frozenset()  # outcomes to run again though unchanged
    allow_over_budget: bool = False
    verbose: bool = False  # Ray's own output on the terminal, not in the run's ray.log
    db: str | None = None  # the results store's URL: --db; None: MATRIX_BENCH_DB or the default
    # Settings a launching provider reads (`Launch.options`): for aws, `launcher` (how its
    # cluster comes up; tests bring one up locally) and `follower_grace_s`.
    provider_options: dict[str, Any] = field(default_factory=dict)
    until_decided: UntilDecided | None = None  # more repeats of what the answer cannot tell


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
    return ToolInfo(version=__version__, git_revision=git_revision(PROJECT_ROOT))


def run_sweep(spec_path: Path, options: SweepOptions, console: Console) -> SweepSummary:
    spec = load_spec(spec_path)
    index = SweepIndex.open(options.db, warn=lambda line: console.print(
        f"warning: {line}", style="yellow", markup=False, highlight=False))
    store = RunDirectory(run_dir_for(spec, options.output))
    made = [f for f in (store.root, store.logs, store.cells) if not f.exists()]
    try:
        store.acquire()
        previous = signal.signal(signal.SIGTERM, _terminate_as_interrupt)
        try:
            store.check_appendable(spec.name)
            if index is not None:
                index.catch_up(store)
            return _run_locked(spec, store, options, console, index)
        except OSError as exc:
            if exc.errno in FULL:  # a cell's files or the outputs: the journal is whole
                raise disk_full(Path(exc.filename or store.root), exc) from None
            raise
        except MatrixError:
            _unmake(made, store)
            raise
        finally:
            signal.signal(signal.SIGTERM, previous)
            store.release()
    finally:
        if index is not None:
            index.close()


def _unmake(made: list[Path], store: RunDirectory) -> None:
    """A sweep refused before any cell was recorded (`--only` naming nothing, a budget)
    leaves no run behind: a run folder it made goes, with the files it put there; folders
    it made in an existing one go if still empty."""
    if store.journal.exists():
        return
    if store.root in made:
        shutil.rmtree(store.root, ignore_errors=True)
        return
    for folder in made:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _terminate_as_interrupt(signum: int, frame: object) -> None:
    """SIGTERM (a scheduler, `kill`) stops the sweep the way Ctrl-C does."""
    raise KeyboardInterrupt


def _run_locked(spec: MatrixSpec, store: RunDirectory, options: SweepOptions,
                console: Console, index: SweepIndex | None) -> SweepSummary:
    sweep = _Sweep(spec, store, options, console, index)
    if not store.journal.exists():  # a new run: no node has measured its ceiling in it
        forget_ceilings(store.root)
    workloads = workloads_of(spec)
    save_declarations(store.root, [workloads.load(w.name) for w in spec.workloads
                                   if workloads.source(w.name) != "built-in"])
    save_job(store.root, spec.job)
    plan = sweep.plan()
    launched, prices = sweep.preflight(plan)
    statuses: Counter[str] = Counter()
    interrupted, stopped = False, None  # stopped: the fault that ended it before its cells ran
    try:
        sweep.execute(plan, launched, _Recorder(store, prices, statuses, spec.target_cv,
                                                index))
    except KeyboardInterrupt:
        interrupted = True
    except DriverNodeLost as exc:
        stopped = str(exc)
    except BaseException:
        sweep.close()
        raise
    summary = sweep.finish(plan, statuses, interrupted, stopped)
    if index is not None and not index.lost:
        sweep.say(f"store:   {index.results.url.shown}")
    return summary


class _Sweep:
    """One sweep's steps and what they share: plan, preflight (prices, budget, launch
    checks), execute (images, then the cells here and on providers' nodes), finish."""

    def __init__(self, spec: MatrixSpec, store: RunDirectory, options: SweepOptions,
                 console: Console, index: SweepIndex | None = None) -> None:
        self.spec, self.store, self.options, self.console = spec, store, options, console
        self.index = index  # the results store: earlier runs' wall times, for estimates
        self.say = _printer(console)
        self.tool = tool_info()
        self.local = detect_local()
        self.dispatcher: RayDispatcher | SerialDispatcher | None = None
        if options.ray_address and not options.no_ray:  # the cluster says which hardware exists
            self.dispatcher = RayDispatcher(store.root, self.tool, spec.hardware,
                                            options.ray_address, say=self.say,
                                            ray_log=self._ray_log())
        self.cluster_hardware = self.dispatcher.cluster_hardware() if self.dispatcher else None

    def _ray_log(self) -> Path | None:
        """Where Ray's banners go: the run's ray.log, or the terminal with --verbose."""
        return None if self.options.verbose else self.store.root / "ray.log"

    def plan(self, history: list[CellResult] | None = None, rerun: bool | None = None,
             launch: bool | None = None) -> Plan:
        """The plan from the journal (or `history`), as this sweep's options ask."""
        options = self.options
        return make_plan(self.spec, self.local,
                         self.store.results() if history is None else history,
                         options.only, self.cluster_hardware,
                         options.rerun if rerun is None else rerun,
                         launch=not options.no_ray if launch is None else launch,
                         earlier_walls=self.index.walls if self.index else None,
                         retry=options.retry)

    def preflight(self, plan: Plan) -> tuple[dict[str, list[Cell]], dict[str, Price]]:
        """Before anything is built: the plan line, the cells each launching provider takes,
        the prices, the budget and the providers' launch checks (quotas, SDKs)."""
        _print_plan_line(self.console, plan, self.store.root)
        launched = _launched(plan.to_run) if self.cluster_hardware is None else {}
        prices = plan_prices(self.spec, plan, self.say,
                             warn=lambda line: self.console.print(f"[yellow]{line}[/]"))
        check_budget(self.spec, plan, prices, self.options.allow_over_budget, self.say)
        for name, cells in launched.items():
            provider_named(name).check_launch(self.spec, cells, self.store.root, self.say)
        return launched, prices

    def execute(self, plan: Plan, launched: dict[str, list[Cell]], recorder: _Recorder) -> None:
        """Build the images, then run the cells: each launching provider's in its group,
        the rest here, and the later waves of both (adaptive repeats, --until-decided's)
        where the provider relaunches (Slurm: one more job array per wave)."""
        to_run, images = _images_for(self.spec, plan.to_run, self.store.root, recorder.record,
                                     self.console)
        launched = {name: kept for name, cells in launched.items()
                    if (kept := [c for c in cells if c in to_run])}
        away = {c.cell_id for cells in launched.values() for c in cells}
        here = [c for c in to_run if c.cell_id not in away]
        if here and self.dispatcher is None:
            self.dispatcher = (SerialDispatcher(self.store.root, self.tool) if self.options.no_ray
                               else RayDispatcher(self.store.root, self.tool, self.spec.hardware,
                                                  say=self.say, ray_log=self._ray_log()))
        serial = self.dispatcher is None or self.dispatcher.cluster_hardware() is None
        in_flight = (1 if serial or self.options.no_ray else len(here)) + len(away)
        estimate_s = {k: v for k, v in plan.estimate_s.items() if v is not None}
        def launch(cells: list[Cell]) -> Launch:
            return Launch(spec=self.spec, run_dir=self.store.root, cells=cells, images=images,
                          tool=self.tool, prices=recorder.prices, estimate_s=estimate_s,
                          record=recorder.record, say=self.say,
                          options=self.options.provider_options)

        with SweepProgress(self.console, to_run, in_flight) as progress, \
                contextlib.ExitStack() as group_scope:
            recorder.progress = progress
            groups = [group_scope.enter_context(provider_named(name).launch(launch(cells)))
                      for name, cells in launched.items()]
            if here:
                self._run_here(plan, here, images, recorder, progress)
            for group in groups:
                group.wait()
            for name, cells in launched.items():
                if provider_named(name).relaunches:
                    waves = self._waves(cells, launch=True)
                    while wave := waves.next(None, progress):
                        with provider_named(name).launch(launch(wave)) as group:
                            group.wait()

    def _run_here(self, plan: Plan, here: list[Cell], images: dict[str, ImageRef],
                  recorder: _Recorder, progress: SweepProgress) -> None:
        assert self.dispatcher is not None
        policy = CellPolicy(budget_guard(self.spec.budget_usd,
                                         {n: p.usd_per_hour for n, p in recorder.prices.items()},
                                         plan.estimate_s))
        waves = self._waves(here, launch=False)
        while here:
            for cell, records in self.dispatcher.run(here, images, policy):
                recorder.record(cell, records)
            here = waves.next(policy.guard, progress)

    def _waves(self, first: list[Cell], launch: bool) -> Waves:
        """The waves after `first` (waves.py), planned as this sweep plans."""
        return Waves(self.spec, self.store, first, self.console,
                     lambda history: self.plan(history, rerun=False, launch=launch),
                     self.options.until_decided, self.options.rerun)

    def close(self) -> None:
        if self.dispatcher is not None:
            self.dispatcher.close()

    def finish(self, plan: Plan, statuses: Counter[str], interrupted: bool,
               stopped: str | None) -> SweepSummary:
        """With Ctrl-C and SIGTERM deferred (interrupts.py): an interrupted sweep's
        containers removed, Ray stopped, the parquet and the report written whole; then
        each provider delivers the run where it keeps results."""
        with signals_deferred() as pending:
            self._wind_down(plan, interrupted, stopped)
        if pending and not interrupted:
            interrupted = True
            self.console.print("[yellow]interrupted:[/] the results and report above were "
                               "written first; run the same command again to resume.")
        if not pending and self.store.journal.exists():
            for provider in providers():
                provider.after_run(self.spec, self.store.root, self.say)
        return SweepSummary(run_dir=self.store.root, ran=sum(statuses.values()),
                            skipped=len(plan.skipped), statuses=dict(statuses),
                            interrupted=interrupted, stopped=stopped)

    def _wind_down(self, plan: Plan, interrupted: bool, stopped: str | None) -> None:
        store, console = self.store, self.console
        if interrupted or stopped:
            # a backstop for what the executors left on this machine (containers)
            remove_leftovers(self.spec.name, [c.stack.effective_executor for c in plan.to_run])
            what = "[yellow]interrupted:[/]" if interrupted else f"[red]stopped:[/] {stopped};"
            console.print(f"{what} the cells that finished are in the journal; "
                          "run the same command again to resume.")
        self.close()
        if store.journal.exists():
            df = write_results(store)
            write_report(store.root, df, plan.skipped, log_tails=store.log_tails(),
                         job=self.spec.job)
            console.print(f"results: {store.parquet}\nreport:  {store.report}")


def _launched(cells: list[Cell]) -> dict[str, list[Cell]]:
    """Provider name -> the cells it brings nodes up for (the rest run here)."""
    groups: dict[str, list[Cell]] = {}
    for cell in cells:
        registered = registered_for(cell.hardware.kind)
        if registered.load().launches:
            groups.setdefault(registered.name, []).append(cell)
    return groups


@dataclass
class _Recorder:
    """Where every cell's records go, from this thread or a provider's group's: the attempt
    number and the price are set, the batch is journalled, then indexed in the results
    store, and the progress shows it."""

    store: RunDirectory
    prices: dict[str, Price]
    statuses: Counter[str]
    target_cv: float | None = None  # repeats: {until_cv}, recorded with each cell
    index: SweepIndex | None = None  # the results store, written after the journal
    progress: SweepProgress | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.attempts: dict[str, int] = {}  # cell_id -> attempts journalled so far
        for record in self.store.read():
            if isinstance(record, CellRecord):
                self.attempts[record.cell_id] = max(record.attempts,
                                                    self.attempts.get(record.cell_id, 0))

    def record(self, cell: Cell, records: list[Record]) -> None:
        """Journal one attempt's batch (its cell record last) and show it."""
        with self.lock:
            ended = records[-1]
            assert isinstance(ended, CellRecord)
            attempts = self.attempts.get(cell.cell_id, 0) + ended.attempts
            self.attempts[cell.cell_id] = attempts
            records = with_attempts(records, attempts)
            if self.target_cv is not None:
                records = [*records[:-1],
                           records[-1].model_copy(update={"target_cv": self.target_cv})]
            records = with_price(records, cell, self.prices.get(cell.hardware.name))
            self.store.append(records)
            if self.index is not None:
                self.index.add(records)
            ended = records[-1]
            assert isinstance(ended, CellRecord)
            self.statuses[ended.status.value] += 1
            if self.progress is not None:
                self.progress.finished(cell, ended)


def _printer(console: Console) -> Callable[[str], None]:
    """A line printer for messages that hold no markup (paths, errors, prices)."""
    return lambda line: console.print(line, markup=False, highlight=False)


def _images_for(spec: MatrixSpec, cells: list[Cell], run_root: Path,
                record: Callable[[Cell, list[Record]], None], console: Console
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
        record(cell, failed_image_records(cell, failure))
    return runnable, built.refs


def _print_plan_line(console: Console, plan: Plan, root: Path) -> None:
    estimate = plan.total_estimate_s()
    eta = "" if not plan.to_run else (
        ", no estimate yet (no earlier run of some cells)" if estimate is None else
        f", about {estimate:.0f} s" if estimate < 60 else f", about {estimate / 60:.1f} min")
    reasons = Counter(s.reason.split(" (")[0] for s in plan.skipped)
    skipped = ", ".join(f"{n} {reason}" for reason, n in reasons.items())
    more = f" (up to {len(plan.to_run) + len(plan.may_add)} by repeats: until_cv)" \
        if plan.may_add else ""
    console.print(f"run {root}: {len(plan.to_run)} cells to run{more}{eta}"
                  + (f"; skipped: {skipped}" if skipped else ""), highlight=False)
