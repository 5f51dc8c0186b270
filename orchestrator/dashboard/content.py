"""The tables and charts of each page, as the JSON its script draws (assets/site.js).

A table cell is [text, sort value] (the text formatted here, once; the value sorts it); a
chart point carries its tooltip lines: the row's figures and its provenance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.dashboard.data import page_name
from orchestrator.dashboard.settings import Settings, params_of
from orchestrator.report.markdown import (
    fmt_mib,
    fmt_pct,
    fmt_rate,
    fmt_seconds,
    fmt_tflops,
    fmt_usd,
    present,
)
from orchestrator.worker.units import plural

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.report.advise import Advice

HISTORY_LINES = 8  # configurations drawn in a history chart: the fastest in their latest run

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


@dataclass(frozen=True)
class Dataset:
    label: str
    data: list[Any]
    tips: list[list[str]] = field(default_factory=list)
    dashed: bool = False


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    type: str  # bar | line | scatter
    x_label: str
    y_label: str
    labels: list[str]
    datasets: list[Dataset]
    note: str = ""
    horizontal: bool = False  # bars along x, one row per label (long labels stay readable)

    @property
    def height_px(self) -> int:
        return max(320, 24 * len(self.labels) + 90) if self.horizontal else 320

    def as_json(self) -> dict[str, Any]:
        found = asdict(self)
        found["xLabel"], found["yLabel"] = found.pop("x_label"), found.pop("y_label")
        return found


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


def workload_charts(rows: pd.DataFrame, workload: str, named: Settings,
                    run_dates: dict[str, str]) -> list[Chart]:
    """The workload's four charts. A row flagged implausible is in the table, marked, and
    never drawn: one figure beyond physics would set every axis. A row with another flag is
    drawn with its flags in its label, as the table marks it."""
    unit = str(rows["item_unit"].iloc[0]) if len(rows) else "item"
    left_out = rows[rows["implausible"]]["config_id"].nunique()
    rows = rows[~rows["implausible"]]
    latest = rows[rows["latest"]].sort_values("items_per_s", ascending=False, kind="stable")
    records = latest.to_dict("records")
    labels = [named.label(r) + (f" [{r['flags']}]" if r["flags"] else "") for r in records]
    charts = [Chart(id=f"throughput-{workload}", title="throughput per hardware and stack "
                    "(each configuration's latest run)", type="bar", x_label="configuration",
                    y_label=f"{unit}/s (median over repeats)", labels=labels, horizontal=True,
                    datasets=[Dataset("median", [float(r["items_per_s"]) for r in records],
                                      [tips(r) for r in records])],
                    note=f"{left_out} configuration(s) flagged implausible are left out of "
                         "the charts (marked in the table)" if left_out else "")]
    priced = [(label, r) for label, r in zip(labels, records, strict=True)
              if present(r["usd_per_million_items"])]
    charts.append(Chart(id=f"cost-{workload}", title="cost per million items", type="bar",
                        x_label="configuration", y_label=f"$ per million {plural(unit)}",
                        labels=[label for label, _ in priced], horizontal=True,
                        datasets=[Dataset("$ / M items",
                                          [float(r["usd_per_million_items"]) for _, r in priced],
                                          [tips(r) for _, r in priced])],
                        note="" if priced else "no row carries a price"))
    charts.append(_scaling(records, workload, unit, named))
    charts.append(_history(rows, workload, unit, named, run_dates))
    return charts


def _scaling(records: list[dict[str, Any]], workload: str, unit: str,
             named: Settings) -> Chart:
    """Throughput against devices per machine, stack and settings (the device count's own
    parameter aside: twins, as the report's scaling groups them), with each group's ideal
    line: its fewest-device point scaled linearly. Two machines are never one line."""
    counting = _device_params(records, named)
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:  # one line per device kind: CPUs never scale along GPUs
        params = params_of(record["params"])
        settings = " ".join(f"{k}={params[k]}" for k in named.varying
                            if k in params and k not in counting)
        name = (f"{record.get('machine') or record['hardware']}/{record['stack']} "
                f"{settings}".strip() + f" ({record['device']})")
        groups.setdefault(name, []).append(record)
    datasets = []
    for name, members in sorted(groups.items()):
        members = sorted(members, key=lambda r: r["devices"])
        datasets.append(Dataset(name, [{"x": r["devices"], "y": float(r["items_per_s"])}
                                       for r in members], [tips(r) for r in members]))
        base = members[0]
        if len({r["devices"] for r in members}) > 1:
            per_device = float(base["items_per_s"]) / base["devices"]
            datasets.append(Dataset(f"{name}: ideal", [
                {"x": r["devices"], "y": per_device * r["devices"]} for r in members],
                dashed=True))
    several = any(d.dashed for d in datasets)
    return Chart(id=f"scaling-{workload}", title="scaling against the ideal line", type="scatter",
                 x_label="devices (GPUs, or CPU workers)", y_label=f"{unit}/s", labels=[],
                 datasets=datasets,
                 note="" if several else "every configuration ran on one device count: "
                                         "no line to scale along")


def _device_params(records: list[dict[str, Any]], named: Settings) -> set[str]:
    """The varying parameters that are the device count (nmt_dp's `workers`, a user's own):
    those whose value is the devices a row trained on, in every row."""
    return {k for k in named.varying
            if records and all(str(params_of(r["params"]).get(k)) == str(r["devices"])
                               for r in records)}


def _history(rows: pd.DataFrame, workload: str, unit: str, named: Settings,
             run_dates: dict[str, str]) -> Chart:
    """Each configuration's median run by run (x: the run's start), for the fastest
    HISTORY_LINES of them."""
    latest = rows[rows["latest"]].sort_values("items_per_s", ascending=False, kind="stable")
    chosen = list(latest["config_id"][:HISTORY_LINES])
    shown = rows[rows["config_id"].isin(chosen)]
    dates = sorted({run_dates[key] for key in shown["run_key"]})
    position = {d: i for i, d in enumerate(dates)}
    datasets = []
    for config_id in chosen:
        of = shown[shown["config_id"] == config_id].to_dict("records")
        data: list[float | None] = [None] * len(dates)
        tip: list[list[str]] = [[] for _ in dates]
        for record in of:
            at = position[run_dates[record["run_key"]]]
            data[at], tip[at] = float(record["items_per_s"]), tips(record)
        datasets.append(Dataset(named.label(of[0]), data, tip))
    more = latest["config_id"].nunique() - len(chosen)
    return Chart(id=f"history-{workload}", title="history over runs", type="line",
                 x_label="run (its first cell's start, UTC)", y_label=f"{unit}/s",
                 labels=dates, datasets=datasets,
                 note=f"the {len(chosen)} fastest configurations; the table has all "
                      f"{len(chosen) + more}" if more > 0 else "")
