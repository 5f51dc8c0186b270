"""The waves of a sweep after its first: adaptive repeats (plan/repeats.py), then, with
`matrix run --until-decided`, the repeats that settle the answer (docs/advise.md).

Until decided: once the matrix's own repeats have ended, the answer is asked of the run's
rows as `matrix advise` gives it (report/advise.py: the matrix's `job:`, else which is
fastest and cheapest per million items). The configurations still in contest are each
pick and the ties within its noise (report/picks.py). Each gets one more repeat, a wave at
a time, until no tie is left (decided), or a contested configuration has run `max_repeats`
(flagged ones count: they were paid for), or
`max_time_s` has passed since the sweep began (not decided, said so with what is still
tied). Only contested configurations run again; the repeats land in the same journal and
results store as any other.

Each `Waves` follows the cells of one place: those run here, or a launching provider's.
A provider whose launch is cheap (`relaunches`: Slurm submits one more job array) runs its
waves in the sweep; one whose launch is a new cluster (EC2) leaves its cells' repeats to
the next `matrix run`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from orchestrator.plan.planner import Plan
    from orchestrator.registry.cell_run import Cell
    from orchestrator.results.run_directory import CellResult, RunDirectory
    from orchestrator.run.budget import BudgetGuard
    from orchestrator.run.progress import SweepProgress
    from orchestrator.spec.model import MatrixSpec

DEFAULT_MAX_REPEATS = 10


@dataclass(frozen=True)
class UntilDecided:
    """`--until-decided`'s limits: repeats per contested configuration, seconds in all."""

    max_repeats: int = DEFAULT_MAX_REPEATS
    max_time_s: float | None = None


@dataclass(frozen=True)
class Contest:
    """Which configurations the answer cannot yet tell apart, and how it reads."""

    configs: dict[str, int]  # config_id -> the clean repeats the answer stands on
    said: list[str]  # "fastest: X, a tie with Y" per question still open


class Waves:
    """Once a wave of cells has ended, the next: the repeats the journal now asks for that
    this sweep has not run; then, until decided, one more repeat of each contested
    configuration."""

    def __init__(self, spec: MatrixSpec, store: RunDirectory, first: list[Cell],
                 console: Console, plan_history: Callable[[list[CellResult]], Plan],
                 until: UntilDecided | None,
                 rerun: bool = False) -> None:
        self.spec, self.store, self.console = spec, store, console
        self.plan_history = plan_history  # (history) -> Plan, as the sweep plans
        self.until, self.rerun = until, rerun
        self.attempted = {cell.cell_id for cell in first}
        # the configurations of the place that ran `first`: here, or one provider's nodes
        self.here = {cell.config_id for cell in first}
        self.first = {cell.config_id: cell for cell in first if cell.repeat == 1}
        self.started = time.monotonic()
        self.adaptive_done = spec.target_cv is None

    def next(self, guard: BudgetGuard | None, progress: SweepProgress) -> list[Cell]:
        wave = [] if self.adaptive_done else self._adaptive(guard)
        if not wave:
            self.adaptive_done = True
            wave = self._settling()
        if wave:
            self.attempted |= {cell.cell_id for cell in wave}
            progress.more(wave)
        return wave

    def _adaptive(self, guard: BudgetGuard | None) -> list[Cell]:
        # With --rerun, the journal counts only from this sweep's cells on: what it redid.
        history = [r for r in self.store.results()
                   if not self.rerun or r.cell.cell_id in self.attempted]
        plan = self.plan_history(history)
        wave = [c for c in plan.to_run
                if c.cell_id not in self.attempted and c.config_id in self.here]
        if not wave:
            return []
        if guard is not None:
            guard.estimate_s.update({k: v for k, v in plan.estimate_s.items() if v is not None})
        configs = len({cell.config_id for cell in wave})
        target = self.spec.target_cv or 0.0
        self._say(f"repeats: {configs} configuration(s) above until_cv {target:.1%}: one more "
                  "repeat each")
        return wave

    def _settling(self) -> list[Cell]:
        """One more repeat of each contested configuration, or [] once decided or out of
        its limits (said)."""
        from orchestrator.plan.cells import as_repeat

        if self.until is None:
            return []
        contest = contested(self.store, self.spec)
        if not contest.configs:
            self._say("until decided: decided, no configuration is within the noise of a pick")
            return []
        ties = "; ".join(contest.said)
        # every repeat the journal holds counts, a flagged one (dropped by the answer) too
        ran: dict[str, int] = {}
        for result in self.store.results():
            config = result.cell.config_id
            ran[config] = max(ran.get(config, 0), result.cell.repeat)
        full = [c for c in contest.configs if ran.get(c, 0) >= self.until.max_repeats]
        late = self.until.max_time_s is not None and \
            time.monotonic() - self.started >= self.until.max_time_s
        if full or late:
            why = (f"{self.until.max_repeats} repeats (--max-repeats)" if full else
                   f"{self.until.max_time_s:g} s (--max-time)")
            self._say(f"until decided: not decided within {why}: {ties}")
            return []
        wave = [as_repeat(self.first[c], ran.get(c, 0) + 1) for c in contest.configs
                if c in self.first]
        wave = [cell for cell in wave if cell.cell_id not in self.attempted]
        if wave:
            self._say(f"until decided: one more repeat of {len(wave)} configuration(s): "
                      f"{ties}")
        return wave

    def _say(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False)


def contested(store: RunDirectory, spec: MatrixSpec) -> Contest:
    """The configurations the run's answer cannot tell apart yet (module docstring)."""
    from orchestrator.report.advise import PER_MILLION, AdviseError, Job, advise
    from orchestrator.report.frame import run_frame

    rows = run_frame(store)
    if rows.empty or "items_per_s" not in rows:
        return Contest({}, [])
    configs: dict[str, int] = {}
    said = []
    job = Job.of(spec.job) if spec.job is not None else PER_MILLION
    workloads = [spec.job.workload] if spec.job is not None and spec.job.workload else \
        sorted(set(rows.loc[rows["status"] == "ok", "workload"]))
    for workload in workloads:
        try:
            found = advise(rows, job, workload)
        except AdviseError:
            continue
        by_label = {p.label: p for p in found.projections if not p.projected}
        for question in ("fastest", "cheapest"):
            pick, tied = found.pick(question), found.ties.get(question, [])
            if pick is None or pick.projected or not tied:
                continue
            for label in (pick.label, *tied):
                configs[by_label[label].config_id] = by_label[label].repeats
            said.append(f"{question}: {pick.label}, within the noise of {', '.join(tied)}")
    return Contest(configs, said)
