"""Scripts timed as a whole (a command without the matrix_bench client) in the results
store: `matrix history best|trend` and the dashboard show them in tables of their own, with
the wall time of a run and its cost, beside the throughput tables of a script that reports
its steps."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli, write
from tests.test_command_workloads import PLAIN, TRAIN

MATRIX = """
name: whole
hardware: [{name: box, kind: local, price_per_hour: 3.6}]
stacks: [{name: here, executor: process}]
workloads:
  - name: plain
    command: ["python", "plain.py", "{seconds}", "0"]
    params: {seconds: [0.2, 0.5]}
  - name: counted
    command: ["python", "train.py", "--batch-size", "8"]
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[str, object]:
    """A store holding one run of both scripts, and the run's folder."""
    root = tmp_path_factory.mktemp("whole")
    write(root / "plain.py", PLAIN)
    write(root / "train.py", TRAIN)
    write(root / "m.yaml", MATRIX)
    url = f"sqlite:///{root / 'results.db'}"
    done = run_cli("run", "m.yaml", "--no-ray", "--db", url, cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    return url, root


@pytest.mark.slow
def test_history_shows_scripts_timed_as_a_whole_in_their_own_table(store):
    url, root = store
    best = run_cli("history", "best", "--db", url, cwd=root, env={"COLUMNS": "80"})
    assert best.returncode == 0, best.stderr
    steps, whole = best.stdout.split("timed as a whole")
    assert "counted" in steps and "sample/s" in steps and "plain" not in steps
    assert "quickest" in whole and "cheapest" in whole and "$/run" in whole
    assert all("seconds=0.2" in line for line in whole.splitlines() if "quickest" in line)
    assert max(len(line) for line in best.stdout.splitlines()) <= 80

    trend = run_cli("history", "trend", "--db", url, "--format", "json", cwd=root)
    assert trend.returncode == 0, trend.stderr
    rows = json.loads(trend.stdout)
    timed = {row["configuration"]: row for row in rows if row["timing"] == "whole"}
    assert set(timed) == {"box/here seconds=0.2", "box/here seconds=0.5"}
    for row in timed.values():
        assert row["items_per_s"] is None and row["repeats"] == 1
        assert row["usd_per_run"] == pytest.approx(row["wall_s"] * 3.6 / 3600)
    # each at least its own sleep (an order between them would be the machine's load)
    assert timed["box/here seconds=0.2"]["wall_s"] >= 0.2
    assert timed["box/here seconds=0.5"]["wall_s"] >= 0.5
    (counted,) = [row for row in rows if row["timing"] == "steps"]
    assert counted["items_per_s"] > 0 and counted["wall_s"] is None

    regressions = run_cli("history", "regressions", "--db", url, "--workload", "plain",
                          cwd=root)
    assert regressions.returncode == 0 and "no results with a throughput" in regressions.stdout


@pytest.mark.slow
def test_the_dashboard_shows_scripts_timed_as_a_whole(store, browser, tmp_path):
    url, root = store
    built = run_cli("dashboard", "-o", str(tmp_path / "site"), "--db", url, cwd=root)
    assert built.returncode == 0, built.stderr
    site = tmp_path / "site"

    def rows(table: str) -> list[list[str]]:
        return browser.js("return [...document.querySelectorAll('#' + arguments[0] + "
                          "' tbody tr')].map(r => [...r.cells].map(c => c.textContent));",
                          f"table-{table}")

    assert browser.open(site / "index.html") == []
    (quickest,) = rows("overview-whole")
    assert quickest[0] == "plain" and "seconds=0.2" in quickest[2]
    assert quickest[4].startswith("$") and float(quickest[3]) >= 0.2
    assert [row[0] for row in rows("overview")] == ["counted"]
    assert browser.open(site / "workload-plain.html") == []
    assert sorted(row[4] for row in rows("whole-plain")) == ["seconds=0.2", "seconds=0.5"]
    browser.screenshot("dashboard-whole-plain")
    (page,) = (site / "runs").glob("*.html")
    assert browser.open(page) == []
    assert len(rows("whole-plain")) == 2 and len(rows("rows-counted")) == 1
    assert "plain: this run&#x27;s configurations, timed as a whole" in page.read_text()
