"""`matrix history` for people (a table that fits 80 columns: the configuration folds,
never cut) and for scripts (CSV, JSON: every column, full precision)."""

from __future__ import annotations

import json
import sys
import textwrap
from collections import Counter
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from orchestrator.cli.compare_view import STYLE
from orchestrator.database.history import Regression
from orchestrator.report.compare import Verdict
from orchestrator.report.markdown import fmt_mib, fmt_pct, fmt_rate, fmt_seconds, fmt_usd

if TYPE_CHECKING:
    import pandas as pd
    from rich.console import Console


class Format(StrEnum):
    TABLE = "table"
    CSV = "csv"
    JSON = "json"


def show_frame(frame: pd.DataFrame, columns: dict[str, str], form: Format,
               console: Console, group: str | None = None) -> None:
    """`frame`'s `columns` (name -> heading) in the format asked for. In a table, `group`
    (a column of `frame`) heads each run of rows that share its value, on lines of its own,
    instead of repeating in every row; under a row, its `judgement` (why its figure cannot
    be true) and each line of its `said` (history best: advise's ties and caveats, or why
    it was left out), each folded at the width."""
    if form is not Format.TABLE:
        _print_data(frame[list(columns)].rename(columns=columns), form, console)
        return
    records = frame.to_dict("records")
    cells = [[_cell(name, record) for name in columns] for record in records]
    # a column of figures no row has says nothing, and takes width from the configuration
    empty = {i for i, name in enumerate(columns) if name in OPTIONAL and cells
             and all(row[i] == "-" for row in cells)}
    if empty:
        columns = {k: v for i, (k, v) in enumerate(columns.items()) if i not in empty}
        cells = [[c for i, c in enumerate(row) if i not in empty] for row in cells]
    indent = "  " if group else ""
    header, rows = fitted_table(list(columns.values()), [c in FOLDED for c in columns],
                                [c in TEXT for c in columns], cells,
                                console.width - len(indent))
    lines, heading = [indent + line for line in header], None
    for record, row_lines in zip(records, rows, strict=True):
        if group and record[group] != heading:
            heading = record[group]
            lines += textwrap.wrap(str(heading), console.width, break_on_hyphens=False)
        lines += [indent + line for line in row_lines]
        said = record.get("said")
        for line in [*([record["judgement"]] if record.get("judgement") else []),
                     *(said if isinstance(said, list) else [])]:
            lines += textwrap.wrap(f"↳ {line}", console.width, initial_indent=indent + "  ",
                                   subsequent_indent=indent + "    ", break_on_hyphens=False)
    sys.stdout.write("".join(line + "\n" for line in lines))


def show_parts(steps: pd.DataFrame, whole: pd.DataFrame, columns: dict[str, str],
               form: Format, console: Console) -> None:
    """CSV or JSON of rows with a throughput and rows timed as a whole, in one frame:
    `timing` says which, and each has its own figures' columns (the rest empty)."""
    import pandas as pd

    parts = [frame.assign(timing=timing) for frame, timing in ((steps, "steps"),
                                                                (whole, "whole"))
             if not frame.empty]
    show_frame(pd.concat(parts, ignore_index=True).reindex(columns=list(columns)), columns,
               form, console)


def fitted_table(headings: list[str], folded: list[bool], left: list[bool],
                 rows: list[list[str]], width: int) -> tuple[list[str], list[list[str]]]:
    """A table as lines within `width` (the heading's, and each row's): each column that
    never wraps as wide as its widest cell, the folded ones sharing what is left (the first
    two thirds), never cut. Plain text: rich lays out a table cell by cell, 3 s for the
    5,000 rows of a long trend."""
    natural = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headings)]
    fixed = sum(w for w, fold in zip(natural, folded, strict=True) if not fold)
    spare = width - fixed - 2 * (len(headings) - 1)
    shares = iter([2 / 3, 1.0] if sum(folded) == 2 else [1.0])
    widths = []
    for wide, fold in zip(natural, folded, strict=True):
        if fold:
            wide = min(wide, max(8, int(spare * next(shares))))
            spare -= wide
        widths.append(wide)

    def lines_of(row: list[str]) -> list[str]:
        parts = [_folded(text, wide) if fold else [text]
                 for text, wide, fold in zip(row, widths, folded, strict=True)]
        return ["  ".join((p[depth] if depth < len(p) else "").ljust(wide) if text else
                          (p[depth] if depth < len(p) else "").rjust(wide)
                          for p, wide, text in zip(parts, widths, left, strict=True)).rstrip()
                for depth in range(max(len(p) for p in parts))]

    return lines_of(headings), [lines_of(row) for row in rows]


