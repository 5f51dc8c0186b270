"""The report's "Best choices" (and `matrix history best`'s, and the dashboard's): a
workload's fastest configuration and its cheapest per million items, as `matrix advise`
answers per million items (report/advise.py: PER_MILLION), with its ties and caveats. One
answer, computed once: no surface picks a winner of its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.report.markdown import fmt_rate, money
from orchestrator.worker.units import plural

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.report.advice import Advice


@dataclass(frozen=True)
class Choice:
    question: str  # "fastest", ...
    config_id: str
    configuration: str  # its label, as every surface names it
    value: str  # the figure that makes it the answer, with its unit and caveats


def best_choices(rows: pd.DataFrame, workload: str, unit: str) -> list[Choice]:
    """A workload's fastest configuration and, where prices exist, its cheapest per million
    items: `matrix advise`'s answer per million items (report/advise.py: PER_MILLION), so
    the report, history and the dashboard name what advise names, with its ties and
    caveats. Flagged repeats are set aside as advise sets them (never an implausible one)."""
    from orchestrator.report.advise import PER_MILLION, AdviseError, advise

    try:
        found = advise(rows, PER_MILLION, workload)
    except AdviseError:
        return []
    choices = []
    if found.fastest is not None:
        choices.append(Choice("fastest", found.fastest.config_id, found.fastest.label,
                              f"{fmt_rate(found.fastest.items_per_s)} {plural(unit)}/s"
                              + _said(found, "fastest")))
    if found.cheapest is not None and found.cheapest.cost_usd is not None:
        choices.append(Choice(f"cheapest per million {plural(unit)}",
                              found.cheapest.config_id, found.cheapest.label,
                              f"${money(found.cheapest.cost_usd)} per million"
                              + _said(found, "cheapest")))
    return choices


def _said(found: Advice, question: str) -> str:
    """" (a tie with ...; noisy: ...)": what advise says beside its pick, else ""."""
    tied = found.ties.get(question, [])
    notes = ((["a best guess: every configuration was flagged"] if found.guess else [])
             + ([f"a tie with {', '.join(tied)}"] if tied else [])
             + found.notes.get(question, []))
    return f" ({'; '.join(notes)})" if notes else ""
