"""`make_plan` itself, without the CLI: which cells run, why the others do not, and how long
the plan says it takes (from the workload's declared estimate, then from the journal)."""

from __future__ import annotations

import pytest

from orchestrator.hardware.local import LocalMachine
from orchestrator.plan.planner import CELL_STARTUP_S, Selector, make_plan
from orchestrator.results.records import CellRecord, Status
from orchestrator.results.run_directory import CellResult
from orchestrator.validate import load_spec
from orchestrator.workload_registry import load_workload
from tests.test_plan import PLANNED

NO_GPU = LocalMachine(hostname="box", cpu_model=None, cpu_count=2, gpu_count=0, gpu_model=None)


@pytest.fixture
def spec(matrix_file):
    return load_spec(matrix_file(PLANNED))


def ended(cell, status: Status, wall_s: float) -> CellResult:
    record = CellRecord(run=cell.run, cell_id=cell.cell_id, config_id=cell.config_id,
                        repeat=cell.repeat, status=status, started_at="2026-11-24T00:00:00Z",
                        wall_s=wall_s, hardware=cell.hardware.name, stack=cell.stack.name,
                        workload=cell.workload)
    return CellResult(cell=record, provenance=None)


def reasons(plan) -> dict[str, int]:
    counts: dict[str, int] = {}
    for skipped in plan.skipped:
        key = skipped.reason.split(" (")[0].split(":")[0]
        counts[key] = counts.get(key, 0) + 1
    return counts


def test_a_cpu_machine_runs_the_fp32_cell_and_says_why_each_other_is_skipped(spec):
    plan = make_plan(spec, NO_GPU)
    assert [(c.hardware.name, c.params["precision"], c.params["batch_size"])
            for c in plan.to_run] == [("cpu", "fp32", 8)]
    # 2 hardware x 2 precisions x 2 batch sizes = 8 cells: 2 excluded (batch 16 in fp32),
    # the CPU entry's 2 fp16 cells need a GPU, the eight-GPU entry's 3 need 8 of them
    assert reasons(plan) == {"excluded by exclude rule": 2, "incompatible": 5}
    eight = [s.reason for s in plan.skipped if s.cell.hardware.name == "eight-gpus"
             and s.reason.startswith("incompatible")]
    assert eight == ["incompatible: needs 8 GPU(s), this machine has 0"] * 3
    fp16_on_cpu = [s.reason for s in plan.skipped
                   if s.cell.hardware.name == "cpu" and s.cell.params["precision"] == "fp16"]
    assert all("needs a GPU" in reason for reason in fp16_on_cpu)


def test_without_history_the_estimate_is_the_workloads_per_epoch_figure(spec):
    plan = make_plan(spec, NO_GPU)
    (cell,) = plan.to_run
    per_epoch = load_workload("lstm_lm").estimate_s_per_epoch["tiny"]
    expected = CELL_STARTUP_S + cell.epochs * per_epoch
    assert plan.estimate_s[cell.cell_id] == pytest.approx(expected)
    assert plan.total_estimate_s() == pytest.approx(expected)


def test_history_gives_the_median_wall_time_and_skips_what_ended_ok(spec):
    (cell,) = make_plan(spec, NO_GPU).to_run
    history = [ended(cell, Status.FAILED, 9.0), ended(cell, Status.OK, 4.0)]
    plan = make_plan(spec, NO_GPU, history)
    assert plan.to_run == []
    assert [s.reason for s in plan.skipped if s.cell == cell] == [
        "already done (ok in the journal; --rerun to redo)"]
    redo = make_plan(spec, NO_GPU, history, rerun=True)
    assert redo.to_run == [cell]
    assert redo.estimate_s[cell.cell_id] == 4.0  # only cells that ended ok count


def test_a_cluster_decides_which_hardware_exists(spec):
    plan = make_plan(spec, NO_GPU, cluster_hardware={"eight-gpus": 1})
    assert {c.hardware.name for c in plan.to_run} == {"eight-gpus"}
    assert len(plan.to_run) == 3  # this machine's lack of GPUs no longer matters
    assert [s.reason for s in plan.skipped if s.cell.hardware.name == "cpu"
            and s.reason.startswith("no node")] == ["no node of the cluster offers hw:cpu"]


def test_only_keeps_the_selected_cells_and_refuses_a_key_nothing_has(spec):
    plan = make_plan(spec, NO_GPU, only=[Selector.parse("batch_size=16")])
    assert plan.to_run == []
    assert reasons(plan)["not selected"] == 4
    with pytest.raises(Exception, match="no cell has a hardware, stack, workload or "
                                        "parameter called 'colour'"):
        make_plan(spec, NO_GPU, only=[Selector.parse("colour=red")])
