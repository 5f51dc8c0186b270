"""report.html beside report.md: the same report as one self-contained page to open in a
browser or mail to someone.

It is made from the report's lines, as report.md is. Its text is rendered with markdown-it
(CommonMark and tables; raw HTML and links off: the report quotes workloads' error
messages, which must stay text). Each table the report built (markdown.TableLines) is made
from its typed rows: a column of numbers is right-aligned and each of its cells carries
its number (`data-value`), by which the table sorts; no number is read back from text.
Its figures are embedded as data URIs, and the styles and the script that sorts each
table by a click on its header are inline, so the page loads nothing from anywhere: its
Content-Security-Policy says so too.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Sequence
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.report.markdown import Table, TableLines, number_of, plain_text
from orchestrator.results.run_directory import atomic_write

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
               ".svg": "image/svg+xml"}
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

# Every table sorts by the column whose header is clicked: by the numbers its cells carry
# (data-value), text in natural order, empty cells last either way; a second click
# reverses. A flag line (its one cell of class "flag") explains the row above it and moves
# with that row.
SCRIPT = """
(function () {
  "use strict";
  function key(row, column) {
    var cell = row.cells[column];
    var text = cell ? cell.textContent.trim() : "";
    var number = cell && cell.hasAttribute("data-value") ?
      parseFloat(cell.getAttribute("data-value")) : null;
    return {empty: text === "", text: text, number: number};
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
      var flag = row.cells[0] && row.cells[0].classList.contains("flag");
      if (flag && groups.length) {
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


def write_report_html(path: Path, lines: Sequence[str], title: str) -> Path:
    """Render the report's `lines` (as report.md joins them; figures relative to `path`'s
    folder) as the page at `path`, atomically; returns its path. `title` where the report
    has no heading."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False}).enable("table") \
        .disable(["link", "autolink"])  # the report makes none; a quoted error's stay text
    def inline(text: str) -> str:
        rendered: str = parser.renderInline(text)
        return rendered

    parts: list[str] = []
    text: list[str] = []
    for line in lines:
        if isinstance(line, TableLines):
            parts += [_rendered(parser, text, path.parent), _table(line.table, inline)]
            text = []
        else:
            text.append(line)
    parts.append(_rendered(parser, text, path.parent))
    heading = _title(parser.parse("\n".join(line for line in lines
                                            if not isinstance(line, TableLines))))
    atomic_write(path, _page(heading or title, "".join(parts)).encode())
    return path


def _rendered(parser: MarkdownIt, lines: list[str], folder: Path) -> str:
    """Lines of the report's text (no table of its own among them), as HTML."""
    tokens = parser.parse("\n".join(lines))
    _embed_images(tokens, folder)
    body: str = parser.renderer.render(tokens, parser.options, {})
    return body.replace("<table>", '<div class="scroll"><table>') \
        .replace("</table>", "</table></div>")  # a table in a view's own text


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


def _table(table: Table, inline: Callable[[str], str]) -> str:
    """The table as HTML from its typed rows: each cell's text rendered inline (escaped;
    code spans kept), a column whose filled cells all stand for numbers right-aligned with
    each number on its cell, other one-word cells kept on one line, and a flag line (its
    first cell "↳ why", the others empty) one cell across the table."""
    width = len(table.headers)
    rows = [row for row in table.rows if not _is_flag_line(row)]
    numeric = [bool(filled) and all(number_of(cell) is not None for cell in filled)
               for column in range(width)
               for filled in [[row[column] for row in rows if column < len(row)
                               and plain_text(row[column])]]]
    head = "".join(f"<th{_class('num' if numeric[c] else '')}>{inline(plain_text(name))}</th>\n"
                   for c, name in enumerate(table.headers))
    body = []
    for row in table.rows:
        if _is_flag_line(row):
            why = inline(plain_text(row[0]))
            body.append(f'<tr>\n<td colspan="{width}" class="flag"><span class="why">{why}'
                        "</span></td>\n</tr>\n")
            continue
        cells = []
        for column, cell in enumerate(row):
            text = plain_text(cell)
            number = number_of(cell) if column < width and numeric[column] else None
            kind = "num" if number is not None else (
                "word" if text and len(text) <= ONE_WORD and not any(c.isspace() for c in text)
                else "")
            value = f' data-value="{number!r}"' if number is not None else ""
            cells.append(f"<td{_class(kind)}{value}>{inline(text)}</td>\n")
        body.append(f"<tr>\n{''.join(cells)}</tr>\n")
    return (f'<div class="scroll"><table>\n<thead>\n<tr>\n{head}</tr>\n</thead>\n'
            f"<tbody>\n{''.join(body)}</tbody>\n</table></div>\n")


def _is_flag_line(row: Sequence[object]) -> bool:
    """A row that says why the row above it is flagged (markdown.flag_line)."""
    return bool(row) and plain_text(row[0]).startswith(FLAG) and not any(
        plain_text(cell) for cell in row[1:])


def _class(name: str) -> str:
    return f' class="{name}"' if name else ""
