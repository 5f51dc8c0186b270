"""The "Your job" block of the dashboard: `matrix dashboard --items N ...` answers a training
job from the store's rows as `matrix advise` and the report do (report/advise.py, in
report/advise_text.py's words): the job and how it is figured, a sortable table, the
conclusions, and the figure (time to train against cost), drawn here into the site. It
goes first on the job's workload page. A job the rows cannot answer is refused before any
page is written (cli/dashboard_command.py)."""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.dashboard.content import Column, Row, Table, text
from orchestrator.report import advise_text

if TYPE_CHECKING:
    from orchestrator.report.advise import Advice
    from orchestrator.spec.job import JobSpec

FIGURE = "plots/job.png"  # relative to the site's root


@dataclass(frozen=True)
class JobBlock:
    workload: str  # the page it goes on
    table: Table
    html: str  # the statements and the figure, escaped


def job_block(answer: Advice, job: JobSpec, site: Path) -> JobBlock:
    """The block for `answer`, its figure written under `site` (where one can be drawn)."""
    from orchestrator.report.plots import job_figure, save

    drawn = job_figure(answer)
    if drawn is not None:
        save(drawn, site / FIGURE)
    scale, _ = advise_text.time_scale(answer)
    headers = advise_text.headers(answer)
    numeric = {1: "time", 3: "cost"}  # sorted by their figures, not their text
    columns = [Column("configuration", "configuration"),
               *(Column(f"c{i}", label, numeric=i in numeric) for i, label in enumerate(headers))]
    rows = []
    for p in answer.projections:
        cells = advise_text.row(p, scale)
        sort = {1: p.time_s, 3: p.cost_usd}
        rows.append(Row(cells=[text(p.label), *(
            [value, sort[i]] if i in numeric and sort[i] is not None else text(value)
            for i, value in enumerate(cells))]))
    table = Table(id="job", caption="your job, on each configuration", columns=columns,
                  rows=rows)
    statements = [advise_text.job_line(answer, job.deadline), *advise_text.method(answer),
                  *advise_text.conclusions(answer)]
    return JobBlock(answer.workload, table, _section(statements, FIGURE if drawn else "",
                                                     table.id))


def _section(statements: list[str], figure: str, table: str) -> str:
    """The block's heading, statements, table container and figure as HTML; `figure`: the
    PNG's path from the site's root, "" for none (the job's pages lie at the root)."""
    items = "".join(f"<li>{html.escape(s)}</li>" for s in statements)
    holder = f'<div id="table-{html.escape(table)}"></div>'
    image = (f'<figure><img src="{html.escape(figure)}" alt="time to train against cost" '
             'style="max-width: 100%"></figure>' if figure else "")
    return f'<section id="your-job"><h2>Your job</h2><ul>{items}</ul>{holder}{image}</section>'
