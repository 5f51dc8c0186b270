"""Failure as data: each fault becomes one cell record with its status; other cells complete.

Real processes, real signals, a real memory limit (RLIMIT_AS), a real timeout; run through
the session's Ray cluster and, for the executor itself, without Ray.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest

from orchestrator.executors import CellRun, launch_worker
from orchestrator.plan.cells import expand
from orchestrator.registry.cell_run import ToolInfo
from orchestrator.validate import load_spec
from tests.conftest import PROJECT, cell_records, run_cli

FAULTS = """
name: faults
hardware:
  - {name: node-a, kind: local}
stacks:
  - {name: here, executor: process}
workloads:
  - name: sleep
    params: {seconds: 0.2, fault: [none, raise, abort, kill, hang, oom, no_records, garbage]}
    timeout_s: 3
    memory_limit_mb: 400
"""

EXPECTED = {
    "none": "ok",
    "raise": "failed",
    "abort": "crashed",
    "kill": "crashed",
    "hang": "timeout",
    "oom": "oom",
    "no_records": "invalid_output",
    "garbage": "invalid_output",
}


@pytest.mark.ray
def test_each_fault_is_one_record_with_its_status(ray_cluster, matrix_file, tmp_path):
    result = run_cli("run", str(matrix_file(FAULTS)), "--ray-address", ray_cluster.address,
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    cells = cell_records(tmp_path / "reports" / "faults")
    statuses = {c["param.fault"]: c["status"] for c in cells}
    assert statuses == EXPECTED
    assert len(cells) == len(EXPECTED)  # one record per cell, nothing lost or doubled
    for cell in cells:
        if cell["status"] != "ok":
            assert cell["error"] and "log_tail" in cell, cell
    by_fault = {c["param.fault"]: c for c in cells}
    assert "RuntimeError: injected failure" in by_fault["raise"]["error"]
    assert "Traceback" in by_fault["raise"]["log_tail"]
    assert "SIGABRT" in by_fault["abort"]["error"] and "SIGKILL" in by_fault["kill"]["error"]
    assert "MemoryError" in by_fault["oom"]["error"]
    assert 3 <= by_fault["hang"]["wall_s"] < 30  # killed at its timeout, not left hanging
    spent = re.fullmatch(r"no result within the cell's timeout_s of 3 s \(stopped after "
                         r"([0-9.]+) s, the kill included\)", by_fault["hang"]["error"])
    assert spent and float(spent[1]) == pytest.approx(by_fault["hang"]["wall_s"], abs=0.06)
    report = (tmp_path / "reports" / "faults" / "report.md").read_text()
    assert "Cells that did not finish ok (7)" in report


def test_stack_pins_are_checked_before_running(matrix_file, tmp_path):
    # Pins that validate (real releases, a Python the worker runs on) but are not this
    # environment: the worker itself refuses them, wherever the matrix was validated.
    other = "3.12" if sys.version_info[:2] == (3, 11) else "3.11"
    spec = load_spec(matrix_file("""
        name: pins
        hardware: [{name: box, kind: local}]
        stacks:
          - {name: other-python, executor: process, python: "OTHER"}
          - {name: other-tf, executor: process, framework: tensorflow,
             framework_version: "2.12.0"}
        workloads: [{name: sleep, params: {seconds: 0.1}}]
        """.replace("OTHER", other)))
    for cell in expand(spec):
        records = launch_worker(CellRun(cell, tmp_path / "run", ToolInfo("test", None)))
        assert records[-1].status == "stack_mismatch", records[-1]
        assert cell.stack.name in records[-1].error
        assert len(records) == 2  # provenance and cell: nothing ran


def test_a_memory_limit_without_evidence_is_not_called_oom(matrix_file, tmp_path):
    spec = load_spec(matrix_file("""
        name: kill
        hardware: [{name: box, kind: local}]
        stacks: [{name: here, executor: process}]
        workloads: [{name: sleep, params: {fault: kill}}]
        """))
    (cell,) = expand(spec)
    records = launch_worker(CellRun(cell, tmp_path / "run", ToolInfo("test", None)))
    assert records[-1].status == "crashed"  # SIGKILL alone is no evidence of memory


def test_a_worker_sees_exactly_its_cells_gpus(monkeypatch):
    from orchestrator.executors.launch import worker_env
    from tests.cells import make_cell_model

    def env_for(gpus: int) -> str:
        return worker_env(make_cell_model("sleep", {}, 1, gpus=gpus))["CUDA_VISIBLE_DEVICES"]

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert (env_for(0), env_for(1), env_for(2)) == ("", "0", "0,1")  # a --no-ray run
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,6")  # chosen by Ray, or by the user
    assert (env_for(0), env_for(2)) == ("", "3,5")



GRANDCHILD = """
import os, sys, time
from orchestrator.worker.host import die_with_parent_setter
die_with_parent_setter()()
open(sys.argv[1], "w").write(str(os.getpid()))
time.sleep(120)
"""


def test_a_process_that_asked_to_die_with_its_parent_does(tmp_path):
    """The mechanism behind a worker (and nmt_dp's ranks) never outliving a killed parent."""
    pid_file = tmp_path / "grandchild.pid"
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; "
         "subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2]]); time.sleep(120)",
         GRANDCHILD, str(pid_file)], env={**os.environ, "PYTHONPATH": str(PROJECT)})
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the grandchild never started"
        time.sleep(0.1)
    grandchild = psutil.Process(int(pid_file.read_text()))
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    grandchild.wait(timeout=10)  # psutil.TimeoutExpired if it outlived its parent


@pytest.mark.ray
def test_a_frozen_ray_worker_is_held_to_the_cells_timeout_by_the_driver(
        ray_cluster, matrix_file, tmp_path):
    from tests.faults.test_signals import workers_of

    run_dir = tmp_path / "run"
    matrix = matrix_file("""
        name: frozen
        hardware: [{name: node-a, kind: local}]
        stacks: [{name: here, executor: process}]
        workloads: [{name: sleep, params: {seconds: 300, steps: 300}, timeout_s: 5}]
        """)
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "run", str(matrix), "-o", str(run_dir),
         "--ray-address", ray_cluster.address], cwd=tmp_path, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    frozen = None
    try:
        deadline = time.monotonic() + 120
        while not workers_of(run_dir):
            assert time.monotonic() < deadline and process.poll() is None, "no worker ran"
            time.sleep(0.1)
        (worker,) = workers_of(run_dir)
        frozen = worker.parent()  # the Ray worker process running the cell's task
        assert frozen is not None and "orchestrator.worker" not in " ".join(frozen.cmdline())
        frozen.send_signal(signal.SIGSTOP)  # its executor's timer can no longer fire
        stopped_at = time.monotonic()
        stdout, stderr = process.communicate(timeout=120)
        ended_after = time.monotonic() - stopped_at
    finally:
        if frozen is not None and frozen.is_running():
            frozen.send_signal(signal.SIGCONT)
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    (cell,) = cell_records(run_dir)
    assert cell["status"] == "timeout", cell
    assert "timeout_s of 5 s" in cell["error"] and "so the driver did" in cell["error"]
    assert 5 < cell["wall_s"] <= 5 + 30 + 5  # within the grace, not the 600 s node wait
    assert ended_after < 45, stdout
    psutil.wait_procs([worker, frozen], timeout=15)
    assert not worker.is_running() and not frozen.is_running()  # nothing the cell started
