"""`matrix advise`: the user's whole training job projected onto every configuration the
runs measured, so the answer is a time, a cost and an energy for *their* job, with
intervals, and a choice for their deadline or budget (docs/advise.md).

For a job of N items (the workload's unit) and each configuration measured ok:

- throughput: the median of its repeats' throughputs (each repeat: the median items/s of
  its timed epochs, the unit `matrix compare` uses); its 95% interval by bootstrap over the
  repeats (compare's resampling), none under MIN_REPEATS repeats ("too few repeats");
- time = start-up + N / throughput, the start-up being what its rows recorded (the median
  Slurm queue wait, the median EC2 cluster boot and set-up); where nothing was recorded
  (local hardware) it counts as 0, said so;
- cost = time x the hardware's recorded price per hour (whole instance, its source named);
  no allowance for interruptions is made;
- energy = the GPU energy counters' joules per item over the timed windows x N, in kWh
  (CPU rows: not measured, never a guess); with the user's grid intensity, the CO2.

A configuration with a flagged row (implausible, throttled, ...) is never advised: it is
left out, with the reason. The fastest within the budget, the cheapest within the deadline,
and the Pareto front of time against cost are marked; a candidate whose time (or cost)
interval overlaps the pick's is a tie, and named as one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from orchestrator.errors import MatrixError
from orchestrator.report.compare import CONFIDENCE, MIN_REPEATS, resampled_medians
from orchestrator.spec.job import JobSpec
from orchestrator.spec.job import duration_s as spec_duration_s

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

SpotPrice = Callable[[str], tuple[float, str] | None]  # instance type -> (USD/h, source)


class AdviseError(MatrixError):
    """A question `matrix advise` or `matrix explain` cannot answer (a deadline that is not
    a duration, runs of several workloads and none chosen, no throughput at all)."""


@dataclass(frozen=True)
class Job:
    items: float
    deadline_s: float | None = None
    budget_usd: float | None = None
    grid_g_per_kwh: float | None = None  # gCO2 per kWh, the user's figure
    spot: bool = False  # priced at the provider's spot price where it has one
    interruptions_per_day: float | None = None  # the user's expectation, with --spot
    checkpoint_every_s: float | None = None

    @classmethod
    def of(cls, spec: JobSpec) -> Job:
        """The job a matrix's `job:` names (no spot pricing: the run's recorded prices)."""
        return cls(items=spec.items, deadline_s=spec.deadline_s, budget_usd=spec.budget,
                   grid_g_per_kwh=spec.grid_intensity)

    @property
    def rework_factor(self) -> float:
        """How much longer the job runs for the work interruptions throw away: each loses,
        on average, half a checkpoint interval, so a fraction R x T / 2 of each day is done
        again (1: no allowance is made)."""
        if not (self.spot and self.interruptions_per_day and self.checkpoint_every_s):
            return 1.0
        return 1 / (1 - self.interruptions_per_day * self.checkpoint_every_s / 2 / 86400)


@dataclass(frozen=True)
class Projection:
    """One configuration's answer for the job."""

    config_id: str
    label: str
    repeats: int
    items_per_s: float
    time_s: float
    time_range_s: tuple[float, float] | None  # 95% interval; None: too few repeats
    startup_s: float | None  # recorded queue wait + cluster boot; None: none recorded (0)
    usd_per_hour: float | None
    price_source: str | None
    cost_usd: float | None
    cost_range_usd: tuple[float, float] | None
    energy_kwh: float | None  # None: not measured (no GPU energy counter)
    co2_kg: float | None
    marks: list[str] = field(default_factory=list)  # fastest..., cheapest..., front

    def fits(self, job: Job) -> bool:
        """Within the job's deadline and budget (by the point figures; an interval that
        crosses a limit is shown, not hidden)."""
        return ((job.deadline_s is None or self.time_s <= job.deadline_s)
                and (job.budget_usd is None or (self.cost_usd is not None
                                                and self.cost_usd <= job.budget_usd)))


@dataclass(frozen=True)
class Advice:
    workload: str
    unit: str
    job: Job
    projections: list[Projection]  # fastest first
    left_out: dict[str, str]  # label -> why it is never advised
    fastest: Projection | None  # within the budget
    cheapest: Projection | None  # within the deadline
    ties: dict[str, list[str]]  # "fastest"/"cheapest" -> labels whose interval overlaps


