"""One value never blanks a shared page, and one run's rows never stop the others (issue 41,
item 4): a string parameter `<!--<script>` once made the workload page's embedded JSON
swallow the rest of the document, and a journal naming its workload `../../x`, once
imported, made `matrix dashboard` fail for the whole store. Built on the journal of
tests/journals/impossible/, as a colleague would hand-edit one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli

IMPOSSIBLE = Path(__file__).parent / "journals" / "impossible"
HOSTILE = "<!--<script>"


def edited(target: Path, edit) -> Path:
    shutil.copytree(IMPOSSIBLE, target)
    lines = [json.dumps(edit(json.loads(line)))
             for line in (target / "results.jsonl").read_text().splitlines()]
    (target / "results.jsonl").write_text("\n".join(lines) + "\n")
    return target


def traversal(record: dict) -> dict:
    """The P100 row's cell, its workload named to climb out of the site."""
    if record["cell_id"] == "p100-seed000" and record["record"] == "cell":
        record["workload"] = "../../x"
    return record


def test_a_workload_name_that_is_a_path_is_a_located_warning_and_no_page(tmp_path):
    run = edited(tmp_path / "run", traversal)
    url = f"sqlite:///{tmp_path / 'r.db'}"
    done = run_cli("db", "import", str(run), "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{run / 'results.jsonl'}:4: unreadable line skipped" in done.stderr
    assert "workload" in done.stderr and "pattern" in done.stderr
    site = tmp_path / "site"
    built = run_cli("dashboard", "-o", str(site), "--db", url, cwd=tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    assert {p.name for p in site.glob("workload-*.html")} == {"workload-lstm_lm.html",
                                                             "workload-gpt_lm.html"}
    assert not (tmp_path / "x.html").exists() and not (tmp_path.parent / "x.html").exists()
    report = run_cli("report", str(run), cwd=tmp_path)
    assert report.returncode == 0 and "results.jsonl:4: unreadable line" in report.stderr


def test_a_name_the_store_took_before_names_were_checked_gets_a_page_of_its_own():
    from orchestrator.dashboard.data import page_name

    assert page_name("lstm_lm") == "workload-lstm_lm.html"
    odd = page_name("../../x")
    assert odd.startswith("workload-") and "/" not in odd and ".." not in odd


@pytest.mark.slow
def test_a_parameter_that_opens_an_html_comment_blanks_no_page(tmp_path, browser):
    def hostile(record: dict) -> dict:
        if record["cell_id"] == "cpu-lstm" and record["record"] == "cell":
            record["param.dataset"] = HOSTILE
        return record

    run = edited(tmp_path / "run", hostile)
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert run_cli("db", "import", str(run), "--db", url, cwd=tmp_path).returncode == 0
    site = tmp_path / "site"
    built = run_cli("dashboard", "-o", str(site), "--db", url, cwd=tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    for page, charts in (("index.html", 0), ("workload-lstm_lm.html", 4)):
        assert browser.open(site / page) == []
        drawn = browser.js("return Object.keys(window.matrixCharts || {}).length;")
        rows = browser.js("return document.querySelectorAll('tbody tr').length;")
        assert drawn >= charts and rows >= 1, (page, drawn, rows)
    shown = browser.js("return document.querySelector('#rows-lstm_lm').textContent;")
    assert HOSTILE in shown  # as text, where it belongs
    browser.screenshot("hostile-lstm_lm")


CLIENT = """
import matrix_bench
bench = matrix_bench.attach()
meter = bench.start_epoch(warmup_steps=1)
for _ in range(3):
    with meter.step(items=4):
        sum(range(20000))
bench.end_epoch(meter)
"""


def test_history_shows_a_parameter_value_as_text(tmp_path):
    """A value with rich markup and an escape sequence: `[red]` stays in the regressions
    table (rich once took it for a style and dropped it), ESC is shown as its code."""
    (tmp_path / "t.py").write_text(CLIENT)
    (tmp_path / "m.yaml").write_text(
        "name: hv\nhardware: [{name: box, kind: local}]\n"
        "stacks: [{name: here, executor: process}]\nworkloads:\n"
        "  - {name: s, command: [python, t.py, '{tag}'], params: {tag: \"[red]x\\e[31m\"}}\n")
    store = ["--db", f"sqlite:///{tmp_path / 'r.db'}"]
    for run in ("a", "b"):
        done = run_cli("run", "m.yaml", "--no-ray", *store, "-o", run, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
    for question in ("regressions", "trend"):
        shown = run_cli("history", question, *store, cwd=tmp_path, env={"COLUMNS": "120"})
        assert shown.returncode == 0, shown.stderr
        assert "\x1b" not in shown.stdout and "tag=[red]x\\x1b[31m" in shown.stdout, shown.stdout
