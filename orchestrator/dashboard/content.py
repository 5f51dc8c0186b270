"""The tables of each page, as the JSON its script draws (assets/site.js); its charts are
charts.py's.

A table cell is [text, sort value] (the text formatted here, once; the value sorts it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.dashboard.data import page_name
from orchestrator.dashboard.settings import Settings
from orchestrator.report.markdown import (
    fmt_mib,
    fmt_pct,
    fmt_rate,
    fmt_seconds,
    fmt_tflops,
    fmt_usd,
    present,
)

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.report.advise import Advice


Cell = list[Any] | None  # [text, sort value]


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    numeric: bool = False
    link: bool = False


@dataclass(frozen=True)
class Row:
    cells: list[Cell]
    flagged: bool = False
    links: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Table:
    id: str
    caption: str
    columns: list[Column]
    rows: list[Row]


def _sorted_as(render: Callable[[float | None], str], template: str = "{}"
               ) -> Callable[[Any], Cell]:
    """A cell maker from one of the report's number formats (report/markdown.py): the text
    as the report writes it, the number to sort by; None for a missing figure."""
    def make(value: Any) -> Cell:
        return [template.format(render(value)), float(value)] if present(value) else None
    return make


usd = _sorted_as(fmt_usd, "${}")
pct = _sorted_as(fmt_pct)
mib = _sorted_as(fmt_mib, "{} MiB")
seconds = _sorted_as(fmt_seconds)


def rate(value: Any, unit: str) -> Cell:
    """Items per second to four significant digits, so a slow CPU row is not rounded."""
    return [f"{fmt_rate(value)} {unit}/s", float(value)] if present(value) else None


def text(value: Any) -> Cell:
    return [str(value), str(value)]


def count(value: Any) -> Cell:
    return [str(int(value)), int(value)]


def flags(row: dict[str, Any]) -> Cell:
    marks = str(row["flags"] or "")
    if not marks:
        return ["", ""]
    reason = str(row.get("reason") or "")
    if not reason:
        return [marks.replace(",", ", "), marks]
    # the judge's reasons name their flag ("implausible: ..."): it is not said twice
    named = [mark for mark in marks.split(",") if not reason.startswith(f"{mark}:")]
    if len(named) < len(marks.split(",")):
        return [", ".join([*named, reason]), marks]
    return [f"{marks.replace(',', ', ')}: {reason}", marks]


def tips(row: dict[str, Any]) -> list[str]:
    """A point's tooltip: the row's figures, then where and with what it ran."""
    lines = [f"{row['repeats']} repeat(s), {fmt_rate(row['lowest'])} to {fmt_rate(row['highest'])} "
             f"{row['item_unit']}/s", f"run {row['run']} ({str(row['date'])[:16]})",
             f"in {row['location']}"]
    if present(row.get("achieved_flops")):
        lines.append(f"{fmt_tflops(row['achieved_flops'])} TFLOP/s"
                     + (f", {fmt_pct(row['peak_fraction'])} of peak"
                        if present(row.get("peak_fraction")) else "")
                     + (f", {fmt_pct(row['ceiling_fraction'])} of the node's measured ceiling "
                        f"({fmt_tflops(row['node_ceiling_flops'])} TFLOP/s a device)"
                        if present(row.get("ceiling_fraction")) else ""))
    lines += [f"{label}: {value}" for label, value in row["provenance"]]
    if row["flags"]:
        lines.append(f"flags: {row['flags']}" + (f" ({row['reason']})" if row["reason"] else ""))
    return lines


def workload_table(rows: list[dict[str, Any]], workload: str, named: Settings,
                   caption: str = "every configuration in every run") -> Table:
    """The workload's configurations in its runs (every one, or a run's): `rows` as
    records, newest first (a frame's to_dict per page cost seconds over 100 runs)."""
    columns = [Column("date", "date"), Column("run", "run", link=True),
               Column("hardware", "hardware"), Column("stack", "stack"),
               Column("settings", "settings"), Column("repeats", "n", numeric=True),
               Column("median", "median", numeric=True), Column("spread", "spread", True),
               Column("memory", "memory peak", True), Column("peak", "% of peak", True),
               Column("ceiling", "% of ceiling", True),
               Column("cost", "$ / M items", True), Column("flags", "flags")]
    found = []
    for row in rows:
        found.append(Row(cells=[
            text(str(row["date"])[:16].replace("T", " ")), text(row["run"]),
            text(row["hardware"]), text(row["stack"]), text(named.of_row(row)),
            count(row["repeats"]), rate(row["items_per_s"], row["item_unit"]),
            pct(row["spread"]), mib(row["mem_peak_bytes"]), pct(row.get("peak_fraction")),
            pct(row.get("ceiling_fraction")), usd(row["usd_per_million_items"]), flags(row)],
            flagged=bool(row["flags"]), links={"run": f"runs/{row['run_key']}.html"}))
    return Table(id=f"rows-{workload}", caption=f"{workload}: {caption}",
                 columns=columns, rows=found)


def whole_table(rows: pd.DataFrame, workload: str, named: Settings,
                caption: str = "timed as a whole, every configuration in every run") -> Table:
    """A script's configurations timed as a whole (no matrix_bench client, so no
    throughput): the median wall time of a run and the cost of one, newest first."""
    columns = [Column("date", "date"), Column("run", "run", link=True),
               Column("hardware", "hardware"), Column("stack", "stack"),
               Column("settings", "settings"), Column("repeats", "n", numeric=True),
               Column("wall", "wall s", numeric=True), Column("spread", "spread", True),
               Column("memory", "memory peak", True), Column("cost", "$ / run", True),
               Column("flags", "flags")]
    found = [Row(cells=[
        text(str(row["date"])[:16].replace("T", " ")), text(row["run"]),
        text(row["hardware"]), text(row["stack"]), text(named.of_row(row)),
        count(row["repeats"]), seconds(row["wall_s"]), pct(row["spread"]),
        mib(row["mem_peak_bytes"]), usd(row["usd_per_run"]), flags(row)],
        flagged=bool(row["flags"]), links={"run": f"runs/{row['run_key']}.html"})
        for row in rows.sort_values("date", ascending=False, kind="stable").to_dict("records")]
    return Table(id=f"whole-{workload}", caption=f"{workload}: {caption}", columns=columns,
                 rows=found)


def choices_table(choices: dict[str, Advice], table_id: str, caption: str) -> Table:
    """The best choices of each workload in `choices` (data.best_choices: advise's answer
    per million items): its fastest and, where priced, its cheapest configuration, with the
    figures advise gives, its ties and caveats; then each configuration it left out, marked,
    with why."""
    from orchestrator.database.history import said

    columns = [Column("workload", "workload", link=True), Column("best", "best"),
               Column("configuration", "configuration"),
               Column("median", "median", numeric=True),
               Column("cost", "$ / M items", numeric=True), Column("repeats", "n", True),
               Column("said", "ties, caveats, why left out")]
    found = []
    for workload, answer in choices.items():
        link = {"workload": page_name(workload)}
        for question in ("fastest", "cheapest"):
            pick = answer.pick(question)
            if pick is None or (question == "cheapest" and pick.cost_usd is None):
                continue  # the cheapest only where a price exists
            found.append(Row(cells=[text(workload), text(question), text(pick.label),
                                    rate(pick.items_per_s, answer.unit), usd(pick.cost_usd),
                                    count(pick.repeats),
                                    text("; ".join(said(answer, question)))], links=link))
        found += [Row(cells=[text(workload), text("left out"), text(label), None, None, None,
                             text(why)], flagged=True, links=link)
                  for label, why in answer.left_out.items()]
    return Table(id=table_id, caption=caption, columns=columns, rows=found)


def overview_table(rows: pd.DataFrame) -> Table:
    """Per workload and hardware, the fastest configuration in its latest run; one the best
    choices left out (data.best_choices) is marked so, beside its flags."""
    latest = rows[rows["latest"]]
    picks = latest.loc[latest.groupby(["workload", "hardware"])["items_per_s"].idxmax()]
    columns = [Column("workload", "workload", link=True), Column("hardware", "hardware"),
               Column("configuration", "fastest configuration"),
               Column("median", "median", numeric=True),
               Column("cost", "$ / M items", numeric=True), Column("date", "measured"),
               Column("flags", "flags")]
    named = {w: Settings.of(of) for w, of in rows.groupby("workload")}
    found = [Row(cells=[text(row["workload"]), text(row["hardware"]),
                        text(f"{row['stack']} {named[row['workload']].of_row(row)}".strip()),
                        rate(row["items_per_s"], row["item_unit"]),
                        usd(row["usd_per_million_items"]), text(str(row["date"])[:10]),
                        _left_out(row, flags(row))],
                 flagged=bool(row["flags"] or row.get("left_out")),
                 links={"workload": page_name(row["workload"])})
             for row in picks.sort_values(["workload", "items_per_s"],
                                          ascending=[True, False]).to_dict("records")]
    return Table(id="overview", caption="workloads by hardware", columns=columns, rows=found)


def _left_out(row: dict[str, Any], cell: Cell) -> Cell:
    """A flags cell that also says the best choices left the row's configuration out (its
    own reason where its flags give none)."""
    why = str(row.get("left_out") or "")
    if not why or cell is None:
        return cell
    shown, marks = cell
    said = "left out of the best choices" + ("" if shown else f": {why}")
    return [f"{shown}; {said}" if shown else said, f"{marks},left out" if marks else
            "left out"]


def whole_overview_table(whole: pd.DataFrame) -> Table:
    """Per script timed as a whole and hardware, its quickest configuration in its latest
    run."""
    latest = whole[whole["date"] == whole.groupby("config_id")["date"].transform("max")]
    picks = latest.loc[latest.groupby(["workload", "hardware"])["wall_s"].idxmin()]
    columns = [Column("workload", "workload", link=True), Column("hardware", "hardware"),
               Column("configuration", "quickest configuration"),
               Column("wall", "wall s", numeric=True), Column("cost", "$ / run", numeric=True),
               Column("date", "measured"), Column("flags", "flags")]
    named = {w: Settings.of(of) for w, of in whole.groupby("workload")}
    found = [Row(cells=[text(row["workload"]), text(row["hardware"]),
                        text(f"{row['stack']} {named[row['workload']].of_row(row)}".strip()),
                        seconds(row["wall_s"]), usd(row["usd_per_run"]),
                        text(str(row["date"])[:10]), flags(row)],
                 flagged=bool(row["flags"]), links={"workload": page_name(row["workload"])})
             for row in picks.sort_values(["workload", "wall_s"]).to_dict("records")]
    return Table(id="overview-whole", caption="scripts timed as a whole (no matrix_bench "
                 "client, so no throughput), by hardware", columns=columns, rows=found)
