"""A script timed as a whole whose repeats' wall times spread beyond NOISY_SPREAD is flagged
`noisy`, as a throughput table's configuration is: in the report's whole-run table, in
`matrix history` and in the dashboard's tables of scripts timed as a whole. A hand-made run
(tests/report_fixtures.py's way): one configuration whose three repeats took 10, 12 and 19 s
(spread (19 - 10) / 12 = 75%), one whose took 10.0, 10.2 and 10.4 s
(3.9%), and one of a single repeat (no spread to speak of)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from orchestrator.results.records import CellRecord, MeasurementRecord, ProvenanceRecord, Status
from orchestrator.results.run_directory import RunDirectory
from tests.conftest import run_cli

WALLS = {"wide": [10.0, 12.0, 19.0], "tight": [10.0, 10.2, 10.4], "once": [10.0]}


def whole_run(root: Path) -> Path:
    """A run of the command workload `script`, timed as a whole, with WALLS' wall times."""
    store = RunDirectory(root)
    store.root.mkdir(parents=True)
    for name, walls in WALLS.items():
        for repeat, wall in enumerate(walls, start=1):
            ident = {"run": "whole", "cell_id": f"{name}-{repeat}", "config_id": name,
                     "repeat": repeat}
            store.append([
                ProvenanceRecord(**ident, hostname="box", python="3.11.7"),
                MeasurementRecord(**ident, epoch=1, timing="whole", epoch_s=wall,
                                  item_unit="sample", host_rss_peak_bytes=2**30),
                CellRecord(**ident, status=Status.OK, started_at="2026-11-22T00:00:00+00:00",
                           wall_s=wall + 1, hardware="box", stack="here", workload="script",
                           **{"param.setting": name})])
    return store.root


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return whole_run(tmp_path_factory.mktemp("whole-noisy") / "whole")


def test_the_report_flags_a_script_whose_wall_times_spread(run):
    done = run_cli("report", str(run), cwd=run.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    report = (run / "report.md").read_text()
    section = report.split("## script (timed as a whole)")[1].split("\n## ")[0]
    assert "noisy above 10%" in section
    rows = {cells[3]: cells for line in section.splitlines() if line.startswith("| box")
            for cells in [[c.strip() for c in line.split("|")]]}
    assert set(rows) == set(WALLS)
    assert rows["wide"][6] == "75.0%" and rows["wide"][-2] == "noisy", rows["wide"]
    assert rows["tight"][6] == "3.9%" and rows["tight"][-2] == "", rows["tight"]
    assert rows["once"][-2] == "", rows["once"]


def test_history_and_the_dashboard_flag_a_script_whose_wall_times_spread(run, tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    imported = run_cli("db", "import", str(run), "--db", url, cwd=tmp_path)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    trend = run_cli("history", "trend", "--db", url, "--format", "json", cwd=tmp_path)
    assert trend.returncode == 0, trend.stderr
    rows = {row["configuration"].split("=")[-1]: row for row in json.loads(trend.stdout)}
    assert rows["wide"]["spread"] == pytest.approx(0.75)
    assert rows["wide"]["flags"] == "noisy"
    assert rows["tight"]["flags"] == "" and rows["once"]["flags"] == ""

    built = run_cli("dashboard", "-o", str(tmp_path / "site"), "--db", url, cwd=tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    page = (tmp_path / "site" / "workload-script.html").read_text()
    data = json.loads(re.search(r'id="page-data" type="application/json">(.*?)</script>',
                                page, re.S).group(1))
    (table,) = [t for t in data["tables"] if t["id"] == "whole-script"]
    names = [column["key"] for column in table["columns"]]
    shown = {row["cells"][names.index("settings")][0]: row for row in table["rows"]}
    assert shown["setting=wide"]["cells"][names.index("flags")][0] == "noisy"
    assert shown["setting=wide"]["cells"][names.index("spread")][0] == "75.0%"
    assert shown["setting=wide"]["flagged"] and not shown["setting=tight"]["flagged"]
    assert shown["setting=tight"]["cells"][names.index("flags")][0] == ""
