"""The typed worker boundary, the other way: what the worker appends to OUT_FILE is what
the driver reads, field for field (worker/records.py); a field a newer worker adds is
ignored, and a field of the wrong type is a located warning with the rest of its record
kept, where a provenance record with one odd field used to be dropped whole."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from orchestrator.executors import CellRun, launch_worker
from orchestrator.executors.outcome import CellFiles, WorkerExit, records_for
from orchestrator.registry.cell_run import ToolInfo
from orchestrator.results.records import (
    CellRecord,
    MeasurementRecord,
    ProvenanceRecord,
    Record,
    Status,
)
from orchestrator.worker.cell_file import FailureKind
from orchestrator.worker.records import (
    LINE_TYPES,
    RECORDS_VERSION,
    ClientLine,
    ErrorLine,
    MeasurementLine,
    ProvenanceLine,
    TimingLine,
    read_out,
    read_out_file,
)
from tests.cells import make_cell, make_cell_model, run_worker
from tests.conftest import own_reasons

MEASUREMENT = MeasurementLine(
    epoch=2, item_unit="sample", timing="steps", train_s=1.5, items=96, items_per_s=64.0,
    steps=6, warmup_steps=2, warmup_s=0.5, epoch_s=2.25, step_s_median=0.25,
    step_s_p90=0.3, timing_block_steps=3, eval_s=0.4, eval_items_per_s=80.0,
    mem_alloc_peak_bytes=1 << 20, mem_reserved_peak_bytes=2 << 20,
    nvml_used_peak_bytes=3 << 20, host_rss_peak_bytes=4 << 20, cell_cpu_cores=1.9,
    cpu_wait_cores=0.05, other_cpu_cores=0.1, gpu_util_mean_pct=97.5,
    gpu_power_mean_w=300.0, gpu_sm_clock_mean_mhz=1410.0, gpu_temp_max_c=71.0,
    gpu_energy_j=450.0, throttle_reasons="sw_power_cap", flops_per_item=1e9,
    metrics={"ms_per_step": 250.0})
PROVENANCE = ProvenanceLine(
    python="3.11.9", hostname="node-a", cpu_model="Xeon", cpu_count=16, cpus_usable=8,
    cpu_threads=8,
    thread_settings={"OMP_NUM_THREADS": "8"}, framework="torch",
    framework_version="2.5.1", data_sha256={"train.txt": "ab" * 32},
    precision_switches={"torch.backends.cudnn.allow_tf32": "False"}, compute_device="cuda:0",
    devices_used=1, cuda="12.4", cudnn="9.1.0", driver="550.54", gpu_model="NVIDIA H100",
    gpu_count=8, gpu_memory_bytes=80 << 30, gpu_power_limit_w=700.0, ceiling_flops=4e14,
    ceiling_precision="bf16", ceiling_probe="torch bf16 linear", ceiling_cost_s=3.5,
    ceiling_gap="none needed", nodes=2, world_size=16, rank_hosts=["node-a"] * 8 + ["node-b"] * 8,
    net_busbw_gbs=41.5, net_probe_bytes=32 << 20, net_link_gbps=400.0, rendezvous_s=2.5)
EVERY_KIND = [MEASUREMENT, PROVENANCE, TimingLine(workload_s=2.5),
              ErrorLine(kind=FailureKind.OOM, type="MemoryError", message="out of memory"),
              ClientLine(framework="torch", framework_version="2.5.1", cuda="12.4",
                         cudnn="90100", gpu_model="NVIDIA H100", gpu_count=1)]


def test_every_record_the_worker_writes_is_read_back_field_for_field():
    assert {type(line) for line in EVERY_KIND} == set(LINE_TYPES.values())
    for line in EVERY_KIND:  # every field set: a field that does not survive shows here
        assert all(getattr(line, f.name) is not None for f in dataclasses.fields(line))
    output = read_out([line.to_json() for line in EVERY_KIND])
    assert [read.record for read in output.reads] == EVERY_KIND
    assert output.unreadable == output.notes == ()
    assert all(read.problems == () for read in output.reads)
    assert [read.number for read in output.reads] == [1, 2, 3, 4, 5]
    assert isinstance(output.reads[3].record.kind, FailureKind)  # back as its member


def test_the_lines_keep_the_format_the_records_had_before_they_were_typed():
    """Flat JSON objects, `record` first: the journal, the tests and anyone reading
    cells/<id>.out.jsonl by hand see the same keys, metrics beside the figures."""
    line = json.loads(MEASUREMENT.to_json())
    assert list(line)[:3] == ["record", "version", "epoch"]
    assert (line["record"], line["version"]) == ("measurement", RECORDS_VERSION)
    assert line["ms_per_step"] == 250.0 and "metrics" not in line
    assert json.loads(TimingLine(workload_s=1.0).to_json()) == {
        "record": "timing", "version": 1, "workload_s": 1.0}
    assert json.loads(ErrorLine(kind=FailureKind.UNSUPPORTED, type="Unsupported",
                                message="no").to_json()) == {
        "record": "error", "version": 1, "kind": "unsupported", "type": "Unsupported",
        "message": "no"}
    # an unset field is left off the line, not written as null
    assert json.loads(ProvenanceLine(python="3.11").to_json()) == {
        "record": "provenance", "version": 1, "python": "3.11"}


def test_the_records_fields_are_fields_of_what_the_driver_stores():
    measured = {f.name for f in dataclasses.fields(MeasurementLine)} - {"metrics"}
    assert measured <= set(MeasurementRecord.model_fields)
    provenance = {f.name for f in dataclasses.fields(ProvenanceLine)}
    assert provenance <= set(ProvenanceRecord.model_fields)
    assert {f.name for f in dataclasses.fields(ClientLine)} <= provenance  # command.py


def test_a_metric_named_as_a_field_is_refused_where_the_workload_writes_it():
    with pytest.raises(ValueError, match=r"metric names \['items'\] are measurement fields"):
        MeasurementLine(epoch=1, item_unit="sample", metrics={"items": 3.0})


def test_a_field_a_newer_worker_adds_is_ignored_and_its_version_noted():
    provenance = {**PROVENANCE.to_dict(), "version": RECORDS_VERSION + 1, "rack": "r7"}
    output = read_out([json.dumps(provenance), json.dumps({"record": "heartbeat"})])
    (read,) = output.reads
    assert read.record == PROVENANCE and read.problems == ()
    assert output.notes == (
        "output line 1: record version 2, newer than this reader's 1: fields it added are "
        "not read",
        "output line 2: a 'heartbeat' record, a kind this reader does not know (skipped)")
    # on a measurement an unknown number is a workload metric, for the driver to check
    (measured,) = read_out([json.dumps({**MEASUREMENT.to_dict(), "loss": 0.5})]).reads
    assert isinstance(measured.record, MeasurementLine)
    assert measured.record.metrics == {"ms_per_step": 250.0, "loss": 0.5}


def test_a_field_of_the_wrong_type_is_left_out_by_name_and_the_rest_kept():
    bad = {**PROVENANCE.to_dict(), "cpu_count": "many", "data_sha256": {"a": 1},
           "rank_hosts": ["node-a", 7]}
    (read,) = read_out([json.dumps(bad)]).reads
    assert read.record == dataclasses.replace(PROVENANCE, cpu_count=None, data_sha256=None,
                                              rank_hosts=None)
    assert read.located() == [
        "output line 1: provenance field 'cpu_count' is 'many', not an integer (left out)",
        "output line 1: provenance field 'data_sha256' has 'a' that is 1, not text "
        "(left out)",
        "output line 1: provenance field 'rank_hosts' has item 1 that is 7, not text "
        "(left out)"]
    error = read_out([json.dumps({"record": "error", "kind": "melted", "message": "x"})])
    assert error.reads[0].record == ErrorLine(kind=FailureKind.FAILED, message="x")


def test_a_line_that_is_no_record_is_unreadable_with_its_number():
    output = read_out(['{"record": "timing"}', "not json", "[1]",
                       '{"record": "measurement", "item_unit": "sample"}'])
    assert [read.record for read in output.reads] == [TimingLine()]
    assert [text.split(" (")[0] for text in output.unreadable] == [
        "output line 2 is not a record", "output line 3 is not a record",
        "output line 4 is not a record"]
    assert "a measurement record without 'epoch'" in output.unreadable[2]


def driver_reads(tmp_path: Path, lines: list[str],
                 extra_provenance: dict | None = None) -> list[Record]:
    """The driver's batch for a `sleep` cell whose worker wrote `lines` and exited 0."""
    cell = make_cell_model("sleep", {}, epochs=1)
    files = CellFiles.prepare(cell, tmp_path)
    files.out.write_text("".join(line + "\n" for line in lines))
    exit = WorkerExit(returncode=0, timed_out=False, started_at="2026-11-27T00:00:00+00:00",
                      wall_s=2.0)
    return records_for(cell, exit, files, ToolInfo("t", None), extra_provenance)


