"""The words and cells of an answer of report/advise.py, one wording for every place that
shows it: `matrix advise`'s table (cli/advise_view.py), and the job section of report.md,
report.html (job_section.py) and the dashboard."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.report.advise import Advice, Job, Projection


def time_scale(found: Advice) -> tuple[float, str]:
    """Hours where any time reaches one, else minutes (also where every configuration was
    left out, and there is no time to show): (seconds per unit, unit)."""
    longest = max((p.time_s for p in found.projections), default=0.0)
    return (3600, "h") if longest >= 3600 else (60, "min")


def headers(found: Advice) -> list[str]:
    """The table's columns after the configuration."""
    return ["n", f"time {time_scale(found)[1]}", "95% CI", "cost $", "95% CI", "kWh", "marks"]


def job_line(found: Advice, deadline: str | None) -> str:
    """'job: 360,000 samples of sleep, within 30m and at most $2.00'."""
    job = found.job
    limits = ([f"within {deadline}"] if deadline else []) + (
        [f"at most ${job.budget_usd:,.2f}"] if job.budget_usd is not None else [])
    return (f"job: {job.items:,.0f} {found.unit}s of {found.workload}"
            + (f", {' and '.join(limits)}" if limits else ""))


def method(found: Advice) -> list[str]:
    """How the figures were made: the time's formula and start-up, the cost's pricing."""
    return ["time: start-up + items / the median throughput of the repeats, with its 95% "
            "interval over the repeats; " + _startup(found), _pricing(found.job)]


def row(p: Projection, scale: float) -> list[str]:
    """One configuration's cells, under `headers`."""
    return [str(p.repeats or "-"), f"{p.time_s / scale:.3g}",
            _range(p.time_range_s, scale) if p.time_range_s else
            "proj." if "projected" in p.marks else "few",
            "-" if p.cost_usd is None else f"{p.cost_usd:,.2f}",
            _range(p.cost_range_usd, 1) if p.cost_range_usd else "-",
            "-" if p.energy_kwh is None else f"{p.energy_kwh:.3g}", ", ".join(p.marks)]


def conclusions(found: Advice) -> list[str]:
    """What the table's marks mean, the picks with their ties, and what was left out."""
    job = found.job
    scale, unit = time_scale(found)
    said = []
    if any(p.time_range_s is None and p.repeats for p in found.projections):
        said.append("few: too few repeats for an interval (3 or more)")
    if any("projected" in p.marks for p in found.projections):
        said.append("proj.: a device count not measured, projected by Amdahl's law fitted to "
                    "the counts that were (never past twice the largest); no interval")
    picks = (("fastest" + " within the budget" * (job.budget_usd is not None), found.fastest,
              "fastest", "deadline" if job.deadline_s else ""),
             ("cheapest" + " within the deadline" * bool(job.deadline_s), found.cheapest,
              "cheapest", "budget" if job.budget_usd is not None else ""))
    if not found.projections:
        said.append("nothing to advise: every configuration is left out, each with its "
                    "reason below")
    for name, pick, question, other in picks if found.projections else ():
        if pick is None:
            why = ("no configuration has a price" if question == "cheapest" and all(
                p.cost_usd is None for p in found.projections) else "none fits")
            said.append(f"{name}: {why}")
            continue
        tied = found.ties[question]
        said.append(f"{name}: {pick.label}, {pick.time_s / scale:.3g} {unit}"
                    + ("" if pick.cost_usd is None else f", ${pick.cost_usd:,.2f}")
                    + ("" if pick.fits(job) else f" (it misses the {other})")
                    + (f"; a tie with {', '.join(tied)} (their intervals overlap)"
                       if tied else ""))
    if any(p.energy_kwh is None for p in found.projections):
        said.append("kWh -: not measured (no GPU energy counter, as on a CPU)")
    said += [f"left out: {label}: {why}" for label, why in found.left_out.items()]
    return said


def _startup(found: Advice) -> str:
    """What the start-up in the times is: recorded (queue wait, cluster boot) or 0."""
    unrecorded = sum(p.startup_s is None for p in found.projections)
    if not unrecorded:
        return "start-up as recorded (queue wait, cluster boot)"
    if unrecorded == len(found.projections):
        return "start-up is not recorded by these runs (counted as 0)"
    return (f"start-up as recorded (queue wait, cluster boot); {unrecorded} configuration(s) "
            "recorded none (counted as 0)")


def _pricing(job: Job) -> str:
    if not job.spot:
        return ("cost: time x the price per hour of the whole instance, no allowance for "
                "interruptions")
    allowance = (f"{job.rework_factor - 1:.1%} more time for {job.interruptions_per_day:g} "
                 f"interruptions a day, each losing half of a checkpoint interval "
                 f"({(job.checkpoint_every_s or 0) / 3600:.3g} h)"
                 if job.rework_factor > 1 else "no allowance for interruptions")
    return (f"cost: time x the spot price of the whole instance where EC2 has one; "
            f"{allowance}")


def _range(bounds: tuple[float, float] | None, scale: float) -> str:
    assert bounds is not None
    return f"{bounds[0] / scale:.3g}-{bounds[1] / scale:.3g}"
