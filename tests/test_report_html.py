"""report.html beside report.md: one self-contained page (figures as data URIs, nothing
loaded from anywhere), each markdown table an HTML table that sorts by a click on its
header. The fast tests read the HTML; the others open it in a real headless Chromium."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator.report.frame import run_frame
from orchestrator.report.html import write_report_html
from orchestrator.report.markdown import (
    Figure,
    flag_line,
    fmt_pct,
    fmt_rate,
    fmt_ratio,
    fmt_usd,
    table,
)
from orchestrator.report.writer import write_report
from tests.browser import Browser
from tests.conftest import run_cli
from tests.report_fixtures import fixture_run
from tests.store_runs import write_run

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
IMG = re.compile(r'<img src="([^"]*)"')
COLUMN = ("return Array.from(arguments[0].tBodies[0].rows, "
          "r => r.cells[arguments[1]].textContent.trim())")
ROWS = "return Array.from(arguments[0].tBodies[0].rows, r => r.textContent.trim())"


def markdown_tables(text: str) -> int:
    """How many tables a report's markdown holds: one delimiter row (| --- | ...) each."""
    return len(re.findall(r"^\|(?: *:?-{3,}:? *\|)+$", text, flags=re.MULTILINE))


@pytest.fixture(scope="module")
def fixture_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hand-made run of every workload and status, reported: its report.md's path."""
    store = fixture_run(tmp_path_factory.mktemp("html") / "fixture")
    return write_report(store.root, run_frame(store), now=NOW)


