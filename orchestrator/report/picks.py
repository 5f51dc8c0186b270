"""Which configuration answers each of `matrix advise`'s questions: the one decision every
surface shows (advise, the report's "Your job" and "Best choices", `history best`, the
dashboard), with the same ties and the same caveats.

- fastest: the least time within the budget (by the point cost); cheapest: the least cost
  within the deadline (by the point time);
- a tie: a measured candidate within the pick's noise (confidence.within_noise: Welch's t
  over both sides' repeats, 2 repeats as much as 3), named with how far it is and, where it
  is cheaper (or quicker), by how much: the measurements cannot tell them apart, so the
  other figure may decide;
- a caveat, said beside the pick: an interval that crosses the deadline or the budget (it
  may miss it); too few repeats for an interval where a limit was set; a projected count
  that beats every measurement (never silently); the pick's own flags (with
  --include-flagged); repeats set aside for the machine's conditions in the run that
  measured the pick (what separated them may be the machine, not the configuration);
- front: the Pareto front of time against cost.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from orchestrator.report.confidence import within_noise
from orchestrator.report.markdown import money

if TYPE_CHECKING:
    from orchestrator.report.advice import Advice, Job, Projection


def decide(found: Advice, conditions: dict[str, set[str]]) -> Advice:
    """`found` with its picks, ties, caveats and front marked (module docstring);
    `conditions`: run -> the condition flags of the repeats it set aside."""
    job, every = found.job, found.projections
    within_budget = [p for p in every if job.budget_usd is None or (
        p.cost_usd is not None and p.cost_usd <= job.budget_usd)]
    within_deadline = [p for p in every if p.cost_usd is not None and (
        job.deadline_s is None or p.time_s <= job.deadline_s)]
    fastest = min(within_budget, key=lambda p: p.time_s, default=None)
    cheapest = min(within_deadline, key=lambda p: p.cost_usd or 0.0, default=None)
    ties: dict[str, list[str]] = {"fastest": [], "cheapest": []}
    notes: dict[str, list[str]] = {"fastest": [], "cheapest": []}
    for question, pick, pool in (("fastest", fastest, within_budget),
                                 ("cheapest", cheapest, within_deadline)):
        if pick is None:
            continue
        pick.marks.append(question)
        tied = _ties(pick, pool, question)
        ties[question] = [label for label, _ in tied]
        notes[question] = [*(why for _, why in tied if why), *_caveats(
            pick, pool, question, job, conditions)]
    _mark_front(every)
    return replace(found, fastest=fastest, cheapest=cheapest, ties=ties, notes=notes)


def _figure(p: Projection, question: str) -> float | None:
    return p.time_s if question == "fastest" else p.cost_usd


def _ties(pick: Projection, pool: list[Projection], question: str
          ) -> list[tuple[str, str]]:
    """(label, what else tells it from the pick) of each measured candidate within the
    pick's noise on the question's figure."""
    if pick.projected:
        return []
    found = []
    for p in pool:
        ours, theirs = _figure(pick, question), _figure(p, question)
        if p is pick or p.projected or not ours or not theirs or \
                not within_noise(pick.rates, p.rates, theirs / ours):
            continue
        other = "cheapest" if question == "fastest" else "fastest"
        found.append((p.label, _better_on(p, pick, other)))
    return found


def _better_on(p: Projection, pick: Projection, other: str) -> str:
    """'X is within its noise (0.4% slower) and 41% cheaper' where the tie beats the pick
    on the other figure, else ''."""
    ours, theirs = _figure(pick, other), _figure(p, other)
    if ours is None or theirs is None or theirs >= ours:
        return ""
    question = "fastest" if other == "cheapest" else "cheapest"
    gap = (_figure(p, question) or 0) / (_figure(pick, question) or 1) - 1
    word = ("slower" if gap > 0 else "faster") if question == "fastest" else \
        ("dearer" if gap > 0 else "cheaper")
    better = "cheaper" if other == "cheapest" else "faster"
    return (f"{p.label} is within its noise ({abs(gap):.1%} {word}) and "
            f"{1 - theirs / ours:.0%} {better}")


def _caveats(pick: Projection, pool: list[Projection], question: str, job: Job,
             conditions: dict[str, set[str]]) -> list[str]:
    """What a person acting on the pick must know (module docstring)."""
    said = []
    limits = ((job.deadline_s, pick.time_range_s, "deadline", _hours),
              (job.budget_usd, pick.cost_range_usd, "budget", _dollars))
    for limit, bounds, name, shown in limits:
        if limit is None:
            continue
        if bounds is not None and bounds[0] <= limit < bounds[1]:
            said.append(f"it may miss the {name}: its 95% interval reaches "
                        f"{shown(bounds[1])}")
        elif bounds is None and not pick.projected and (name == "deadline" or
                                                        pick.cost_usd is not None):
            said.append(f"{pick.repeats} repeat{'s' * (pick.repeats != 1)}: no interval, so "
                        f"its margin to the {name} is not known")
    if pick.projected:
        measured = [p for p in pool if not p.projected]
        best = min(measured, key=lambda p: _figure(p, question) or 0.0, default=None)
        said.append("projected, not measured" + (
            f": the {question} measured is {best.label} ({_hours(best.time_s)}"
            + ("" if best.cost_usd is None else f", {_dollars(best.cost_usd)}") + ")"
            if best is not None else ": no measured configuration fits"))
    if pick.noise:
        said.append(pick.noise)
    if pick.flags:
        said.append(f"its repeats are flagged {pick.flags.replace(',', ', ')}")
    seen = sorted({flag for run in pick.runs for flag in conditions.get(run, set())})
    if seen:
        said.append(f"measured in the same run as repeats set aside as {', '.join(seen)}: "
                    "the machine's conditions may have decided between them as much as "
                    "the configurations")
    return said


def _mark_front(every: list[Projection]) -> None:
    """Mark the Pareto front of time against cost among the priced projections."""
    priced = [p for p in every if p.cost_usd is not None]
    for p in priced:
        assert p.cost_usd is not None
        if not any(q.time_s <= p.time_s and (q.cost_usd or 0) <= p.cost_usd
                   and (q.time_s < p.time_s or (q.cost_usd or 0) < p.cost_usd)
                   for q in priced):
            p.marks.append("front")


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.3g} h" if seconds >= 3600 else f"{seconds / 60:.3g} min"


def _dollars(usd: float) -> str:
    return "$" + money(usd)
