"""The results store (orchestrator/database/): the same tests against SQLite and a real
PostgreSQL: import, idempotent re-import, two writers at once, a migration from the previous
schema, the history queries and the regression exit code, and bad input in one line."""

from __future__ import annotations

import itertools
import json
import shutil
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.database.connection import StoreUnreachableError, connect
from orchestrator.database.history import Filters, best, per_run, regressions, repeats
from orchestrator.database.judging import judged_runs
from orchestrator.database.results_db import INSERT_MEASUREMENT, ResultsDB
from orchestrator.database.rows import CELL_COLUMNS, cell_row, measurement_rows, run_key
from orchestrator.database.schema import SCHEMA_VERSION, StoreSchemaError, ensure_schema
from orchestrator.database.store_rows import store_rows
from orchestrator.database.url import StoreURLError, parse_url
from orchestrator.report.compare import Verdict
from tests.conftest import PROJECT, run_cli
from tests.store_runs import write_run

DAY = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
FAST = [1000.0, 1010.0, 990.0]
DATABASES = itertools.count()  # one new PostgreSQL database per test


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    """A new, empty store of each kind."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store' / 'results.db'}"
    server = request.getfixturevalue("postgres_server")
    return server.create_database(f"store_{next(DATABASES)}")


def open_store(url: str) -> ResultsDB:
    return ResultsDB.open(parse_url(url))


def count(url: str, table: str) -> int:
    results = open_store(url)
    try:
        return int(results.db.query(f"SELECT COUNT(*) FROM {table}")[0][0])
    finally:
        results.close()


def test_a_run_imports_whole_and_a_second_import_or_a_copy_adds_nothing(store_url, tmp_path):
    run = write_run(tmp_path / "night-1", DAY, {"a100/torch/32": FAST, "v100/torch/32": [500.0]})
    results = open_store(store_url)
    try:
        first = results.import_run(run)
        assert (first.attempts, first.new_attempts, first.new_measurements) == (4, 4, 8)
        again = results.import_run(run)
        assert (again.attempts, again.new_attempts, again.new_measurements) == (4, 0, 0)
        copy = shutil.copytree(run.root, tmp_path / "downloaded" / "night-1")
        from orchestrator.results.run_directory import RunDirectory

        assert results.import_run(RunDirectory(copy)).new_attempts == 0
        samples = repeats(results.db, Filters())
    finally:
        results.close()
    assert (count(store_url, "runs"), count(store_url, "cells"),
            count(store_url, "measurements")) == (1, 4, 8)
    # every repeat once, by the median of its epochs: what the journal says
    a100 = samples[samples["hardware"] == "a100"].sort_values("started_at")
    assert a100["items_per_s"].round(-1).tolist() == [1000.0, 1010.0, 990.0]
    # a copy changes nothing: the run stays where it was written
    assert set(samples["location"]) == {str(tmp_path / "night-1")}


def test_a_rerun_s_later_attempt_replaces_the_earlier_one_in_queries(store_url, tmp_path):
    """A run directory is one run: as in its report, a cell's final attempt is what counts,
    and the store keeps every attempt."""
    run = write_run(tmp_path / "r", DAY, {"a100/torch/32": [1000.0]})
    results = open_store(store_url)
    try:
        results.import_run(run)
        write_run(tmp_path / "r", DAY + timedelta(hours=1), {"a100/torch/32": [2000.0]}, seed=1)
        assert results.import_run(run).new_attempts == 1
        samples = repeats(results.db, Filters())
    finally:
        results.close()
    assert count(store_url, "cells") == 2
    assert samples["items_per_s"].round(-2).tolist() == [2000.0]


WRITER = """
import sys
from pathlib import Path
from orchestrator.database.live import SweepIndex
from orchestrator.results.run_directory import RunDirectory
index = SweepIndex.open(sys.argv[1], warn=lambda line: sys.exit(line))
store = RunDirectory(Path(sys.argv[2]))
attempts = store.attempts()
index.store = RunDirectory(Path(sys.argv[3]))  # where the sweep journals
for attempt in attempts:  # one transaction per attempt, as a sweep writes
    index.add([*( [attempt.provenance] if attempt.provenance else []),
               *attempt.measurements, attempt.cell])
