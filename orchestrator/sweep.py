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
from typing import TYPE_CHECKING

from rich.console import Console

from orchestrator import __version__
from orchestrator.budget import BudgetGuard
from orchestrator.build import build_images, failed_image_records, image_stacks
from orchestrator.cloud.costs import hardware_prices, plan_cost_usd, with_price
from orchestrator.cloud.pricing import Price
from orchestrator.dispatch import RayDispatcher, SerialDispatcher
from orchestrator.errors import BudgetError, DriverNodeLost
from orchestrator.executors import remove_leftovers
from orchestrator.executors.outcome import ToolInfo
from orchestrator.hardware import LocalMachine, detect_local
from orchestrator.images import ImageRef
from orchestrator.interrupts import signals_deferred
from orchestrator.matrix import Cell
from orchestrator.plan import Plan, Selector, make_plan
from orchestrator.progress import SweepProgress
from orchestrator.records import CellRecord, Record, with_attempts
from orchestrator.report import write_report
from orchestrator.results import FULL, ResultStore, disk_full
from orchestrator.spec import MatrixSpec, load_spec

if TYPE_CHECKING:
    from orchestrator.cloud.cluster import Clients, Launcher
    from orchestrator.cloud.ec2_group import Ec2Group

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class SweepOptions:
    output: Path | None = None  # run directory; default the spec's output or reports/<name>
    ray_address: str | None = None
    no_ray: bool = False
    only: tuple[Selector, ...] = ()
    rerun: bool = False
    allow_over_budget: bool = False
    launcher: Launcher | None = None  # how EC2 clusters come up; default Ray's launcher
    follower_grace_s: float = 600.0  # the head tears down alone if not followed by then


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
    dispatcher: RayDispatcher | SerialDispatcher | None = None
    if options.ray_address and not options.no_ray:  # a cluster decides which hardware exists
        dispatcher = RayDispatcher(store.root, tool, spec.hardware, options.ray_address,
                                   say=_say(console))
    offered = dispatcher.offered() if dispatcher else None
    plan = make_plan(spec, local, store.results(), options.only, offered, options.rerun,
                     launch_ec2=not options.no_ray)
    _print_plan_line(console, plan, store.root)
    launched = [c for c in plan.to_run if c.hardware.kind == "ec2"] if offered is None else []
    prices = priced(spec, plan, console)
    _check_budget(spec, plan, prices, options.allow_over_budget, console)
    clients = None
    if launched:
        from orchestrator.cloud.cluster import Clients, check_launch_quotas

        assert spec.aws is not None
        clients = Clients.for_region(spec.aws.region)
        check_launch_quotas(spec, clients.service_quotas, _say(console))
    statuses: Counter[str] = Counter()
    interrupted = False
    stopped: str | None = None  # why a fault stopped the sweep before its cells all ran
    try:
        intake = _Intake(store, prices, statuses, spec.target_cv)
        to_run, images = _images_for(spec, plan.to_run, store.root, intake.take, console)
        launched = [c for c in launched if c in to_run]
        here = [c for c in to_run if c not in launched]
        if here and dispatcher is None:
            dispatcher = (SerialDispatcher(store.root, tool) if options.no_ray else
                          RayDispatcher(store.root, tool, spec.hardware, say=_say(console)))
        serial = dispatcher is None or options.no_ray or dispatcher.offered() is None
        in_flight = (1 if serial else len(here)) + len(launched)
        with SweepProgress(console, to_run, in_flight) as progress:
            intake.progress = progress
            with contextlib.ExitStack() as group_scope:
                group = None
                if launched:
                    assert clients is not None
                    group = group_scope.enter_context(_ec2_group(
                        spec, store, launched, images, tool, prices, plan, options, clients,
                        intake.take, console))
                if here and dispatcher is not None:
                    guard = _budget_guard(spec, prices, plan)
                    waves = _Waves(spec, store, options, local, offered, here, console)
                    while here:
                        for cell, records in dispatcher.run(here, images, guard):
                            intake.take(cell, records)
                        here = waves.next(guard, progress)
                if group is not None:
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
    if not pending and store.journal.exists() and spec.aws is not None and \
            spec.aws.results_uri:
        _upload(store.root, spec.aws.results_uri, spec.aws.region, console)
    return SweepSummary(run_dir=store.root, ran=sum(statuses.values()),
                        skipped=len(plan.skipped), statuses=dict(statuses),
                        interrupted=interrupted, stopped=stopped)


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
                         rerun=False, launch_ec2=False)
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