def sleep_epoch(**fields: object) -> str:
    return json.dumps({**MeasurementLine(epoch=1, item_unit="sample", train_s=1.0, items=4,
                                         items_per_s=4.0).to_dict(), **fields})


def test_a_bad_provenance_field_is_a_located_warning_on_the_cell_and_the_record_kept(
        tmp_path):
    bad = json.dumps({**PROVENANCE.to_dict(), "cpu_count": "many"})
    provenance, measurement, cell = driver_reads(tmp_path, [sleep_epoch(), bad])
    assert isinstance(provenance, ProvenanceRecord) and isinstance(cell, CellRecord)
    assert (provenance.hostname, provenance.gpu_model, provenance.cpu_count) == (
        "node-a", "NVIDIA H100", None)
    assert provenance.data_sha256 == PROVENANCE.data_sha256
    assert isinstance(measurement, MeasurementRecord) and measurement.items_per_s == 4.0
    assert cell.status is Status.OK
    assert cell.error == ("output line 2: provenance field 'cpu_count' is 'many', not an "
                          "integer (left out)")


def test_a_field_the_stored_record_refuses_is_left_out_by_name(tmp_path):
    # the worker's types pass; the driver's own field does not: only it is left out
    provenance, _, cell = driver_reads(tmp_path, [sleep_epoch(), PROVENANCE.to_json()],
                                       extra_provenance={"price_per_hour_usd": "cheap"})
    assert isinstance(provenance, ProvenanceRecord) and isinstance(cell, CellRecord)
    assert provenance.hostname == "node-a" and provenance.price_per_hour_usd is None
    assert cell.status is Status.OK and cell.error is not None
    assert cell.error.startswith("output line 2: provenance field 'price_per_hour_usd': ")