def duration_s(text: str, option: str = "--deadline") -> float:
    """'36h', '90m', '2d', '600s' or '600' as seconds; AdviseError otherwise."""
    try:
        return spec_duration_s(text)
    except ValueError as exc:
        raise AdviseError(f"{option} {exc}") from None


def measured_rows(rows: pd.DataFrame, workload: str | None) -> tuple[str, pd.DataFrame]:
    """The workload asked for (the runs' only one, if none is) and its rows that ended ok
    with a throughput; AdviseError where that is no single workload the runs measured."""
    ok = rows[(rows["status"] == "ok") & rows["items_per_s"].notna()] if len(rows) else rows
    workloads = sorted(set(ok["workload"])) if len(ok) else []
    if not workloads:
        raise AdviseError("the runs hold no configuration with a throughput that ended ok")
    if workload is None and len(workloads) > 1:
        raise AdviseError(f"the runs hold several workloads ({', '.join(workloads)}): name "
                          "one with --workload")
    chosen = workload or workloads[0]
    if chosen not in workloads:
        raise AdviseError(f"--workload {chosen}: the runs measured none of it (they hold "
                          f"{', '.join(workloads)})")
    return chosen, ok[ok["workload"] == chosen]


def check_rework(job: Job) -> None:
    """AdviseError for an interruption allowance that cannot be met (or given without
    --spot, or half of it)."""
    rate, interval = job.interruptions_per_day, job.checkpoint_every_s
    if (rate is None) != (interval is None) or (rate is not None and not job.spot):
        raise AdviseError("--interruptions-per-day and --checkpoint-every go together, "
                          "with --spot")
    if rate is not None and interval is not None and rate * interval / 2 >= 86400:
        raise AdviseError("with that many interruptions a day and checkpoints that far "
                          "apart, every day's work is lost again: the job never ends")


def advise(rows: pd.DataFrame, job: Job, workload: str | None = None,
           spot_price: SpotPrice | None = None) -> Advice:
    """The job projected onto every configuration of `rows` (judged run frames);
    `spot_price`: an instance type's spot price and its source, with --spot."""
    from orchestrator.report.analysis import config_labels, repeat_medians

    chosen, ok = measured_rows(rows, workload)
    labels = config_labels(ok)
    flags = ok["flags"].fillna("").astype(str)
    flagged = ok[flags != ""]
    left_out = {labels[str(c)]: _why_flagged(group)
                for c, group in flagged.groupby("config_id", sort=True)}
    ok = ok[~ok["config_id"].isin(flagged["config_id"])]
    check_rework(job)
    projections = [_project(str(config), labels[str(config)], medians.to_numpy(dtype=float),
                            ok[ok["config_id"] == config], job, spot_price)
                   for config, medians in repeat_medians(ok).groupby(level="config_id")]
    projections += _scaled(ok, labels, job)
    projections.sort(key=lambda p: p.time_s)
    fastest, cheapest, ties = _picks(projections, job)
    return Advice(workload=chosen, unit=str(ok["item_unit"].iloc[0]) if len(ok) else "item",
                  job=job, projections=projections, left_out=left_out, fastest=fastest,
                  cheapest=cheapest, ties=ties)


def _scaled(ok: pd.DataFrame, labels: dict[str, str], job: Job) -> list[Projection]:
    """Device counts not measured that would meet the deadline (projection.py), marked
    "projected", without an interval."""
    from orchestrator.report.projection import configurations, projections

    if job.deadline_s is None:
        return []
    found = []
    for scaled in projections(configurations(ok), job.items, job.deadline_s):
        startup = _startup_s(ok[ok["config_id"] == scaled.from_config])
        time_s = (startup or 0.0) + job.items / scaled.items_per_s
        price = scaled.usd_per_hour
        found.append(Projection(
            config_id=scaled.from_config, repeats=0, items_per_s=scaled.items_per_s,
            label=f"{labels[scaled.from_config]} at {scaled.devices} devices (Amdahl, "
                  f"serial fraction {scaled.serial_fraction:.3f})",
            time_s=time_s, time_range_s=None, startup_s=startup, usd_per_hour=price,
            price_source=None,
            cost_usd=None if price is None else time_s / 3600 * price, cost_range_usd=None,
            energy_kwh=None, co2_kg=None, marks=["projected"]))
    return found


def _why_flagged(rows: pd.DataFrame) -> str:
    """The judge's reason for a configuration's flag, else its cell's, else the flags."""
    for column in ("judgement", "error"):
        if column in rows:
            said = [str(v) for v in rows[column].dropna() if str(v)]
            if said:
                return said[0]
    return "flagged " + ",".join(sorted(set(rows["flags"])))


