"""The live view of a sweep: a progress bar with cells done, running and failed and an ETA,
and one line per finished cell (which is all a non-interactive log gets)."""

from __future__ import annotations

from collections import Counter
from types import TracebackType

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from orchestrator.registry.cell_run import Cell
from orchestrator.report.markdown import plain_text
from orchestrator.results.records import CellRecord, Status

STATUS_STYLE = {Status.OK: "green", Status.TIMEOUT: "yellow", Status.UNSUPPORTED: "cyan"}


def describe(cell: Cell, varying: set[str]) -> str:
    """`lstm_lm batch_size=32 on laptop/here #2`: the parameters that vary, not all of them."""
    params = " ".join(f"{k}={plain_text(v)}" for k, v in cell.params.items() if k in varying)
    return f"{cell.workload} {params} on {cell.hardware.name}/{cell.stack.name} #{cell.repeat}"


class SweepProgress:
    """Context manager around rich's Progress for one sweep."""

    def __init__(self, console: Console, cells: list[Cell], in_flight: int) -> None:
        self.console = console
        self.total = len(cells)
        self.in_flight = in_flight
        self.statuses: Counter[str] = Counter()
        self.varying = varying_params(cells)
        self.progress = Progress(
            TextColumn("[bold]cells"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[summary]}"), TimeElapsedColumn(), TextColumn("ETA"),
            TimeRemainingColumn(), console=console, transient=True,
        )
        self.task = self.progress.add_task("sweep", total=self.total, summary=self._summary())

    def __enter__(self) -> SweepProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.progress.__exit__(kind, value, tb)

    def more(self, cells: list[Cell]) -> None:
        """Cells added while the sweep runs (adaptive repeats)."""
        self.total += len(cells)
        self.progress.update(self.task, total=self.total, summary=self._summary())

    def finished(self, cell: Cell, record: CellRecord) -> None:
        self.statuses[record.status.value] += 1
        style = STATUS_STYLE.get(record.status, "red")
        # what a workload or user supplied is text: no markup, no control character
        note = escape(f" ({plain_text(record.error)})") if record.error else ""
        self.console.print(f"[{style}]{record.status.value:>14}[/] "
                           f"{escape(describe(cell, self.varying))}"
                           f" [dim]{record.wall_s:.1f}s{note}[/]", highlight=False)
        self.progress.update(self.task, advance=1, summary=self._summary())

    def _summary(self) -> str:
        done = sum(self.statuses.values())
        failed = done - self.statuses[Status.OK.value]
        running = min(self.in_flight, self.total - done)
        return f"done {done}, running {running}, failed {failed}"


def varying_params(cells: list[Cell]) -> set[str]:
    """The parameters that take more than one value among `cells`."""
    values: dict[str, set[str]] = {}
    for cell in cells:
        for key, value in cell.params.items():
            values.setdefault(key, set()).add(repr(value))
    return {key for key, seen in values.items() if len(seen) > 1}
