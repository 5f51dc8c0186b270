"""Markdown for the report: tables and the number formats every table shares.

Empty strings for missing figures (None or NaN), so a table never shows "nan". A number a
formatter writes is a `Figure`, text that carries the number it stands for, and a table
is `TableLines`, its markdown carrying its rows: report.html builds its tables from those
rows and sorts and aligns them by the numbers, never reading a number back from text.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from orchestrator.errors import escaped

MIB = 1024 * 1024


class Figure(str):
    """A number as a table shows it ("1,204", "12.3%", "$0.05"): the text, carrying the
    number it stands for (`value`). Everything that reads text reads it as its text."""

    value: float

    def __new__(cls, text: str, value: float = math.nan) -> Figure:
        made = super().__new__(cls, text)
        made.value = float(value)
        return made


def number_of(cell: object) -> float | None:
    """The number a table cell stands for, a Figure's or a number's own, where finite; None
    for text (and for an empty cell)."""
    number = cell.value if isinstance(cell, Figure) else cell
    if isinstance(number, numbers.Real) and not isinstance(number, bool) \
            and math.isfinite(number):
        return float(number)
    return None


@dataclass(frozen=True)
class Table:
    """A table as the report builds it: its headers and its rows of cells (Figures, numbers
    or any value shown as text)."""

    headers: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]


class TableLines(str):
    """A table's markdown lines, as one string among the report's lines, carrying the
    `table` they were made from."""

    table: Table

    def __new__(cls, table: Table) -> TableLines:
        def line(values: Iterable[object]) -> str:
            return "| " + " | ".join(cell_text(v) for v in values) + " |"

        made = super().__new__(cls, "\n".join([
            line(table.headers), line("---" for _ in table.headers),
            *(line(row) for row in table.rows)]))
        made.table = table
        return made


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """A markdown table, as one entry of the report's lines (TableLines); every cell shown
    as text (`cell_text`), so no value a user or a workload supplies can end a row, start a
    heading or reach a terminal as a control."""
    return [TableLines(Table(tuple(headers), tuple(tuple(row) for row in rows)))]


def plain_text(value: object) -> str:
    """A value on one line, as text: a line break a space, a control character its code
    (`\\x1b`, `\\u202e`), so no value starts a heading or drives a terminal."""
    return escaped(str(value).replace("\r\n", " ").replace("\n", " ").replace("\r", " "))


def code_block(text: str) -> list[str]:
    """`text` as a fenced block of its own lines, each `plain_text` (a control character its
    code): the fence is longer than any run of backticks inside, so nothing ends it early."""
    lines = [plain_text(line) for line in text.splitlines()]
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}text", *lines, fence]


def cell_text(value: object) -> str:
    """A value as one table cell: `plain_text`, with `|` escaped."""
    return plain_text(value).replace("|", "\\|")


def flag_line(reason: str, width: int) -> list[object]:
    """The line under a flagged row of a table: why its figures cannot be true. Every table
    that shows a flagged row shows this line under it."""
    return [f"↳ {reason}", *([""] * (width - 1))]


def present(value: object) -> bool:
    return value is not None and value == value  # NaN is not equal to itself


def fmt(value: object) -> str:
    """A setting or any value as text; a number as a Figure (8.0 as "8")."""
    text = str(int(value)) if isinstance(value, float) and value.is_integer() \
        else plain_text(value)
    number = number_of(value)
    return text if number is None else Figure(text, number)


def _number(template: str, scale: float = 1.0) -> Callable[[float | None], str]:
    """A formatter for one kind of figure: `template` applied to value x `scale`."""
    def render(value: float | None) -> str:
        if value is None or value != value:
            return ""
        return Figure(template.format(value * scale), value)
    return render


def fmt_metric(value: float | None) -> str:
    if value is None or value != value:
        return ""
    return Figure(f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}", value)


def fmt_rate(value: float | None) -> str:
    """A rate (items per second), as the report, `matrix history`, `matrix compare` and the
    dashboard all show it: whole with thousands separators from 1,000 up (547,106), four
    significant digits below (1.204, 999.5), so no small rate rounds to an integer."""
    if value is None or value != value:
        return ""
    return Figure(f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}", value)


fmt_mib = _number("{:,.0f}", 1 / MIB)  # bytes as MiB
fmt_pct = _number("{:.1%}")  # a fraction as a percentage
fmt_ms = _number("{:.1f}", 1000)  # seconds as milliseconds
fmt_ratio = _number("{:.2f}x")  # a speedup
fmt_tflops = _number("{:.3g}", 1e-12)  # FLOP/s as TFLOP/s, three significant digits
fmt_usd = _number("{:.4g}")  # dollars
fmt_seconds = _number("{:.3f}")  # seconds


def money(usd: float) -> str:
    """Dollars to three significant figures, never fewer than cents: 0.0646, 4.20,
    1,234.50 (an interval of 0.0645-0.0648 is not '0.06')."""
    if usd == 0 or not math.isfinite(usd):
        return Figure(f"{usd:,.2f}", usd)
    decimals = max(2, 2 - math.floor(math.log10(abs(usd))))
    return Figure(f"{usd:,.{decimals}f}", usd)