index.close()
"""


def test_two_writers_at_once_lose_nothing(store_url, tmp_path):
    speeds = {f"node{n}/torch/{b}": [100.0 + n] * 3 for n in range(10) for b in (8, 16, 32)}
    runs = [write_run(tmp_path / f"run{i}", DAY + timedelta(days=i), speeds, run=f"m{i}",
                      seed=i) for i in range(2)]
    open_store(store_url).close()  # both writers find the schema made
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, store_url, str(run.root),
                                 str(run.root)], cwd=PROJECT, stderr=subprocess.PIPE, text=True)
               for run in runs]
    for writer in writers:
        assert writer.wait(timeout=300) == 0, writer.stderr.read() if writer.stderr else ""
    assert count(store_url, "runs") == 2
    assert count(store_url, "cells") == 2 * 90
    assert count(store_url, "measurements") == 2 * 90 * 2


# the cell columns each schema version added (schema.py's history)
ADDED = {2: ["price_per_hour_usd"], 3: ["items_per_s", "item_unit", "mem_peak_bytes"],
         4: ["hw_settings"], 5: ["stack_settings"]}


@pytest.mark.parametrize("version", [SCHEMA_VERSION - 1, 1])
def test_a_store_of_an_older_schema_is_migrated_and_keeps_its_rows(store_url, tmp_path,
                                                                    version):
    run = write_run(tmp_path / "old", DAY, {"a100/torch/32": FAST}, price=3.0)
    newer = [c for v, columns in ADDED.items() if v > version for c in columns]
    db = connect(parse_url(store_url))
    try:
        assert ensure_schema(db, upto=version) == 0
        key = run_key(run.attempts()[0].cell)
        kept = [i for i, c in enumerate(CELL_COLUMNS) if c not in newer]
        with db.transaction():
            db.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?)",
                       (key, "nightly", str(run.root), "box", "2026-11-01T00:00:00"))
            db.insert_many(f"INSERT INTO cells ({', '.join(CELL_COLUMNS[i] for i in kept)}) "
                           f"VALUES ({', '.join('?' for _ in kept)})",
                           [[cell_row(key, a)[i] for i in kept] for a in run.attempts()])
            db.insert_many(INSERT_MEASUREMENT,
                           [row for a in run.attempts() for row in measurement_rows(a)])
    finally:
        db.close()
    results = open_store(store_url)  # migrates
    try:
        assert ensure_schema(results.db) == SCHEMA_VERSION
        figures = results.db.query("SELECT price_per_hour_usd, items_per_s, item_unit, "
                                   "mem_peak_bytes, hw_settings, stack_settings FROM cells "
                                   "ORDER BY started_at")
        # the journals an older store could import recorded no settings of their own: {}
        journal = [(*cell_row(key, a)[-6:-2], "{}", "{}") for a in run.attempts()]
        assert [tuple(f) for f in figures] == [tuple(j) for j in journal]
        assert [round(f[1], -1) for f in figures] == FAST and figures[0][0] == 3.0
        assert results.import_run(run).new_attempts == 0  # the same rows, by identity
    finally:
        results.close()


def test_best_names_the_fastest_and_the_cheapest_and_never_an_implausible_row(store_url,
                                                                                tmp_path):
    results = open_store(store_url)
    try:
        results.import_run(write_run(tmp_path / "r1", DAY, {
            "a100/torch/32": FAST, "v100/torch/32": [600.0] * 3}, price=4.0))
        results.import_run(write_run(tmp_path / "r2", DAY + timedelta(days=1), {
            "t4/torch/32": [400.0] * 3, "h100/torch/32": [9e9] * 3},
            price=0.5, flags={"h100/torch/32": "implausible"}, seed=2))
        found = best(store_rows(results.db, Filters()), repeats(results.db, Filters()))
    finally:
        results.close()
    found = found.set_index("best")
    assert found.loc["fastest", "hardware"] == "a100"
    assert found.loc["fastest", "location"] == str(tmp_path / "r1")
    assert found.loc["cheapest", "hardware"] == "t4"  # $0.35/M tokens against $1.1/M
    assert found.loc["cheapest", "usd_per_million_items"] == pytest.approx(
        0.5 / 3600 / 400 * 1e6, rel=0.01)
    assert found.loc["left out", "label"] == "h100"  # said, never a pick


def test_trend_is_each_run_of_a_configuration_oldest_first_and_filters_select(store_url,
                                                                              tmp_path):
    results = open_store(store_url)
    try:
        for day in (2, 0, 1):  # imported out of order
            results.import_run(write_run(tmp_path / f"d{day}", DAY + timedelta(days=day), {
                "a100/torch/32": [1000.0 + day * 100] * 3, "v100/fresh/32": [10.0] * 3},
                seed=day))
        trend = per_run(repeats(results.db, Filters(hardware=("a100",))))
        since = per_run(repeats(results.db, Filters(stacks=("fresh",), since="2026-11-02")))
    finally:
        results.close()
    assert trend["items_per_s"].round(-2).tolist() == [1000.0, 1100.0, 1200.0]
    assert [Path(p).name for p in trend["location"]] == ["d0", "d1", "d2"]
    assert since["location"].map(lambda p: Path(p).name).tolist() == ["d1", "d2"]


def test_a_regression_of_the_latest_run_is_found_and_exits_1(store_url, tmp_path):
    for day in range(3):
        write_run(tmp_path / f"n{day}", DAY + timedelta(days=day),
                  {"a100/torch/32": FAST, "v100/torch/32": FAST}, seed=day)
    write_run(tmp_path / "n3", DAY + timedelta(days=3),
              {"a100/torch/32": [800.0, 805.0, 795.0], "v100/torch/32": FAST}, seed=3)
    runs = [str(tmp_path / f"n{day}") for day in range(4)]
    imported = run_cli("db", "import", *runs, "--db", store_url, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    done = run_cli("history", "regressions", "--db", store_url, "--format", "json",
                   cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    verdicts = {r["label"].split("/")[0]: r for r in json.loads(done.stdout)}
    assert verdicts["a100"]["verdict"] == Verdict.REGRESSION
    assert verdicts["a100"]["ratio"] == pytest.approx(0.8, abs=0.01)
    assert (verdicts["a100"]["base_repeats"], verdicts["a100"]["new_repeats"]) == (9, 3)
    assert verdicts["v100"]["verdict"] == Verdict.EQUIVALENT
    assert Path(verdicts["a100"]["latest_run"]).name == "n3"
    fine = run_cli("history", "regressions", "--db", store_url, "--hardware", "v100",
                   cwd=tmp_path, env={"COLUMNS": "80"})
    assert fine.returncode == 0, fine.stdout + fine.stderr
    assert "0 regression, 0 improvement, 1 equivalent" in fine.stdout
    assert max(len(line) for line in fine.stdout.splitlines()) <= 80


def test_regressions_compare_with_the_last_baseline_runs_only(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    results = open_store(url)
    try:
        for day, speed in enumerate([500.0, 500.0, 1000.0, 1000.0, 1000.0]):
            results.import_run(write_run(tmp_path / f"n{day}", DAY + timedelta(days=day),
                                         {"a100/torch/32": [speed] * 3}, seed=day))
        samples = repeats(results.db, Filters())
        runs = judged_runs(results.db, per_run(samples))
    finally:
        results.close()
    (judged,), _ = regressions(samples, runs, 0.05, baseline_runs=2)
    assert judged.verdict is Verdict.EQUIVALENT and judged.baseline_runs == 2
    (judged,), _ = regressions(samples, runs, 0.05, baseline_runs=4)
    assert judged.base_repeats == 12


def test_regressions_leave_a_run_judged_implausible_out(tmp_path):
    # the latest run's figure cannot be checked against a peak and was stored implausible:
    # it is no "improvement"; the run before it is the latest that counts
    url = f"sqlite:///{tmp_path / 's.db'}"
    results = open_store(url)
    try:
        for day, speed in enumerate([1000.0, 1000.0, 9e9]):
            results.import_run(write_run(
                tmp_path / f"n{day}", DAY + timedelta(days=day), {"a100/torch/32": [speed] * 3},
                seed=day, flags={"a100/torch/32": "implausible"} if speed > 1e6 else None))
        samples = repeats(results.db, Filters())
        runs = judged_runs(results.db, per_run(samples))
    finally:
        results.close()
    assert runs["implausible"].tolist() == [False, False, True]
    (judged,), _ = regressions(samples, runs, 0.05)
    assert judged.verdict is Verdict.EQUIVALENT and judged.ratio == pytest.approx(1.0, abs=0.01)
    assert Path(judged.latest_run).name == "n1"


def test_history_tables_fit_80_columns_and_csv_carries_every_run(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    for day in range(2):
        write_run(tmp_path / f"a-long-run-directory-name-{day}", DAY + timedelta(days=day),
                  {"p3.8xlarge-1gpu/torch-2.6-cuda12.4/256": FAST}, price=12.24, seed=day)
    assert run_cli("db", "import", *map(str, sorted(tmp_path.glob("a-long*"))), "--db", url,
                   cwd=tmp_path).returncode == 0
    for query in ("best", "trend"):
        done = run_cli("history", query, "--db", url, cwd=tmp_path, env={"COLUMNS": "80"})
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert max(len(line) for line in lines) <= 80, done.stdout
        assert "…" not in done.stdout, done.stdout
    csv = run_cli("history", "trend", "--db", url, "--format", "csv", cwd=tmp_path)
    rows = csv.stdout.strip().splitlines()
    assert len(rows) == 3 and rows[0].startswith("workload,configuration,config_id,date")


@pytest.mark.parametrize("bad", [
    "postgresql://bench:s3cret-pw@127.0.0.1:1/nowhere",
    # malformed: the driver's message once quoted the password, or the part after its '@'
    "postgresql://bench:s3cret-pw%ZZ@127.0.0.1:1/nowhere",
    "postgresql://bench@127.0.0.1:1/nowhere?password=s3cret%ZZ",
    "postgresql://bench:pw@s3cret@127.0.0.1:1/nowhere",
    "postgresql://bench:s3cret@[::1/nowhere",
    "mysql://bench:s3cret-pw@db.example/bench",
    "sqlite:///",
])
def test_a_bad_store_url_is_one_line_exit_2_without_its_password(bad, tmp_path, matrix_file):
    for args in (["history", "best", "--db", bad], ["db", "import", "run", "--db", bad]):
        done = run_cli(*args, cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert "s3cret" not in done.stdout + done.stderr
        assert line.startswith("error: "), line
    matrix = matrix_file("""
        name: refused
        hardware: [{name: box, kind: local}]
        stacks: [{name: here, executor: process}]
        workloads: [{name: sleep, params: {seconds: 0.01}}]
        """)
    done = run_cli("run", str(matrix), "--no-ray", "-o", "run", cwd=tmp_path,
                   env={"MATRIX_BENCH_DB": bad})
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "s3cret" not in done.stdout + done.stderr
    assert not (tmp_path / "run").exists()  # refused before anything ran


def test_a_store_of_a_newer_schema_is_refused_in_one_line(store_url, tmp_path):
    open_store(store_url).close()
    db = connect(parse_url(store_url))
    with db.transaction():
        db.execute("UPDATE store_schema SET version = ?", (SCHEMA_VERSION + 1,))
    db.close()
    with pytest.raises(StoreSchemaError, match=f"schema version {SCHEMA_VERSION + 1}, newer"):
        open_store(store_url)
    done = run_cli("history", "trend", "--db", store_url, cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "upgrade matrix-bench" in line, line
    if store_url.startswith("postgresql"):
        assert "bench:***@" in line, line
    password = parse_url(store_url).password
    assert password is None or password not in done.stdout + done.stderr


def test_urls_are_shown_without_their_password():
    url = parse_url("postgresql://bench:pa55word@db.example:5432/bench?password=pa55word")
    assert "pa55word" not in url.shown and url.shown.startswith("postgresql://bench:***@")
    assert url.mask(f"failed for {url.secret}: pa55word") == f"failed for {url.shown}: ***"
    with pytest.raises(StoreURLError, match="unsupported scheme mysql:"):
        parse_url("mysql://u:pa55word@h/db")
    assert parse_url("sqlite:////srv/r.db").path == Path("/srv/r.db")
    assert parse_url("sqlite:///reports/results.db").path == Path("reports/results.db")


def test_a_date_that_is_not_one_is_one_line(tmp_path):
    done = run_cli("history", "trend", "--since", "last tuesday", "--db",
                   f"sqlite:///{tmp_path / 'none.db'}", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == ("error: --since 'last tuesday' is not a date (YYYY-MM-DD) "
                                   "or an ISO time (YYYY-MM-DDTHH:MM)")


def test_a_missing_sqlite_store_is_not_created_by_a_query(tmp_path):
    with pytest.raises(StoreUnreachableError, match="no results store at"):
        ResultsDB.open(parse_url(f"sqlite:///{tmp_path / 'none.db'}"), create=False)
    assert not (tmp_path / "none.db").exists()


def test_a_file_that_is_not_a_store_is_one_line(tmp_path):
    (tmp_path / "x.db").write_text("not a database at all" * 100)
    done = run_cli("history", "best", "--db", f"sqlite:///{tmp_path / 'x.db'}", cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "file is not a database" in line


def test_sqlite_rows_carry_the_records_whole(tmp_path):
    """The store can give a run's records back: each row holds its record as JSON."""
    run = write_run(tmp_path / "r", DAY, {"a100/torch/32": [1000.0]}, price=2.0)
    url = f"sqlite:///{tmp_path / 's.db'}"
    results = open_store(url)
    results.import_run(run)
    results.close()
    with sqlite3.connect(tmp_path / "s.db") as raw:
        record, = raw.execute("SELECT record FROM cells").fetchone()
    assert json.loads(record) == json.loads(run.attempts()[0].cell.model_dump_json(
        exclude_none=True))


