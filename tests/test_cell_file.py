"""The typed worker boundary: the cell file the driver writes is what the worker reads, with
its parameters of their declared types, a version it checks, and failure kinds that the
executor maps to statuses without strings kept in step by hand."""

from __future__ import annotations

import dataclasses
import json

import pytest

from orchestrator.executors.outcome import FAILURE_STATUS, cell_file_content
from orchestrator.providers.slurm.settings import SlurmSettings
from orchestrator.registry.cell_run import Cell
from orchestrator.registry.providers import validation_context
from orchestrator.spec.model import Hardware
from orchestrator.worker.cell_file import (
    CELL_FILE_VERSION,
    CellFile,
    CellFileError,
    CellHardware,
    CellStack,
    FailureKind,
)
from tests.cells import make_cell, make_cell_model, run_worker


def test_every_field_of_the_drivers_cell_reaches_the_worker_typed():
    cell = make_cell_model("sleep", {"seconds": 2, "steps": 3}, epochs=2, gpus=1)
    read = CellFile.from_dict(json.loads(json.dumps(make_cell("sleep", {"seconds": 2,
                                                                        "steps": 3}, 2, 1))))
    # all but the declaration the driver's side keeps for the node (executors/outcome.py)
    # and the inputs it records with the cell's end (plan/retry.py)
    assert {f.name for f in dataclasses.fields(CellFile)} >= set(Cell.model_fields) - {
        "workload_info", "inputs"}
    # all but the axis of node counts, which the plan expands: each cell's hardware holds
    # its own count in `nodes` (the axis is never dumped)
    assert {f.name for f in dataclasses.fields(CellHardware)} == set(
        type(cell.hardware).model_fields) - {"node_counts"}
    assert "node_counts" not in make_cell("sleep", {}, 1)["hardware"]
    # all but the executor's settings: how the executor starts the worker, not the worker's
    assert {f.name for f in dataclasses.fields(CellStack)} == set(
        type(cell.stack).model_fields) - {"settings"}
    assert "settings" not in make_cell("sleep", {}, 1)["stack"]
    assert (read.cell_id, read.repeat, read.epochs, read.hardware.gpus) == (
        cell.cell_id, 1, 2, 1)
    # declared float, written as the integer 2: the workload gets 2.0, never casts
    assert read.params["seconds"] == 2.0 and isinstance(read.params["seconds"], float)
    assert isinstance(read.params["steps"], int) and read.params["fault"] == "none"


def test_a_kinds_own_settings_reach_the_worker_as_their_block():
    """A Slurm entry's keys, written flat in the matrix, travel as its kind's block: the
    fields its provider's model declares, every one, and nothing of another kind's."""
    hardware = Hardware.model_validate({"name": "big", "kind": "slurm", "partition": "debug",
                                        "mem_gb": 16.5, "qos": "high", "gpus": 1},
                                       context=validation_context())
    cell = make_cell_model("sleep", {}, epochs=1).model_copy(update={"hardware": hardware})
    read = CellFile.from_dict(json.loads(json.dumps(cell_file_content(cell))))
    assert isinstance(hardware.settings, SlurmSettings)
    assert read.hardware.settings == hardware.settings.model_dump()
    assert set(read.hardware.settings) == set(SlurmSettings.model_fields)
    assert (read.hardware.settings["partition"], read.hardware.settings["mem_gb"],
            read.hardware.gpus) == ("debug", 16.5, 1)


def test_a_cell_file_of_another_version_is_refused_in_one_line():
    raw = {**make_cell("sleep", {}, 1), "version": CELL_FILE_VERSION + 1}
    with pytest.raises(CellFileError, match=f"cell file version {CELL_FILE_VERSION + 1}: this "
                                            f"worker reads version {CELL_FILE_VERSION}"):
        CellFile.from_dict(raw)
    missing = make_cell("sleep", {}, 1)
    del missing["params"]
    with pytest.raises(CellFileError, match="without 'params'"):
        CellFile.from_dict(missing)


def test_fields_a_newer_driver_adds_to_hardware_are_ignored():
    raw = make_cell("sleep", {}, 1)
    raw["hardware"]["rack"] = "r7"
    assert CellFile.from_dict(raw).hardware.name == "laptop"


def test_the_worker_reports_a_cell_file_it_cannot_read_as_a_failure(tmp_path):
    done, records = run_worker(tmp_path, {**make_cell("sleep", {}, 1), "version": 99})
    assert done.returncode == 1
    (error,) = [r for r in records if r["record"] == "error"]
    assert error["kind"] == FailureKind.FAILED and error["type"] == "CellFileError"
    assert any(r["record"] == "provenance" for r in records)  # where it ran, still


def test_every_failure_kind_maps_to_a_status_of_the_same_name():
    assert set(FAILURE_STATUS) == set(FailureKind)
    assert all(status.value == kind.value for kind, status in FAILURE_STATUS.items())
