"""report.html beside report.md: the same report as one self-contained page to open in a
browser or mail to someone.

The markdown is rendered with markdown-it (CommonMark and tables; raw HTML and links off:
the report quotes workloads' error messages, which must stay text). Its figures are embedded as data
URIs, and the styles and the script that sorts each table by a click on its header are
inline, so the page loads nothing from anywhere: its Content-Security-Policy says so too.
"""

from __future__ import annotations

import base64
import html
import re
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.results.run_directory import atomic_write

if TYPE_CHECKING:
    from markdown_it.token import Token

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
               ".svg": "image/svg+xml"}
# A cell that reads as a number: 1,234 / 0.5 / 12.3% / 1.80x / $0.05 / 6 (3x) / 1.2e-05.
# Each digit has one place to go (an optional integer part before an optional `.` once let
# a digit run split anywhere: 30,000 digits and a letter took 40 s), so matching is linear.
NUMERIC = re.compile(r"[-+]?\$?(?:\d(?:[\d,]*\d)?(?:\.\d+)?|\.\d+)"
                     r"(?:e[-+]?\d+)?\s*(?:%|x|\(\d+x\))?", re.IGNORECASE)
FLAG = "↳"  # begins the line under a flagged row that says why (markdown.flag_line)
ONE_WORD = 40  # a one-word cell up to this long stays on one line
CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
       "script-src 'unsafe-inline'")

STYLE = """
:root { color-scheme: light; --line: #c9ced6; --zebra: #f3f5f8; --head: #e6eaf0; }
body { font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
       sans-serif; color: #1d232b; background: #fff; margin: 0; }
main { max-width: 1100px; margin: 0 auto; padding: 1.5rem 1.25rem 4rem; }
h1 { font-size: 1.9rem; line-height: 1.2; margin: 0.5rem 0 1rem; }
h2 { font-size: 1.4rem; margin: 2.5rem 0 0.75rem; padding-bottom: 0.25rem;
     border-bottom: 1px solid var(--line); }
h3 { font-size: 1.15rem; margin: 1.75rem 0 0.5rem; }
code { font: 0.9em/1.4 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace;
       background: var(--zebra); padding: 0.05em 0.3em; border-radius: 3px; }
pre { background: var(--zebra); padding: 0.6rem 0.8rem; border-radius: 4px; overflow-x: auto; }
pre code { background: none; padding: 0; }
img { max-width: 100%; height: auto; display: block; margin: 1rem 0; }
.scroll { overflow-x: auto; margin: 1rem 0; }
table { border-collapse: collapse; font-size: 0.9rem; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid var(--line); padding: 0.3rem 0.55rem; text-align: left;
         vertical-align: top; }
thead th { background: var(--head); white-space: nowrap; }
tbody tr:nth-child(even) { background: var(--zebra); }
td.num, th.num { text-align: right; white-space: nowrap; }
td.word { white-space: nowrap; }
td.flag { color: #7b341e; background: #fff7ed; }
/* a flag line spans the table, which may scroll: its sentence wraps at the visible width
   and stays in view */
td.flag .why { position: sticky; left: 0.55rem; display: inline-block;
               max-width: min(64rem, calc(100vw - 4rem)); }
th button { all: unset; cursor: pointer; display: block; width: 100%; }
th button:focus-visible { outline: 2px solid #2b6cb0; outline-offset: 2px; }
th[aria-sort] button::after { content: " \\25B2"; font-size: 0.75em; }
th[aria-sort="descending"] button::after { content: " \\25BC"; }
.missing { color: #9b2c2c; font-style: italic; }
"""

# Every table sorts by the column whose header is clicked: numbers as numbers (1,234 / 12%
# / $0.05), text in natural order, empty cells last either way; a second click reverses.
# A row that begins with "↳" explains the row above it and moves with that row.
SCRIPT = """
(function () {
  "use strict";
  var NUMBER = /^[-+]?\\$?(\\d[\\d,]*)?\\.?\\d+(e[-+]?\\d+)?/i;
  function key(row, column) {
    var cell = row.cells[column];
    var text = cell ? cell.textContent.trim() : "";
    var match = text.match(NUMBER);
    return {empty: text === "", text: text,
            number: match ? parseFloat(match[0].replace(/[$,]/g, "")) : null};
  }
  function compare(a, b) {
    if (a.empty || b.empty) { return a.empty === b.empty ? 0 : (a.empty ? 1 : -1); }
    if (a.number !== null && b.number !== null) { return a.number - b.number; }
    if (a.number !== null || b.number !== null) { return a.number !== null ? -1 : 1; }
    return a.text.localeCompare(b.text, undefined, {numeric: true, sensitivity: "base"});
  }
  function sortBy(table, header, column) {
    var descending = header.getAttribute("aria-sort") === "ascending";
    var body = table.tBodies[0];
    var groups = [];
    Array.prototype.forEach.call(body.rows, function (row) {
      var first = row.cells[0] ? row.cells[0].textContent.trim() : "";
      if (first.charAt(0) === "\\u21b3" && groups.length) {
        groups[groups.length - 1].rows.push(row);
      } else {
        groups.push({key: key(row, column), rows: [row], at: groups.length});
      }
    });
    groups.sort(function (a, b) {
      if (a.key.empty || b.key.empty) { return compare(a.key, b.key) || a.at - b.at; }
      return (descending ? -1 : 1) * compare(a.key, b.key) || a.at - b.at;
    });
    groups.forEach(function (group) {
      group.rows.forEach(function (row) { body.appendChild(row); });
    });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell) {
      cell.removeAttribute("aria-sort");
    });
    header.setAttribute("aria-sort", descending ? "descending" : "ascending");
  }
  Array.prototype.forEach.call(document.querySelectorAll("table"), function (table) {
    if (!table.tHead || !table.tBodies.length) { return; }
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (header, column) {
      var button = document.createElement("button");
      button.type = "button";
      button.title = "Sort by this column";
      while (header.firstChild) { button.appendChild(header.firstChild); }
      header.appendChild(button);
      button.addEventListener("click", function () { sortBy(table, header, column); });
    });
  });
})();
"""