def _project(config_id: str, label: str, repeats: np.ndarray, rows: pd.DataFrame,
             job: Job, spot_price: SpotPrice | None = None) -> Projection:
    import numpy as np

    from orchestrator.report.analysis import joules_per_item

    rate = float(np.median(repeats))
    rework = job.rework_factor
    startup = _startup_s(rows)
    time_s = (startup or 0.0) + job.items / rate * rework
    rates = _interval(repeats) if repeats.size >= MIN_REPEATS else None
    time_range = ((startup or 0.0) + job.items / rates[1] * rework,
                  (startup or 0.0) + job.items / rates[0] * rework) if rates else None
    price = _first(rows, "price_per_hour_usd")
    source = rows["price_source"].dropna() if "price_source" in rows else None
    shown_source = str(source.iloc[0]) if source is not None and len(source) else None
    instance = _text(rows, "instance_type")
    if job.spot and spot_price is not None and instance is not None:
        found = spot_price(instance)
        if found is not None:
            price, shown_source = found
    cost = None if price is None else time_s / 3600 * price
    cost_range = (None if price is None or time_range is None else
                  (time_range[0] / 3600 * price, time_range[1] / 3600 * price))
    per_item = joules_per_item(rows)
    energy = None if per_item is None else per_item * job.items / 3.6e6
    co2 = None if energy is None or job.grid_g_per_kwh is None else \
        energy * job.grid_g_per_kwh / 1000
    return Projection(config_id=config_id, label=label, repeats=int(repeats.size),
                      items_per_s=rate, time_s=time_s, time_range_s=time_range,
                      startup_s=startup,
                      usd_per_hour=price, price_source=shown_source, cost_usd=cost,
                      cost_range_usd=cost_range, energy_kwh=energy, co2_kg=co2)


def _startup_s(rows: pd.DataFrame) -> float | None:
    """The start-up a job on this configuration pays once: the median queue wait plus the
    median cluster boot its rows recorded; None where they recorded neither."""
    parts = [float(rows[c].dropna().median()) for c in ("queued_s", "provision_s")
             if c in rows and rows[c].notna().any()]
    return sum(parts) if parts else None


def _interval(repeats: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """The central CONFIDENCE interval of the median throughput over resamples of the
    repeats (compare's bootstrap, one side)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    medians = resampled_medians(repeats, rng)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(medians, [tail, 100 - tail])
    return float(low), float(high)


def _text(rows: pd.DataFrame, column: str) -> str | None:
    if column not in rows or not rows[column].notna().any():
        return None
    return str(rows[column].dropna().iloc[0])


def _first(rows: pd.DataFrame, column: str) -> float | None:
    if column not in rows or not rows[column].notna().any():
        return None
    return float(rows[column].dropna().iloc[0])


def _picks(found: list[Projection], job: Job
           ) -> tuple[Projection | None, Projection | None, dict[str, list[str]]]:
    """The fastest within the budget, the cheapest within the deadline, their ties, and
    the Pareto front of time against cost (marked on the projections)."""
    within_budget = [p for p in found if job.budget_usd is None or (
        p.cost_usd is not None and p.cost_usd <= job.budget_usd)]
    within_deadline = [p for p in found if p.cost_usd is not None and (
        job.deadline_s is None or p.time_s <= job.deadline_s)]
    fastest = min(within_budget, key=lambda p: p.time_s, default=None)
    cheapest = min(within_deadline, key=lambda p: p.cost_usd or 0.0, default=None)
    ties: dict[str, list[str]] = {"fastest": [], "cheapest": []}
    if fastest is not None:
        fastest.marks.append("fastest")
        ties["fastest"] = [p.label for p in within_budget if p is not fastest
                           and _overlap(p.time_range_s, fastest.time_range_s)]
    if cheapest is not None:
        cheapest.marks.append("cheapest")
        ties["cheapest"] = [p.label for p in within_deadline if p is not cheapest
                            and _overlap(p.cost_range_usd, cheapest.cost_range_usd)]
    priced = [p for p in found if p.cost_usd is not None]
    for p in priced:
        assert p.cost_usd is not None
        if not any(q.time_s <= p.time_s and (q.cost_usd or 0) <= p.cost_usd
                   and (q.time_s < p.time_s or (q.cost_usd or 0) < p.cost_usd)
                   for q in priced):
            p.marks.append("front")
    return fastest, cheapest, ties


def _overlap(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]
