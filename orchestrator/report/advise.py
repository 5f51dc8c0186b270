"""`matrix advise`: the user's whole training job projected onto every configuration the
runs measured, so the answer is a time, a cost and an energy for *their* job, with
intervals, and a choice for their deadline or budget (docs/advise.md).

For a job of N items (the workload's unit) and each configuration measured ok:

- throughput: the median of its repeats' throughputs (each repeat: the median items/s of
  its timed epochs, the unit `matrix compare` uses); its 95% interval a t-interval over the
  repeats (confidence.py), none under 3 repeats, said so;
- time = start-up + N / throughput, the start-up being what its rows recorded (the median
  Slurm queue wait, the median EC2 cluster boot and set-up); where nothing was recorded
  (local hardware) it counts as 0, said so;
- cost = time x the hardware's recorded price per hour (whole instance, its source named);
  with --spot, an EC2 row at its spot price and only such a row with the interruptions'
  allowance;
- energy = the GPU energy counters' joules per item over the timed windows x N, in kWh
  (CPU rows: not measured, never a guess); with the user's grid intensity, the CO2.

Which repeats an answer stands on is candidates.py's (a flagged repeat is dropped, its
configuration kept with its clean ones); which configuration answers each question, with
its ties and its caveats, is picks.py's. Every surface that names a best configuration
calls `advise`: one answer, computed once.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from orchestrator.report.advice import (
    PER_MILLION,
    Advice,
    AdviseError,
    Job,
    Projection,
    SpotPrice,
)
from orchestrator.report.confidence import interval
from orchestrator.spec.job import duration_s as spec_duration_s

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

__all__ = ["PER_MILLION", "Advice", "AdviseError", "Job", "Projection", "SpotPrice", "advise",
           "duration_s"]

def duration_s(text: str, option: str = "--deadline") -> float:
    """'36h', '90m', '2d', '600s' or '600' as seconds; AdviseError otherwise."""
    try:
        return spec_duration_s(text)
    except ValueError as exc:
        raise AdviseError(f"{option} {exc}") from None


def measured_rows(rows: pd.DataFrame, workload: str | None) -> tuple[str, pd.DataFrame]:
    """The workload asked for (the runs' only one, if none is) and its rows that ended ok
    with a throughput; AdviseError where that is no single workload the runs measured."""
    # a run whose every cell failed has no throughput column at all
    ok = rows[(rows["status"] == "ok") & rows["items_per_s"].notna()] \
        if len(rows) and "items_per_s" in rows else rows.iloc[0:0]
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
    """The job projected onto every configuration of `rows` (judged run frames), and the
    picks; `spot_price`: an instance type's spot price and its source, with --spot."""
    from orchestrator.report.analysis import noise_caveats, repeat_medians
    from orchestrator.report.candidates import candidates
    from orchestrator.report.picks import decide

    chosen, ok = measured_rows(rows, workload)
    check_rework(job)
    pool = candidates(ok, job.include_flagged)
    kept = pool.rows
    of_config = dict(iter(kept.groupby("config_id", sort=False)))
    noise = noise_caveats(kept)
    projections = [_project(str(config), pool.labels[str(config)],
                            medians.to_numpy(dtype=float), of_config[config], job,
                            spot_price, pool.flags.get(str(config), ""),
                            noise.get(str(config), ""))
                   for config, medians in repeat_medians(kept).groupby(level="config_id")]
    projections += _scaled(kept, pool.labels, job)
    projections.sort(key=lambda p: p.time_s)
    unit = ok["item_unit"].dropna()
    found = Advice(workload=chosen, unit=str(unit.iloc[0]) if len(unit) else "item",
                   job=job, projections=projections, left_out=pool.left_out, fastest=None,
                   cheapest=None, ties={"fastest": [], "cheapest": []},
                   dropped=pool.dropped, guess=pool.guess)
    return decide(found, pool.conditions)


def _scaled(ok: pd.DataFrame, labels: dict[str, str], job: Job) -> list[Projection]:
    """Device and node counts not measured that would meet the deadline, on the machine
    measured (projection.py), marked "projected", without an interval."""
    from orchestrator.report.projection import configurations, node_projections, projections

    if job.deadline_s is None:
        return []
    found = []
    measured = configurations(ok)
    for scaled in [*projections(measured, job.items, job.deadline_s),
                   *node_projections(measured, job.items, job.deadline_s)]:
        rows = ok[ok["config_id"] == scaled.from_config]
        startup = _startup_s(rows) if job.count_startup else None
        time_s = (startup or 0.0) + job.items / scaled.items_per_s
        price = scaled.usd_per_hour
        label = labels[scaled.from_config]
        if scaled.nodes > 1:  # the measured twin's label, at the count projected
            label = re.sub(r"\bhw\.nodes=\d+", f"hw.nodes={scaled.nodes}", label)
            label += f" ({scaled.devices} devices; Amdahl over node counts"
        else:
            label += f" at {scaled.devices} devices (Amdahl"
        found.append(Projection(
            config_id=scaled.from_config, repeats=0, items_per_s=scaled.items_per_s,
            label=f"{label}, serial fraction {scaled.serial_fraction:.3f})",
            time_s=time_s, time_range_s=None, startup_s=startup, usd_per_hour=price,
            price_source=_text(rows, "price_source"),
            cost_usd=None if price is None else time_s / 3600 * price, cost_range_usd=None,
            energy_kwh=None, co2_kg=None, marks=["projected"],
            runs=_runs(rows)))
    return found


def _project(config_id: str, label: str, repeats: np.ndarray, rows: pd.DataFrame,
             job: Job, spot_price: SpotPrice | None = None, flags: str = "",
             noise: str = "") -> Projection:
    import numpy as np

    from orchestrator.report.analysis import joules_per_item

    rate = float(np.median(repeats))
    startup = _startup_s(rows) if job.count_startup else None
    price = _first(rows, "price_per_hour_usd")
    source = _text(rows, "price_source")
    instance = _text(rows, "instance_type")
    rework = 1.0  # only a spot-priced row is interrupted
    if job.spot and spot_price is not None and instance is not None:
        found = spot_price(instance)
        if found is not None:
            (price, source), rework = found, job.rework_factor
    time_s = (startup or 0.0) + job.items / rate * rework
    rates = interval(repeats.tolist())
    if rates is not None:  # the geometric interval, widened to hold the median if it must
        rates = (min(rates[0], rate), max(rates[1], rate))
    time_range = ((startup or 0.0) + job.items / rates[1] * rework,
                  (startup or 0.0) + job.items / rates[0] * rework) if rates else None
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
                      usd_per_hour=price, price_source=source, cost_usd=cost,
                      cost_range_usd=cost_range, energy_kwh=energy, co2_kg=co2,
                      rates=tuple(float(r) for r in repeats), flags=flags,
                      noise=noise, runs=_runs(rows))


def _runs(rows: pd.DataFrame) -> tuple[str, ...]:
    """The runs (by name) that measured these rows."""
    return tuple(dict.fromkeys(str(r) for r in rows["run"].dropna())) if "run" in rows \
        else ()


def _startup_s(rows: pd.DataFrame) -> float | None:
    """The start-up a job on this configuration pays once: the median queue wait, cluster
    boot and, across nodes, rendezvous its rows recorded; None where they recorded none."""
    parts = [float(rows[c].dropna().median()) for c in ("queued_s", "provision_s",
                                                          "rendezvous_s")
             if c in rows and rows[c].notna().any()]
    return sum(parts) if parts else None


def _text(rows: pd.DataFrame, column: str) -> str | None:
    if column not in rows or not rows[column].notna().any():
        return None
    return str(rows[column].dropna().iloc[0])


def _first(rows: pd.DataFrame, column: str) -> float | None:
    if column not in rows or not rows[column].notna().any():
        return None
    return float(rows[column].dropna().iloc[0])
