"""The report's "Your job" section: the matrix's `job:` answered from the run's rows as
`matrix advise` answers it (advise.py, in advise_text.py's words), with its figure (time to
train against cost: plots.job_figure). A job the rows cannot answer gets its reason, as one
line, where the answer would be: nothing is silent."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.report import advise_text
from orchestrator.report.advise import Advice, AdviseError, Job, advise
from orchestrator.report.markdown import plain_text, table

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.spec.job import JobSpec

FIGURE = "plots/job.png"


def answer_job(df: pd.DataFrame, job: JobSpec) -> Advice | str:
    """The job projected onto the rows; why not, where the rows cannot answer it."""
    try:
        return advise(df, Job.of(job), job.workload)
    except AdviseError as exc:
        return str(exc)


def job_section(answer: Advice | str, job: JobSpec, figure: str | None) -> list[str]:
    """The section's markdown: the job, how it is figured, the table, the conclusions and
    the figure (its path, relative to report.md; None: nothing has a price to draw)."""
    lines = ["## Your job", ""]
    if isinstance(answer, str):
        return [*lines, f"The job in the matrix (`job:`, {job.items:,.0f} items) has no answer "
                        f"from these rows: {plain_text(answer)}.", ""]
    scale, _ = advise_text.time_scale(answer)
    lines += ["The matrix's " + plain_text(advise_text.job_line(answer, job.deadline))
              + ", as `matrix advise` answers it.", ""]
    lines += [f"- {plain_text(line)}" for line in advise_text.method(answer)] + [""]
    lines += table(["configuration", *advise_text.headers(answer)],
                   [[p.label, *advise_text.row(p, scale)] for p in answer.projections])
    lines += [""] + [f"- {plain_text(line)}" for line in advise_text.conclusions(answer)]
    lines += [""]
    if figure is not None:
        lines += [f"![time to train against cost]({figure})", ""]
    return lines