@pytest.fixture(scope="module")
def cli_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A journal of two machines' repeats, reported by `matrix report`: its run directory."""
    root = tmp_path_factory.mktemp("cli")
    run_dir = root / "nightly"
    write_run(run_dir, datetime(2026, 11, 20, 3, 0, tzinfo=UTC),
              {"a100/torch/32": [1000.0, 1010.0, 990.0], "v100/torch/32": [500.0, 505.0, 495.0]},
              price=3.0)
    done = run_cli("report", str(run_dir), cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    return run_dir


def test_report_html_is_written_beside_report_md_and_refers_to_nothing_outside_itself(
        fixture_report):
    page = fixture_report.with_name("report.html").read_text()
    assert "http://" not in page and "https://" not in page and 'src="plots/' not in page
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", fixture_report.read_text())
    sources = IMG.findall(page)
    assert len(sources) == len(figures) >= 4
    for source, figure in zip(sources, figures, strict=True):
        prefix = "data:image/png;base64,"
        assert source.startswith(prefix), source[:60]
        assert base64.b64decode(source.removeprefix(prefix)) == \
            (fixture_report.parent / figure).read_bytes()


def test_each_markdown_table_becomes_an_html_table(fixture_report):
    page = fixture_report.with_name("report.html").read_text()
    assert page.count("<table>") == markdown_tables(fixture_report.read_text()) >= 10
    assert page.startswith("<!DOCTYPE html>") and "<title>fixture</title>" in page


def test_report_text_is_escaped_once_and_never_becomes_markup_or_a_link(tmp_path):
    (tmp_path / "plots").mkdir()
    (tmp_path / "outside.png").write_bytes(b"\x89PNG not really")
    lines = ["# R&D <run>", "", *table(["where", "reason", "$/hour"], [
        ["a/b", "<script>alert(1)</script> & &amp; [x](https://evil.example)", 3],
        ["c/d", "see <http://evil.example/x>", fmt_usd(12.5)]]), "",
        "![gone](plots/missing.png)", "", "![escape](../outside.png)"]
    page = write_report_html(tmp_path / "report.html", lines, "unused").read_text()
    assert "<title>R&amp;D &lt;run&gt;</title>" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &amp; [x](https://evil.example)" in page
    assert "<script>alert" not in page and "&amp;amp;" not in page and "href=" not in page
    assert "<img" not in page
    assert page.count('<span class="missing">[figure not found:') == 2


def test_numeric_columns_align_right_by_the_numbers_the_report_made(tmp_path):
    """A column is numeric where every filled cell is a number the report formatted (a
    Figure) or a number; its cells carry it, and the table sorts by it. Text that only
    looks like a number (a version) is text: nothing is read back from the page's text."""
    lines = ["# numbers", "", *table(
        ["hardware", "n", "items/s", "spread", "speedup", "$/epoch", "torch", "flags"], [
            ["a100", Figure("6 (3x)", 6), fmt_rate(1000.0), fmt_pct(0.015), fmt_ratio(1.8),
             fmt_usd(0.05), "2.10", "over the peak"],
            flag_line("implausible: 412 TFLOP/s, over the 312 TFLOP/s peak", 8),
            ["v100", Figure("6 (3x)", 6), fmt_rate(500.0), fmt_pct(0.12), "",
             fmt_usd(1.2e-05), "2.9", ""],
            flag_line("contended: <b>a worker's</b> & its [link](https://evil.example)", 8)])]
    page = write_report_html(tmp_path / "report.html", lines, "numbers").read_text()
    headers = re.findall(r"<th( class=\"num\")?>([^<]+)</th>", page)
    assert [name for numeric, name in headers if numeric] == \
        ["n", "items/s", "spread", "speedup", "$/epoch"]
    assert '<td class="num" data-value="1000.0">1,000</td>' in page
    assert '<td class="num" data-value="6.0">6 (3x)</td>' in page
    assert '<td class="num" data-value="1.2e-05">1.2e-05</td>' in page
    assert '<td class="word">a100</td>' in page and '<td class="word">2.10</td>' in page
    assert "<td>over the peak</td>" in page  # words may wrap
    assert ('<tr>\n<td colspan="8" class="flag"><span class="why">↳ implausible: 412 TFLOP/s, '
            "over the 312 TFLOP/s peak</span></td>\n</tr>") in page
    # the span is the only markup: the reason itself stays text
    assert ('<span class="why">↳ contended: &lt;b&gt;a worker\'s&lt;/b&gt; &amp; its '
            "[link](https://evil.example)</span>") in page
    assert "NUMBER" not in page and ".match(" not in page  # the script parses no text


def test_a_flag_line_under_a_wide_table_wraps_where_it_can_be_read(browser: Browser, tmp_path):
    columns = [f"column {i}" for i in range(24)]
    reason = "contended: " + " ".join(["its threads waited for a CPU"] * 12)
    lines = ["# wide", "", *table(columns, [[fmt_rate(float(i)) for i in range(1000, 1024)],
                                           flag_line(reason, len(columns))])]
    assert browser.open(write_report_html(tmp_path / "report.html", lines, "wide")) == []
    box = browser.js("""
        const why = document.querySelector('td.flag .why').getBoundingClientRect();
        const scroll = document.querySelector('.scroll');
        const view = scroll.getBoundingClientRect();
        return {why_left: why.left, why_right: why.right, why_height: why.height,
                view_left: view.left, view_right: view.right,
                table: scroll.scrollWidth, shown: scroll.clientWidth};""")
    assert box["table"] > box["shown"]  # the table scrolls: wider than its box
    # the sentence wraps within the box, not across the whole table
    assert box["view_left"] <= box["why_left"] and box["why_right"] <= box["view_right"], box
    assert box["why_height"] > 40, box  # more than one line
    browser.screenshot("report-html-wide-flag-line")


def test_the_report_page_loads_with_no_console_error_and_every_figure_shows(
        browser: Browser, cli_report):
    page = cli_report / "report.html"
    assert browser.open(page) == []
    widths = browser.js("return Array.from(document.images, i => i.complete && i.naturalWidth)")
    assert widths and all(width > 0 for width in widths), widths
    tables = browser.js("return document.querySelectorAll('table').length")
    assert tables == markdown_tables((cli_report / "report.md").read_text()) >= 3
    assert browser.screenshot("report-html").stat().st_size > 10_000


def test_clicking_a_numeric_header_sorts_its_table_up_then_down(browser: Browser, cli_report):
    from selenium.webdriver.common.by import By

    assert browser.open(cli_report / "report.html") == []
    table = next(t for t in browser.driver.find_elements(By.TAG_NAME, "table")
                 if "train words/s" in t.find_element(By.TAG_NAME, "thead").text)
    headers = table.find_elements(By.CSS_SELECTOR, "thead th")
    column = [h.text.strip() for h in headers].index("train words/s")
    before = browser.js(COLUMN, table, column)

    def number(text: str) -> float:
        return float(text.replace(",", ""))

    headers[column].click()
    ascending = browser.js(COLUMN, table, column)
    assert ascending == sorted(before, key=number) and ascending != before
    assert headers[column].get_attribute("aria-sort") == "ascending"
    browser.screenshot("report-html-sorted")
    headers[column].click()
    assert browser.js(COLUMN, table, column) == sorted(before, key=number, reverse=True)
    assert headers[column].get_attribute("aria-sort") == "descending"
    assert [h.get_attribute("aria-sort") for h in headers].count(None) == len(headers) - 1
    assert browser.errors() == []


def test_the_full_fixture_page_loads_and_a_flag_line_moves_with_its_row(
        browser: Browser, fixture_report):
    from selenium.webdriver.common.by import By

    assert browser.open(fixture_report.with_name("report.html")) == []
    widths = browser.js("return Array.from(document.images, i => i.naturalWidth)")
    assert widths and all(width > 0 for width in widths), widths
    table = next(t for t in browser.driver.find_elements(By.TAG_NAME, "table")
                 if "↳" in t.text and "train samples/s" in t.text)
    headers = table.find_elements(By.CSS_SELECTOR, "thead th")
    column = [h.text.strip() for h in headers].index("train samples/s")
    before = flag_lines_under(browser, table)
    assert before
    for _ in range(2):  # up, then down: each flag line stays under the row it explains
        headers[column].click()
        assert flag_lines_under(browser, table) == before
    assert browser.errors() == []
    browser.screenshot("report-html-fixture")


def flag_lines_under(browser: Browser, table: object) -> dict[str, str]:
    """Each flag line (a row beginning with ↳) of `table`, and the row just above it."""
    rows = browser.js(ROWS, table)
    return {row: rows[i - 1] for i, row in enumerate(rows) if row.startswith("↳") and i}