def test_history_judges_scaling_within_a_run_as_the_report_does(tmp_path):
    # 2 GPUs at 3.0x one GPU's speed: 150% efficiency cannot come from adding a device
    url = f"sqlite:///{tmp_path / 's.db'}"
    results = open_store(url)
    try:
        results.import_run(write_run(tmp_path / "n0", DAY, {
            "a100-x1/torch/32": [1000.0] * 3, "a100-x2/torch/32": [3000.0] * 3,
            "a100-x4/torch/32": [3600.0] * 3},
            gpus={"a100-x1/torch/32": 1, "a100-x2/torch/32": 2, "a100-x4/torch/32": 4}))
        runs = judged_runs(results.db, per_run(repeats(results.db, Filters())))
        # history best leaves it out, as advise does
        found = best(store_rows(results.db, Filters()), repeats(results.db, Filters()))
    finally:
        results.close()
    by_hardware = runs.set_index("hardware")
    assert by_hardware.loc["a100-x2", "implausible"]
    assert "speedup 3.00x on 2 devices" in by_hardware.loc["a100-x2", "judgement"]
    assert not by_hardware.loc["a100-x4", "implausible"]  # 3.6x on 4: 90%
    assert found.set_index("best").loc["fastest", "hardware"] == "a100-x4"
    assert found.set_index("best").loc["left out", "label"] == "a100-x2"
