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