def write_report_html(report_md: Path) -> Path:
    """Render `report_md` as report.html beside it (atomically); returns its path."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False}).enable("table") \
        .disable(["link", "autolink"])  # the report makes none; a quoted error's stay text
    tokens = parser.parse(report_md.read_text())
    title = _title(tokens) or report_md.parent.name
    _embed_images(tokens, report_md.parent)
    tokens = _join_flag_lines(tokens)
    _mark_cells(tokens)
    body = parser.renderer.render(tokens, parser.options, {})
    body = body.replace("<table>", '<div class="scroll"><table>') \
        .replace("</table>", "</table></div>")  # markdown-it escapes these in text
    path = report_md.with_name("report.html")
    atomic_write(path, _page(title, body).encode())
    return path


def _page(title: str, body: str) -> str:
    """The whole document: head with its policy, styles and title; the body; the script."""
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n"
            f"<body>\n<main>\n{body}</main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n")


def _title(tokens: list[Token]) -> str | None:
    """The text of the first level-one heading, unescaped (the page escapes it once)."""
    for opening, inline in pairwise(tokens):
        if opening.type == "heading_open" and opening.tag == "h1":
            return "".join(child.content for child in inline.children or [])
    return None


def _embed_images(tokens: list[Token], folder: Path) -> None:
    """Each image that is a file under `folder` becomes a data URI; one that is not there
    becomes a line saying so, so the page never refers to anything outside itself."""
    for inline in tokens:
        for child in inline.children or []:
            if child.type != "image":
                continue
            source = str(child.attrGet("src") or "")
            data = _data_uri(folder, source)
            if data:
                child.attrSet("src", data)
            else:
                child.type, child.tag, child.attrs = "html_inline", "", {}
                child.content = (f'<span class="missing">[figure not found: '
                                 f"{html.escape(source)}]</span>")
                child.children = None


def _data_uri(folder: Path, source: str) -> str | None:
    """`source`, a relative path under `folder` to an image file, as a data URI; or None."""
    from urllib.parse import unquote, urlsplit

    if not source or urlsplit(source).scheme or source.startswith("/"):
        return None
    path = (folder / unquote(source)).resolve()
    kind = IMAGE_TYPES.get(path.suffix.lower())
    if kind is None or not path.is_relative_to(folder.resolve()) or not path.is_file():
        return None
    return f"data:{kind};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def _join_flag_lines(tokens: list[Token]) -> list[Token]:
    """Each flag line (a row of "↳ why" and empty cells, under the row it explains) as one
    cell across the table, so its sentence is not squeezed into the first column."""
    joined: list[Token] = []
    row: list[Token] = []
    for token in tokens:
        if token.type == "tr_open":
            row = [token]
        elif row:
            row.append(token)
            if token.type == "tr_close":
                joined += _joined_row(row)
                row = []
        else:
            joined.append(token)
    return joined


def _joined_row(row: list[Token]) -> list[Token]:
    """`row` (tr_open ... tr_close), with a flag line's cells made one."""
    cells = [row[i:i + 3] for i in range(1, len(row) - 1, 3)]  # each td_open, inline, td_close
    first = cells[0][1].content.strip() if cells else ""
    if not first.startswith(FLAG) or any(cell[1].content.strip() for cell in cells[1:]):
        return row
    from markdown_it.token import Token

    cells[0][0].attrSet("colspan", str(len(cells)))
    cells[0][0].attrSet("class", "flag")
    inline = cells[0][1]  # its text stays text tokens, escaped; only the span is markup
    inline.children = [Token("html_inline", "", 0, content='<span class="why">'),
                       *(inline.children or []), Token("html_inline", "", 0, content="</span>")]
    return [row[0], *cells[0], row[-1]]


def _mark_cells(tokens: list[Token]) -> None:
    """Right-align each table column whose non-empty cells all read as numbers, and keep
    other one-word cells (names, paths, versions) from breaking at their hyphens."""
    rows: list[list[tuple[Token, str]]] = []
    for index, token in enumerate(tokens):
        if token.type == "table_open":
            rows = []
        elif token.type == "tr_open":
            rows.append([])
        elif token.type in ("th_open", "td_open") and rows:
            rows[-1].append((token, tokens[index + 1].content.strip()))
        elif token.type == "table_close" and rows:
            header, body = rows[0], rows[1:]
            for column, (opening, _) in enumerate(header):
                cells = [row[column] for row in body if column < len(row)]
                filled = [text for _, text in cells if text]
                numeric = bool(filled) and all(NUMERIC.fullmatch(text) for text in filled)
                if numeric:
                    opening.attrJoin("class", "num")
                for cell, text in cells:
                    if numeric:
                        cell.attrJoin("class", "num")
                    elif text and len(text) <= ONE_WORD and not any(c.isspace() for c in text):
                        cell.attrJoin("class", "word")
