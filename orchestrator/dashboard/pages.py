"""The site: index.html (workloads by hardware, and the runs), a page per workload (its
table and charts), a page per run (its rows from the store), and assets/ (the script, the
stylesheet, Chart.js): every page built here from the store, never copied. Every link is
relative, so the site works from file:// and from any static host, with no network."""

from __future__ import annotations

import html
import json
import shutil
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from orchestrator.dashboard.charts import Chart, workload_charts
from orchestrator.dashboard.content import (
    Column,
    Row,
    Table,
    choices_table,
    count,
    overview_table,
    text,
    whole_overview_table,
    whole_table,
    workload_table,
)
from orchestrator.dashboard.data import Run, SiteData, page_name
from orchestrator.dashboard.job_block import job_block
from orchestrator.dashboard.settings import Settings
from orchestrator.dashboard.vendor import chart_script
from orchestrator.results.run_directory import atomic_write

if TYPE_CHECKING:
    from orchestrator.report.advise import Advice
    from orchestrator.spec.job import JobSpec

ASSETS = Path(__file__).resolve().parent / "assets"
CHOICES = ("best choices: the fastest and the cheapest per million items, as `matrix advise "
           "--db` answers over every run in the store (start-up not counted; flagged repeats "
           "set aside, implausible ones never used)")


def write_site(data: SiteData, out: Path, job: tuple[Advice, JobSpec] | None = None
               ) -> list[Path]:
    """Write the whole site under `out`; the pages written. `job`: a training job's answer
    (report/advise.py) and the job, shown on its workload's page (job_block.py)."""
    (out / "assets").mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    atomic_write(out / "assets" / "chart.umd.min.js", chart_script().encode())
    for asset in ("site.js", "site.css"):
        shutil.copyfile(ASSETS / asset, out / "assets" / asset)
    rows, whole = data.rows, data.whole
    workloads = data.workloads
    block = job_block(*job, out) if job is not None else None
    overview = [*([choices_table(data.choices, "choices", CHOICES)] if data.choices else []),
                *([overview_table(rows)] if not rows.empty else []),
                *([whole_overview_table(whole)] if not whole.empty else [])]
    written = [_page(out / "index.html", "matrix-bench dashboard", data, workloads,
                     tables=overview, intro=_overview_intro(data), extra=_runs_table(data.runs))]
    run_dates = {run.key: run.date[:16].replace("T", " ") for run in data.runs}
    newest_first = rows.sort_values("date", ascending=False, kind="stable").to_dict(
        "records") if not rows.empty else []  # once: each page's table takes its share
    for workload in workloads:
        of, of_whole = _of_workload(rows, workload), _of_workload(whole, workload)
        both = [frame for frame in (of, of_whole) if not frame.empty]
        named = Settings.of(pd.concat([frame[["params"]] for frame in both]))
        same = f" Every configuration: {named.constant}." if named.constant else ""
        configs = sum(frame["config_id"].nunique() for frame in both)
        runs = len(set().union(*(set(frame["run_key"]) for frame in both)))
        mine = block if block is not None and block.workload == workload else None
        # first the job's answer, then the best choices: the decision before the rows
        leads = ([(mine.html, mine.table)] if mine is not None else []) + (
            [(None, choices_table({workload: data.choices[workload]}, f"choices-{workload}",
                                  CHOICES))] if workload in data.choices else [])
        written.append(_page(out / page_name(workload), f"{workload}", data, workloads,
                             lead="".join(made or _holder(table) for made, table in leads),
                             lead_tables=[table for _, table in leads],
                             tables=[*([workload_table([r for r in newest_first
                                                        if r["workload"] == workload],
                                                       workload, named)] if not of.empty
                                       else []),
                                     *([whole_table(of_whole, workload, named)]
                                       if not of_whole.empty else [])],
                             charts=workload_charts(of, workload, named, run_dates)
                             if not of.empty else [],
                             intro=f"{configs} configurations in {runs} runs; the repeat is "
                                   "the unit (each repeat counts once, by the median of its "
                                   "timed epochs; a script timed as a whole, by its wall time)."
                                   + (" Hover a point for its row's provenance." if not of.empty
                                      else "") + same))
    of_runs: dict[str, list[dict[str, Any]]] = {}
    for record in newest_first:
        of_runs.setdefault(record["run_key"], []).append(record)
    for run in data.runs:
        written.append(_run_page(out, run, data, workloads, of_runs.get(run.key, [])))
    return written


def _holder(table: Table) -> str:
    """A table's heading and the container its script fills, as HTML."""
    return (f'<h2>{html.escape(table.caption)}</h2>'
            f'<div id="table-{html.escape(table.id)}"></div>')


def _of_workload(rows: pd.DataFrame, workload: str) -> pd.DataFrame:
    return rows[rows["workload"] == workload] if not rows.empty else rows


def _of_run(rows: pd.DataFrame, key: str) -> pd.DataFrame:
    return rows[rows["run_key"] == key] if not rows.empty else rows


