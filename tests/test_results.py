"""The result store: journal batches, torn lines, lock, parquet, and the schema document."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pandas as pd
import pytest

from orchestrator.errors import RunLockedError
from orchestrator.report.analysis import COST_COLUMNS, SCALING_COLUMNS
from orchestrator.report.ceilings import CEILING_COLUMNS
from orchestrator.report.frame import run_frame, write_results
from orchestrator.results.journal import JournalLineError, parse_line
from orchestrator.results.records import (
    SCHEMA_VERSION,
    CellRecord,
    MeasurementRecord,
    ProvenanceRecord,
)
from orchestrator.results.run_directory import JournalWarning, RunDirectory
from orchestrator.workload_registry import available_workloads, load_workload
from tests.conftest import PROJECT

IDENTITY = {"run": "r", "config_id": "c1", "repeat": 1}


def batch(cell_id: str, status: str = "ok", epochs: int = 2, rate: float = 100.0):
    ident = {**IDENTITY, "cell_id": cell_id}
    measurements = [MeasurementRecord(**ident, epoch=e, train_s=1.0, items=rate,
                                      item_unit="word", items_per_s=rate)
                    for e in range(1, epochs + 1)]
    cell = CellRecord(**ident, status=status, started_at="2026-01-01T00:00:00+00:00",
                      wall_s=2.0, hardware="h", stack="s", workload="sleep",
                      **{"param.seconds": 1.0})
    return [ProvenanceRecord(**ident, hostname="x"), *measurements, cell]


def test_batches_round_trip(tmp_path):
    store = RunDirectory(tmp_path)
    store.append(batch("a"))
    store.append(batch("b", status="failed", epochs=0))
    results = {r.cell.cell_id: r for r in store.results()}
    assert len(results["a"].measurements) == 2 and results["a"].provenance.hostname == "x"
    assert results["b"].cell.status == "failed"
    assert {r.cell.cell_id for r in store.results() if r.cell.status.is_done()} == {"a"}
    assert results["a"].cell.params() == {"seconds": 1.0}


def test_a_torn_last_line_is_dropped_with_a_warning(tmp_path):
    store = RunDirectory(tmp_path)
    store.append(batch("a"))
    with open(store.journal, "a") as handle:
        handle.write('{"schema_version": 1, "run": "r", "cell_id": "b", "rec')
    with pytest.warns(JournalWarning, match="torn last line"):
        results = store.results()
    assert [r.cell.cell_id for r in results] == ["a"]


def test_a_torn_tail_is_cut_before_the_next_batch_is_appended(tmp_path):
    store = RunDirectory(tmp_path)
    store.append(batch("a"))
    good = store.journal.read_bytes()
    with open(store.journal, "ab") as handle:
        handle.write(b'{"schema_version": 2, "run": "r", "cell_id": "b", "rec')
    with pytest.warns(JournalWarning, match="torn last line"):
        store.acquire()
    assert store.journal.read_bytes() == good
    store.append(batch("b"))
    assert [r.cell.cell_id for r in store.results()] == ["a", "b"]  # no warning: no torn line


def test_a_whole_last_record_without_its_newline_is_kept(tmp_path):
    store = RunDirectory(tmp_path)
    store.append(batch("a"))
    store.journal.write_bytes(store.journal.read_bytes().rstrip(b"\n"))
    store.acquire()
    store.append(batch("b"))
    results = {r.cell.cell_id: r for r in store.results()}
    assert set(results) == {"a", "b"} and results["a"].cell.status == "ok"


def test_a_journal_of_cells_without_measurements_makes_a_frame(tmp_path):
    store = RunDirectory(tmp_path)
    store.append(batch("a", status="node_lost", epochs=0))
    df = run_frame(store)
    assert list(df["status"]) == ["node_lost"] and df["speedup_ratio"].isna().all()


def test_a_torn_batch_is_not_counted_twice(tmp_path):
    store = RunDirectory(tmp_path)
    store.append(batch("a", rate=1.0)[:-1])  # killed before the cell record
    store.append(batch("a", rate=2.0))  # the rerun
    (result,) = store.results()
    assert [m.items_per_s for m in result.measurements] == [2.0, 2.0]


def test_the_final_attempt_wins(tmp_path):
    store = RunDirectory(tmp_path)
    store.append(batch("a", status="timeout", epochs=0))
    store.append(batch("a", rate=3.0))
    (result,) = store.results()
    assert result.cell.status == "ok" and len(result.measurements) == 2


def test_newer_schema_is_refused_not_misread(tmp_path):
    store = RunDirectory(tmp_path)
    store.append(batch("a"))
    line = json.loads(store.journal.read_text().splitlines()[0])
    line["schema_version"] = SCHEMA_VERSION + 1
    with open(store.journal, "a") as handle:
        handle.write(json.dumps(line) + "\n")
    with pytest.warns(JournalWarning, match="newer than this matrix-bench"):
        store.read()


def test_a_live_owner_locks_the_run_directory(tmp_path):
    first = RunDirectory(tmp_path / "run")
    first.acquire()
    with pytest.raises(RunLockedError, match=f"pid {os.getpid()}"):
        RunDirectory(tmp_path / "run").acquire()
    first.release()
    RunDirectory(tmp_path / "run").acquire()  # free again


def test_a_dead_owners_lock_is_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / "run").mkdir()
    import socket

    (tmp_path / "run" / "run.lock").write_text(
        json.dumps({"pid": int(dead), "host": socket.gethostname()}))
    RunDirectory(tmp_path / "run").acquire()
    assert json.loads((tmp_path / "run" / "run.lock").read_text())["pid"] == os.getpid()


def test_parquet_is_the_flat_join(tmp_path):
    store = RunDirectory(tmp_path)
    store.append(batch("a", rate=10.0))
    store.append(batch("b", status="crashed", epochs=0))
    write_results(store)
    df = pd.read_parquet(store.parquet)
    assert len(df) == 3  # two measurements of a, one row for b
    assert set(df[df.cell_id == "a"].items_per_s) == {10.0}
    assert df[df.cell_id == "b"].epoch.isna().all()
    assert set(df.hostname) == {"x"} and "param.seconds" in df
    assert not list(tmp_path.glob(".*.tmp"))  # written through a rename


def documented_columns() -> set[str]:
    text = (PROJECT / "docs" / "results-schema.md").read_text()
    return set(re.findall(r"^\| `([^`]+)` \|", text, flags=re.MULTILINE))


def test_the_schema_document_agrees_with_the_code():
    fields = set()
    for model in (MeasurementRecord, CellRecord, ProvenanceRecord):
        fields |= set(model.model_fields)
    metrics = {m for w in available_workloads() for m in load_workload(w).metrics}
    derived = set(COST_COLUMNS) | set(SCALING_COLUMNS) | set(CEILING_COLUMNS) | {
        "run_dir", "judgement", "peak_note"}
    assert documented_columns() == fields | metrics | {"param.<name>", "hw.<key>",
                                                       "stack.<key>"} | derived


def test_every_workload_metric_names_its_unit():
    for workload in available_workloads():
        for metric in load_workload(workload).metrics:
            # gbs: GB/s, as the schema names a bandwidth (net_busbw_gbs)
            assert re.search(r"(^|_)(s|bytes|per_s|usd|us|ms|flops|gbs)(_|$)", metric), metric


def test_a_version_1_journal_is_migrated_on_read(tmp_path):
    v1 = {"schema_version": 1, "run": "r", "cell_id": "a", "config_id": "c", "repeat": 1}
    lines = [{**v1, "record": "provenance", "hostname": "old"},
             {**v1, "record": "measurement", "epoch": 1, "train_s": 1.0, "items": 5.0,
              "item_unit": "word", "items_per_s": 5.0, "peak_source": "datasheet"},
             {**v1, "record": "cell", "status": "ok", "started_at": "2026-01-01T00:00:00",
              "wall_s": 1.0, "hardware": "h", "stack": "s", "workload": "sleep"}]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (result,) = RunDirectory(tmp_path).results()
    assert result.cell.schema_version == SCHEMA_VERSION == 7
    assert result.measurements[0].items_per_s == 5.0
    assert result.measurements[0].timing == "steps"


def test_a_version_2_measurement_is_timed_by_steps_and_a_process_row_has_no_rate():
    v2 = {"schema_version": 2, "run": "r", "cell_id": "a", "config_id": "c", "repeat": 1,
          "record": "measurement", "epoch": 1, "item_unit": "sample", "epoch_s": 3.0}
    assert parse_line(json.dumps({**v2, "train_s": 1.0, "items": 5.0, "items_per_s": 5.0})
                      ).timing == "steps"
    with pytest.raises(JournalLineError, match="timed by steps has train_s, items"):
        parse_line(json.dumps(v2))  # a version 2 record always had its rate
    process = parse_line(json.dumps({**v2, "schema_version": 3, "timing": "whole"}))
    assert process.items_per_s is None and process.epoch_s == 3.0
    with pytest.raises(JournalLineError, match="whole process has epoch_s and no train_s"):
        parse_line(json.dumps({**v2, "schema_version": 3, "timing": "whole",
                               "items": 5.0}))


def test_a_version_3_cell_reads_as_version_7_and_later_versions_may_end_so():
    """4 added `queue_timeout`, 5 `data_unavailable`: each a failure of the run; 6 the
    hardware kind's settings (`hw.<key>`), 7 the executor's (`stack.<key>`), scalars only."""
    v3 = {"schema_version": 3, "run": "r", "cell_id": "a", "config_id": "c", "repeat": 1,
          "record": "cell", "status": "timeout", "started_at": "2026-01-01T00:00:00",
          "wall_s": 1.0, "hardware": "h", "stack": "s", "workload": "sleep"}
    assert parse_line(json.dumps(v3)).schema_version == 7
    assert parse_line(json.dumps(v3)).settings("hw") == {}
    v6 = {**v3, "schema_version": 6, "hw.partition": "debug", "hw.cpus": 2, "param.steps": 3}
    read = parse_line(json.dumps(v6))
    assert read.settings("hw") == {"partition": "debug", "cpus": 2} and read.params() == {
        "steps": 3}
    assert read.settings("stack") == {}
    v7 = parse_line(json.dumps({**v6, "schema_version": 7, "stack.niceness": 12}))
    assert v7.settings("stack") == {"niceness": 12} and v7.settings("hw")["cpus"] == 2
    with pytest.raises(JournalLineError, match=r"hw\.partition"):
        parse_line(json.dumps({**v6, "hw.partition": ["debug"]}))
    with pytest.raises(JournalLineError, match=r"stack\.niceness"):
        parse_line(json.dumps({**v6, "stack.niceness": {"n": 1}}))
    with pytest.raises(JournalLineError, match=r"unexpected field 'stacks\.x'"):
        parse_line(json.dumps({**v6, "stacks.x": 1}))
    for version, status in ((4, "queue_timeout"), (5, "data_unavailable")):
        ended = parse_line(json.dumps({**v3, "schema_version": version, "status": status}))
        assert ended.status == status and not ended.status.is_outcome()
