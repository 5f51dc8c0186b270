"""Statuses that say whether to retry (plan/retry.py): a resumed sweep keeps a cell whose
configuration gave its end while the inputs that shaped it are unchanged, runs a failure of
the run again, and runs any named with --retry."""

from __future__ import annotations

import pytest

from orchestrator.plan.planner import make_plan
from orchestrator.plan.retry import RetryError, outcome_inputs, parse_retry
from orchestrator.results.records import CellRecord, Status
from orchestrator.results.run_directory import CellResult
from orchestrator.spec.model import Stack
from orchestrator.validate import load_spec
from tests.conftest import cell_records, run_cli
from tests.test_planner import NO_GPU

OUTCOMES = {"ok", "unsupported", "oom", "stack_mismatch", "image_failed", "failed",
            "invalid_output"}
RUN_FAILURES = {"crashed", "timeout", "executor_unavailable", "node_lost", "budget_stopped",
                "queue_timeout", "data_unavailable"}

MATRIX = """\
name: retried
hardware: [{name: box, kind: local}]
stacks: [{name: here, executor: process}]
workloads:
  - {name: sleep, params: {seconds: 0.1, fault: [unsupported, abort, none]}, timeout_s: TIMEOUT}
"""


def test_every_status_is_an_outcome_or_a_failure_of_the_run():
    assert {s.value for s in Status if s.is_outcome()} == OUTCOMES
    assert {s.value for s in Status if not s.is_outcome()} == RUN_FAILURES


def ended(cell, status: Status, inputs: str | None) -> CellResult:
    return CellResult(provenance=None, cell=CellRecord(
        run=cell.run, cell_id=cell.cell_id, config_id=cell.config_id, repeat=cell.repeat,
        status=status, started_at="2026-11-27T00:00:00Z", wall_s=1.0,
        hardware=cell.hardware.name, stack=cell.stack.name, workload=cell.workload,
        inputs=inputs))


@pytest.fixture
def cells(matrix_file):
    spec = load_spec(matrix_file(MATRIX.replace("TIMEOUT", "60")))
    return spec, {c.params["fault"]: c for c in make_plan(spec, NO_GPU).to_run}


def test_an_outcome_with_the_same_inputs_is_kept_and_a_failure_of_the_run_runs_again(cells):
    spec, by_fault = cells
    history = [ended(by_fault["unsupported"], Status.UNSUPPORTED, by_fault["unsupported"].inputs),
               ended(by_fault["abort"], Status.CRASHED, by_fault["abort"].inputs),
               ended(by_fault["none"], Status.OK, by_fault["none"].inputs)]
    plan = make_plan(spec, NO_GPU, history)
    assert [c.params["fault"] for c in plan.to_run] == ["abort"]
    (kept,) = [s.reason for s in plan.skipped if s.cell == by_fault["unsupported"]]
    assert kept == ("ended unsupported with the same inputs (its configuration's outcome; "
                    "--retry unsupported to run it again)")
    retried = make_plan(spec, NO_GPU, history, retry=frozenset({Status.UNSUPPORTED}))
    assert sorted(c.params["fault"] for c in retried.to_run) == ["abort", "unsupported"]


def test_an_outcome_runs_again_when_its_inputs_changed_or_were_never_recorded(cells):
    spec, by_fault = cells
    cell = by_fault["unsupported"]
    for inputs in ("0123456789abcdef", None):  # other inputs; a record made before them
        plan = make_plan(spec, NO_GPU, [ended(cell, Status.UNSUPPORTED, inputs)])
        assert cell in plan.to_run


def test_the_inputs_are_the_timeout_the_memory_limit_and_an_image_stacks_lock(tmp_path):
    image = Stack(name="pinned", framework="torch", framework_version="2.13.0")
    process = Stack(name="here", executor="process")
    (tmp_path / "pinned.txt").write_text("torch==2.13.0 --hash=sha256:aa\n")
    first = outcome_inputs(image, 60.0, None, str(tmp_path))
    assert first == outcome_inputs(image, 60.0, None, str(tmp_path))
    assert first != outcome_inputs(image, 61.0, None, str(tmp_path))
    assert first != outcome_inputs(image, 60.0, 512, str(tmp_path))
    (tmp_path / "pinned.txt").write_text("torch==2.13.0 --hash=sha256:bb\n")
    assert first != outcome_inputs(image, 60.0, None, str(tmp_path))
    assert outcome_inputs(process, 60.0, None, str(tmp_path)) == \
        outcome_inputs(process, 60.0, None, None)  # no lock of its own


def test_retry_names_statuses_and_refuses_others():
    assert parse_retry(["unsupported,oom", " failed "]) == {Status.UNSUPPORTED, Status.OOM,
                                                            Status.FAILED}
    assert parse_retry(None) == frozenset()
    with pytest.raises(RetryError, match=r"--retry 'unsuported': not a status; the statuses "
                                         r"kept until their inputs change are failed, oom"):
        parse_retry(["unsuported"])


def test_resume_keeps_unsupported_until_asked_or_its_timeout_changes(tmp_path):
    matrix = tmp_path / "m.yaml"
    matrix.write_text(MATRIX.replace("TIMEOUT", "60"))
    run_dir = tmp_path / "reports" / "retried"

    def run(*extra: str) -> list[str]:
        done = run_cli("run", "m.yaml", "--no-ray", *extra, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        return [c["param.fault"] for c in cell_records(run_dir)]

    assert sorted(run()) == ["abort", "none", "unsupported"]
    status = {c["param.fault"]: c["status"] for c in cell_records(run_dir)}
    assert status == {"unsupported": "unsupported", "abort": "crashed", "none": "ok"}
    assert run()[3:] == ["abort"]  # the crash, a failure of the run, runs again; alone
    assert sorted(run("--retry", "unsupported")[4:]) == ["abort", "unsupported"]
    plan = run_cli("plan", "m.yaml", "--verbose", cwd=tmp_path, env={"COLUMNS": "200"})
    assert "ended unsupported with the same inputs" in plan.stdout, plan.stdout
    matrix.write_text(MATRIX.replace("TIMEOUT", "90"))  # an input that shapes it
    assert sorted(run()[6:]) == ["abort", "unsupported"]
    bad = run_cli("run", "m.yaml", "--no-ray", "--retry", "broken", cwd=tmp_path)
    assert bad.returncode == 2
    (line,) = bad.stderr.strip().splitlines()
    assert line.startswith("error: --retry 'broken': not a status"), line