def _overview_intro(data: SiteData) -> str:
    if data.rows.empty and data.whole.empty:
        return "The store holds no result that ended ok yet."
    configs = sum(f["config_id"].nunique() for f in (data.rows, data.whole) if not f.empty)
    return (f"{len(data.runs)} runs, {configs} configurations. Best choices: per workload, "
            "the fastest and the cheapest configuration per million items as `matrix advise "
            "--db` answers, over every run. Then per workload and hardware, the fastest "
            "configuration in its latest run; flagged rows are marked, with the reason, and "
            "so is one the best choices left out.")


def _runs_table(runs: list[Run]) -> Table:
    columns = [Column("date", "started"), Column("run", "run", link=True),
               Column("location", "run directory"), Column("cells", "cell attempts", True)]
    rows = [Row(cells=[text(r.date[:16].replace("T", " ")), text(r.run), text(r.location),
                       count(r.cells)], links={"run": r.page}) for r in reversed(runs)]
    return Table(id="runs", caption="runs", columns=columns, rows=rows)


def _run_page(out: Path, run: Run, data: SiteData, workloads: list[str],
              of: list[dict[str, Any]]) -> Path:
    """The run's rows in the store (`of`: its records, newest first). Never a file from
    where the run was written: whoever can import a run would choose what the team's site
    serves (scripts included), and a link there would publish what it points at."""
    target = out / run.page
    of_whole = _of_run(data.whole, run.key)
    tables = []
    for workload in sorted({*(r["workload"] for r in of), *of_whole.get("workload", ())}):
        mine = [r for r in of if r["workload"] == workload]
        mine_whole = _of_workload(of_whole, workload)
        named = Settings.of_params([*(r["params"] for r in mine),
                                    *mine_whole.get("params", ())])
        if mine:
            tables.append(workload_table(mine, workload, named,
                                         caption="this run's configurations"))
        if not mine_whole.empty:
            tables.append(whole_table(mine_whole, workload, named,
                                      caption="this run's configurations, timed as a whole"))
    return _page(target, f"run {run.run}", data, workloads, tables=tables, depth=1,
                 intro=f"Its rows in the store, judged as its report judges them. The run "
                       f"was written at {run.location} (its report.md and report.html are "
                       "there, not published here).")


def _page(path: Path, title: str, data: SiteData, workloads: list[str],
          tables: Sequence[Table] = (), charts: Sequence[Chart] = (),
          intro: str = "", extra: Table | None = None, depth: int = 0, lead: str = "",
          lead_tables: Sequence[Table] = ()) -> Path:
    """One page; `lead`: HTML made safe by its maker, shown first (the job's block), with
    the containers of `lead_tables` in it."""
    up = "../" * depth
    payload = {"tables": [_table_json(t, up) for t in [*lead_tables, *tables,
                                                       *([extra] if extra else [])]],
               "charts": [c.as_json() for c in charts]}
    nav = " ".join([f'<a href="{up}index.html">overview</a>',
                    *(f'<a href="{up}{html.escape(page_name(w))}">{html.escape(w)}</a>'
                      for w in workloads)])
    sections = []
    for chart in charts:
        note = f'<p class="note">{html.escape(chart.note)}</p>' if chart.note else ""
        sections.append(f'<figure><figcaption>{html.escape(chart.title)}</figcaption>{note}'
                        f'<div class="chart-box" style="height: {chart.height_px}px">'
                        f'<canvas id="chart-{html.escape(chart.id)}">'
                        "</canvas></div></figure>")
    blocks = [lead, f'<div class="charts">{"".join(sections)}</div>' if sections else ""]
    blocks += [_holder(t) for t in [*tables, *([extra] if extra else [])]]
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)} · matrix-bench</title>
<link rel="stylesheet" href="{up}assets/site.css">
<script src="{up}assets/chart.umd.min.js"></script>
<script src="{up}assets/site.js"></script>
<script id="page-data" type="application/json">{_script_json(payload)}</script>
</head><body>
<header><h1>{html.escape(title)}</h1>
<p>store {html.escape(data.store)} · written {generated}</p><nav>{nav}</nav></header>
<main><p class="note">{html.escape(intro)}</p>
{"".join(blocks)}
</main></body></html>
"""
    atomic_write(path, page.encode())
    return path


def _table_json(table: Table, up: str) -> dict[str, Any]:
    """The table as its script reads it, links made relative to the page. Built field by
    field: dataclasses.asdict deep-copies every cell, 2.4 s of a 100-run site."""
    return {"id": table.id, "caption": table.caption,
            "columns": [vars(column) for column in table.columns],
            "rows": [{"cells": row.cells, "flagged": row.flagged,
                      "links": {k: up + v for k, v in row.links.items()}}
                     for row in table.rows]}


# Characters JSON may hold raw that HTML reads inside a <script> element ("</script>",
# "<!--<script" which swallows the rest of the page) or that end a JavaScript line.
_SCRIPT_UNSAFE = {ord(c): f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"}


def _script_json(payload: dict[str, Any]) -> str:
    """JSON that no value can end or comment out of its <script> element: every `<`, `>`,
    `&`, U+2028 and U+2029 written as its \\u escape, which JSON.parse reads back."""
    return json.dumps(payload, separators=(",", ":")).translate(_SCRIPT_UNSAFE)