def _folded(text: str, width: int) -> list[str]:
    """`text` in lines of `width` at most: broken at spaces, a longer word cut into pieces."""
    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]


def show_regressions(found: list[Regression], alone: int, threshold: float, form: Format,
                     console: Console) -> int:
    """Print the verdicts; the number of regressions."""
    regressions = sum(item.verdict is Verdict.REGRESSION for item in found)
    if form is not Format.TABLE:
        import pandas as pd

        rows = [{**item.__dict__, "verdict": item.verdict.value} for item in found]
        _print_data(pd.DataFrame(rows), form, console)
        return regressions
    console.print("each configuration's latest run against its earlier runs, their repeats\n"
                  "pooled (n: earlier/latest); ratio: latest/earlier median with its 95%\n"
                  f"interval; a change beyond {threshold:.0%} whose interval excludes 1 is a "
                  "regression\nor an improvement", highlight=False)
    table = Table(box=None, padding=(0, 1), pad_edge=False)
    table.add_column("configuration", overflow="fold", min_width=18)
    for column in ("n", "earlier/s", "latest/s", "ratio", "verdict"):
        table.add_column(column, justify="right", no_wrap=True)
    for item in found:
        style = STYLE[item.verdict]
        table.add_row(escape(f"{item.workload} {item.label} (latest {item.latest_date[:10]})"),
                      f"{item.base_repeats}/{item.new_repeats}", fmt_rate(item.base_median),
                      fmt_rate(item.new_median),
                      f"{item.ratio:.3f} ({item.low:.2f}-{item.high:.2f})",
                      f"[{style}]{item.verdict.value}[/]" if style else item.verdict.value)
    console.print(table)
    for item in found:  # what changed besides the figures: the code, the environment
        if item.code_change:
            console.print(f"code changed: {item.workload} {item.label}: {item.code_change[0]}"
                          f" -> {item.code_change[1]}", highlight=False, markup=False)
        if item.changes:
            console.print(f"changed: {item.workload} {item.label}: {', '.join(item.changes)}",
                          highlight=False, markup=False)
    counts = Counter(item.verdict for item in found)
    console.print(", ".join(f"{counts[v]} {v.value}" for v in Verdict)
                  + f";\n{alone} configuration(s) in one run only, nothing to compare")
    return regressions


TEXT = {"workload", "best", "label", "run", "location", "date", "item_unit", "code"}
FOLDED = {"label", "location"}  # the columns that fold; the rest never wrap
# figures a table leaves out where no row has them (older runs: no ceiling; no prices)
OPTIONAL = {"peak_fraction", "ceiling_fraction", "usd_per_million_items", "usd_per_run",
            "mem_peak_bytes", "code"}


def _cell(name: str, row: dict[str, Any]) -> str:
    value = row[name]
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if name == "date":
        return str(value)[:10]
    if name == "location":
        return Path(str(value)).name
    if name == "items_per_s":
        return f"{fmt_rate(value)} {row['item_unit']}/s"
    if name in ("usd_per_million_items", "usd_per_run"):
        return f"${fmt_usd(value)}"
    if name == "wall_s":
        return f"{fmt_seconds(value)} s"
    if name in ("spread", "peak_fraction", "ceiling_fraction"):
        return fmt_pct(value)
    if name == "mem_peak_bytes":
        return f"{fmt_mib(value)} MiB"
    if name == "code":  # 1+3fa2c9d01b2e as 1+3fa2c9d: enough to tell the code apart
        return str(value)[:-5]
    if isinstance(value, float):
        return f"{value:,.4g}"
    return str(value)


def _print_data(frame: pd.DataFrame, form: Format, console: Console) -> None:
    """Straight to stdout: no terminal width folds a line of data."""
    if form is Format.CSV:
        sys.stdout.write(frame.to_csv(index=False))
        return
    records: list[dict[str, Any]] = json.loads(frame.to_json(orient="records"))
    sys.stdout.write(json.dumps(records, indent=1) + "\n")