def test_a_bad_measurement_field_is_invalid_output_located(tmp_path):
    *_, cell = driver_reads(tmp_path, [sleep_epoch(), sleep_epoch(epoch=2, train_s="fast")])
    assert isinstance(cell, CellRecord) and cell.status is Status.INVALID_OUTPUT
    assert cell.error == ("output line 2: invalid measurement record: measurement field "
                          "'train_s' is 'fast', not a number")
    *_, cell = driver_reads(tmp_path, [sleep_epoch(loss=0.5)])
    assert isinstance(cell, CellRecord) and cell.status is Status.INVALID_OUTPUT
    assert cell.error is not None and cell.error.startswith(
        "output line 1: undeclared metrics ['loss']")


def test_an_error_of_a_kind_unknown_fails_the_cell_and_says_so(tmp_path):
    error = json.dumps({"record": "error", "kind": "melted", "type": "X", "message": "hot"})
    *_, cell = driver_reads(tmp_path, [error])
    assert isinstance(cell, CellRecord) and cell.status is Status.FAILED
    assert cell.error == ("X: hot; output line 1: error field 'kind' is 'melted', not one "
                          "of 'failed', 'oom', 'unsupported', 'stack_mismatch', "
                          "'data_unavailable' (left out)")


def test_what_a_real_worker_writes_the_driver_reads_without_a_warning(tmp_path):
    cell = make_cell_model("sleep", {"seconds": 0.02, "steps": 2}, epochs=2)
    provenance, *measurements, end = launch_worker(CellRun(cell, tmp_path, ToolInfo("t", None)))
    assert isinstance(end, CellRecord) and end.status is Status.OK
    # no warning; the machine's own reasons (another test worker on the CPUs) may stand
    assert own_reasons(end.model_dump()) == []
    assert [m.epoch for m in measurements if isinstance(m, MeasurementRecord)] == [1, 2]
    assert isinstance(provenance, ProvenanceRecord) and provenance.python
    output = read_out_file(str(tmp_path / "cells" / f"{cell.cell_id}.out.jsonl"))
    assert [type(read.record) for read in output.reads] == [
        MeasurementLine, MeasurementLine, TimingLine, ProvenanceLine]
    assert output.unreadable == output.notes == () and not any(
        read.problems for read in output.reads)
    found = output.first(ProvenanceLine)
    assert found is not None and found[1].cpu_count == provenance.cpu_count


def test_a_real_workers_failure_is_a_typed_error(tmp_path):
    done, _ = run_worker(tmp_path, make_cell("sleep", {"fault": "raise"}, 1))
    assert done.returncode == 1
    output = read_out_file(str(tmp_path / "out.jsonl"))
    error = output.last(ErrorLine)
    assert error == ErrorLine(kind=FailureKind.FAILED, type="RuntimeError",
                              message="injected failure (fault: raise)")
