"""A sweep and the results store: it indexes each cell as it journals it, refuses to start
without the store it was given, and when the store goes away mid-sweep (a real PostgreSQL
that drops the sweep's connection) it warns once, journals on, and an import catches up."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from orchestrator.database.connection import StoreUnreachableError
from orchestrator.database.results_db import ResultsDB
from orchestrator.database.url import parse_url
from tests.conftest import cell_records, run_cli

pytestmark = pytest.mark.slow

SLEEPS = """
    name: indexed
    hardware: [{{name: box, kind: local}}]
    stacks: [{{name: here, executor: process}}]
    workloads: [{{name: sleep, params: {{seconds: {seconds}, message: [a, b, c, d]}},
                  epochs: 1}}]
    """


def stored_cells(url: str) -> int:
    """The cells the store holds; 0 before the sweep has made its tables (a read makes
    none)."""
    try:
        results = ResultsDB.open(parse_url(url), create=False)
    except StoreUnreachableError:
        return 0
    try:
        return int(results.db.query("SELECT COUNT(*) FROM cells")[0][0])
    finally:
        results.close()


def test_a_sweep_indexes_every_cell_and_an_import_then_adds_nothing(matrix_file, tmp_path):
    url = f"sqlite:///{tmp_path / 'team.db'}"
    matrix = matrix_file(SLEEPS.format(seconds=0.05))
    done = run_cli("run", str(matrix), "-o", "run", "--no-ray", "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"store:   {url}" in done.stdout
    assert stored_cells(url) == len(cell_records(tmp_path / "run")) == 4
    imported = run_cli("db", "import", "run", "--db", url, cwd=tmp_path)
    assert "4 cell attempt(s), 0 new, 0 new measurement(s)" in imported.stdout
    best = run_cli("history", "best", "--db", url, "--format", "csv", cwd=tmp_path)
    assert best.returncode == 0, best.stderr
    # the fastest (no price, so no cheapest); a repeat flagged on a busy machine is said
    # apart, as "left out"
    picks = [line.split(",")[1] for line in best.stdout.splitlines()[1:]]
    assert [pick for pick in picks if pick != "left out"] == ["fastest"], best.stdout


def test_the_store_going_away_mid_sweep_is_one_warning_and_an_import_catches_up(
        matrix_file, tmp_path, postgres_server):
    url = postgres_server.create_database("goes_away")
    matrix = matrix_file(SLEEPS.format(seconds=1.0))
    sweep = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "run", str(matrix), "-o", "run", "--no-ray"],
        cwd=tmp_path, env={**os.environ, "MATRIX_BENCH_DB": url, "COLUMNS": "200"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while stored_cells(url) < 1:
        assert time.monotonic() < deadline and sweep.poll() is None, "no cell reached the store"
        time.sleep(0.2)
    reader = ResultsDB.open(parse_url(url))
    try:  # the server drops every other connection, as a restart or a failover would
        reader.db.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = 'goes_away' AND pid <> pg_backend_pid()")
    finally:
        reader.close()
    output, _ = sweep.communicate(timeout=300)
    assert sweep.returncode == 0, output
    assert postgres_server.password not in output
    warnings = [line for line in output.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, output
    assert "matrix db import" in warnings[0] and "journal keeps every cell" in warnings[0]
    assert "store:" not in output  # it did not claim the store holds the run
    assert [c["status"] for c in cell_records(tmp_path / "run")] == ["ok"] * 4
    indexed = stored_cells(url)
    assert 1 <= indexed < 4
    imported = run_cli("db", "import", "run", cwd=tmp_path, env={"MATRIX_BENCH_DB": url})
    assert f"4 cell attempt(s), {4 - indexed} new" in imported.stdout, imported.stderr
    assert stored_cells(url) == 4


def test_the_default_store_is_reports_results_db_under_the_working_folder(matrix_file,
                                                                          tmp_path):
    matrix = matrix_file(SLEEPS.format(seconds=0.01))
    env = {k: v for k, v in os.environ.items() if k != "MATRIX_BENCH_DB"}
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(matrix),
                           "--no-ray"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "store:   sqlite:///reports/results.db" in done.stdout
    assert stored_cells(f"sqlite:///{tmp_path / 'reports' / 'results.db'}") == 4
    off = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(matrix),
                          "--no-ray", "--rerun", "-o", "again", "--db", "none"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=300)
    assert off.returncode == 0 and "store:" not in off.stdout
    assert stored_cells(f"sqlite:///{tmp_path / 'reports' / 'results.db'}") == 4