def _ec2_group(spec: MatrixSpec, store: ResultStore, cells: list[Cell],
               images: dict[str, ImageRef], tool: ToolInfo, prices: dict[str, Price],
               plan: Plan, options: SweepOptions, clients: Clients,
               take: Callable[[Cell, list[Record]], None], console: Console) -> Ec2Group:
    """The launched cluster's group: its driver gets the cells, prices and budget."""
    from orchestrator.cloud.cluster import RayLauncher
    from orchestrator.cloud.costs import head_price
    from orchestrator.cloud.ec2_group import HEAD_RUN_ROOT, Ec2Group, Ec2Work
    from orchestrator.cloud.head_driver import DriverInput

    assert spec.aws is not None
    run_id = store.root.name  # the run tag; `matrix cleanup` spares the runs locked here
    head = head_price(spec)
    driver_input = DriverInput(
        run_id=run_id, region=spec.aws.region, run_root=f"{HEAD_RUN_ROOT}/{run_id}",
        cells=cells, images={c.stack.name: images[c.stack.name] for c in cells}, tool=tool,
        budget_usd=spec.budget_usd,
        usd_per_hour={name: price.usd_per_hour for name, price in prices.items()},
        head_usd_per_hour=head.usd_per_hour if head else 0.0,
        estimate_s={k: v for k, v in plan.estimate_s.items() if v is not None},
        follower_grace_s=options.follower_grace_s)
    work = Ec2Work(spec=spec, run_id=run_id, run_dir=store.root, driver_input=driver_input)
    return Ec2Group(work, options.launcher or RayLauncher(), clients, take, _say(console))


def _say(console: Console) -> Callable[[str], None]:
    return lambda line: console.print(line, markup=False, highlight=False)


def _budget_guard(spec: MatrixSpec, prices: dict[str, Price], plan: Plan) -> BudgetGuard | None:
    if spec.budget_usd is None or not prices:
        return None
    return BudgetGuard(spec.budget_usd, {n: p.usd_per_hour for n, p in prices.items()},
                       {k: v for k, v in plan.estimate_s.items() if v is not None})


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


def priced(spec: MatrixSpec, plan: Plan, console: Console) -> dict[str, Price]:
    """The price of each EC2 hardware entry that has cells to run, printed with its date."""
    if not any(cell.hardware.kind == "ec2" for cell in plan.to_run):
        return {}
    prices = hardware_prices(spec, warn=lambda line: console.print(f"[yellow]{line}[/]"))
    for name, price in prices.items():
        console.print(f"price: {name} ${price.usd_per_hour:g}/h ({price.describe()})")
    return prices


def _check_budget(spec: MatrixSpec, plan: Plan, prices: dict[str, Price],
                  allow_over: bool, console: Console) -> None:
    if spec.budget_usd is None:
        return
    if not prices:
        console.print(f"[yellow]note:[/] budget_usd {spec.budget_usd:g} is not enforced: no "
                      "hardware to run has a price (prices come with EC2 hardware)")
        return
    cost = plan_cost_usd(plan, prices)
    if cost > spec.budget_usd and not allow_over:
        raise BudgetError(f"{over_budget(spec.budget_usd, cost)}: raise budget_usd, run fewer "
                          "cells (--only), or pass --allow-over-budget")
    console.print(f"estimated cost: up to ${cost:.2f} of budget_usd {spec.budget_usd:g}")


def over_budget(budget_usd: float, cost: float) -> str:
    return (f"the plan costs up to ${cost:.2f} (each cell's estimate, or its timeout where it "
            "has none, x its price), over budget_usd "
            f"{budget_usd:g} by ${cost - budget_usd:.2f}")


def _upload(run_dir: Path, uri: str, region: str, console: Console) -> None:
    """Copy the run's results to S3; a failure is reported, the local run stays whole."""
    import boto3

    from orchestrator.cloud.s3 import upload_run

    try:
        keys = upload_run(boto3.client("s3", region_name=region), run_dir, uri)
    except Exception as exc:  # botocore errors: no access, no bucket, no network
        console.print(f"[red]upload to {uri} failed:[/] {str(exc).splitlines()[0]} (the run "
                      f"is complete in {run_dir})")
        return
    console.print(f"uploaded: {len(keys)} files to {uri.rstrip('/')}/{run_dir.name}/")


def _print_plan_line(console: Console, plan: Plan, root: Path) -> None:
    estimate = plan.total_estimate_s()
    eta = f", about {estimate / 60:.1f} min" if estimate else ""
    reasons = Counter(s.reason.split(" (")[0] for s in plan.skipped)
    skipped = ", ".join(f"{n} {reason}" for reason, n in reasons.items())
    more = f" (up to {len(plan.to_run) + len(plan.may_add)} by repeats: until_cv)" \
        if plan.may_add else ""
    console.print(f"run {root}: {len(plan.to_run)} cells to run{more}{eta}"
                  + (f"; skipped: {skipped}" if skipped else ""), highlight=False)
