"""The words and cells of an answer of report/advise.py, one wording for every place that
shows it: `matrix advise`'s table (cli/advise_view.py), and the job section of report.md,
report.html (job_section.py) and the dashboard."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.report.markdown import Figure, money
from orchestrator.worker.units import plural

if TYPE_CHECKING:
    from orchestrator.report.advice import Advice, Job, Projection


def time_scale(found: Advice) -> tuple[float, str]:
    """Hours where any time reaches one, else minutes (also where every configuration was
    left out, and there is no time to show): (seconds per unit, unit)."""
    longest = max((p.time_s for p in found.projections), default=0.0)
    return (3600, "h") if longest >= 3600 else (60, "min")


def headers(found: Advice) -> list[str]:
    """The table's columns after the configuration."""
    return ["n", f"time {time_scale(found)[1]}", "95% CI", "cost $", "95% CI", "kWh", "marks"]


def job_line(found: Advice, deadline: str | None) -> str:
    """'job: 360,000 samples of sleep, within 30m and at most $2.00 (USD)'; a question of
    the rate alone (the report's Best choices) says per how many items."""
    job = found.job
    limits = ([f"within {deadline}"] if deadline else []) + (
        [f"at most ${money(job.budget_usd)} (USD)"] if job.budget_usd is not None else [])
    what = f"{job.items:,.0f} {plural(found.unit)} of {found.workload}"
    return (f"job: {what}" + ("" if job.count_startup else ", start-up not counted")
            + (f", {' and '.join(limits)}" if limits else ""))


def method(found: Advice) -> list[str]:
    """How the figures were made: the time's formula and start-up, the cost's pricing."""
    return ["time: start-up + items / the median throughput of the repeats, with its 95% "
            "t-interval over the repeats (3 or more); " + _startup(found),
            _pricing(found.job)]


def row(p: Projection, scale: float) -> list[str]:
    """One configuration's cells, under `headers`."""
    return [Figure(str(p.repeats), p.repeats) if p.repeats else "-",
            Figure(f"{p.time_s / scale:.3g}", p.time_s / scale),
            _range(p.time_range_s, scale) if p.time_range_s else
            "proj." if p.projected else "none",
            "-" if p.cost_usd is None else money(p.cost_usd),
            _money_range(p.cost_range_usd) if p.cost_range_usd else "-",
            "-" if p.energy_kwh is None else Figure(f"{p.energy_kwh:.3g}", p.energy_kwh),
            ", ".join([*p.marks, *(f"flagged {p.flags}",) * bool(p.flags)])]


def pick_line(found: Advice, question: str) -> str:
    """'fastest within the budget: X, 8.4 h, $4.20; a tie with Y (within the noise of
    their repeats); Y is within its noise (0.4% slower) and 41% cheaper; it may miss...'"""
    job = found.job
    scale, unit = time_scale(found)
    name = ("fastest" + " within the budget" * (job.budget_usd is not None)
            if question == "fastest" else
            "cheapest" + " within the deadline" * bool(job.deadline_s))
    pick = found.pick(question)
    if pick is None:
        why = ("no configuration has a price" if question == "cheapest" and all(
            p.cost_usd is None for p in found.projections) else "none fits")
        return f"{name}: {why}"
    other = "deadline" if question == "fastest" else "budget"
    limited = job.deadline_s if question == "fastest" else job.budget_usd
    tied = found.ties.get(question, [])
    return "; ".join([
        f"{name}: {pick.label}, {pick.time_s / scale:.3g} {unit}"
        + ("" if pick.cost_usd is None else f", ${money(pick.cost_usd)}")
        + ("" if pick.fits(job) or limited is None else f" (it misses the {other})"),
        *([f"a tie with {', '.join(tied)} (within the noise of their repeats)"]
          if tied else []),
        *found.notes.get(question, [])])


def conclusions(found: Advice) -> list[str]:
    """What the table's marks mean, the picks with their ties and caveats, and what was
    left out or set aside."""
    said = []
    if found.guess:
        said.append(f"best guess: {found.guess}")
    thin = sorted({p.repeats for p in found.projections if p.time_range_s is None
                   and p.repeats})
    if thin:
        said.append(f"none: {' or '.join(map(str, thin))} repeat"
                    f"{'s' * (thin != [1])}: no interval (3 repeats or more give one)")
    if any(p.projected for p in found.projections):
        said.append("proj.: a device or node count not measured, projected by Amdahl's law "
                    "fitted to the counts that were, on the same machine (never past twice "
                    "the largest nor past the devices it has), priced as the whole machine, "
                    "every node of it; no interval")
    if not found.projections:
        said.append("nothing to advise: every configuration is left out, each with its "
                    "reason below")
    else:
        said += [pick_line(found, "fastest"), pick_line(found, "cheapest")]
    if any(p.energy_kwh is None for p in found.projections):
        said.append("kWh -: not measured (no GPU energy counter, as on a CPU)")
    said += [f"left out: {label}: {why}" for label, why in found.left_out.items()]
    said += [f"kept with fewer repeats: {label}: {why}"
             for label, why in found.dropped.items()]
    return said


def _startup(found: Advice) -> str:
    """What the start-up in the times is: recorded (queue wait, cluster boot, a rendezvous
    across nodes) or 0."""
    unrecorded = sum(p.startup_s is None for p in found.projections)
    recorded = "start-up as recorded (queue wait, cluster boot, rendezvous across nodes)"
    if not unrecorded:
        return recorded
    if unrecorded == len(found.projections):
        return "start-up is not recorded by these runs (counted as 0)"
    return f"{recorded}; {unrecorded} configuration(s) recorded none (counted as 0)"


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


def _money_range(bounds: tuple[float, float] | None) -> str:
    assert bounds is not None
    return f"{money(bounds[0])}-{money(bounds[1])}"
