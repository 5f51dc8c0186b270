"""Ctrl-C and SIGTERM: the sweep stops within seconds, kills its workers, keeps what
finished, writes the report and says how to resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import psutil
import pytest

from tests.conftest import cell_records

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

MATRIX = """
name: interrupt
hardware: [{name: node-a, kind: local}]
stacks: [{name: here, executor: process}]
workloads:
  - {name: sleep, params: {seconds: [0.2, 60], steps: 60}}
"""


def workers_of(run_dir) -> list[psutil.Process]:
    """The live workers of cells of `run_dir` (a zombie has ended: it is no worker)."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if ("orchestrator.worker" in cmdline and str(run_dir) in cmdline
                and process.info["status"] != psutil.STATUS_ZOMBIE):
            found.append(process)
    return found


@pytest.mark.parametrize("how", ["sigint-no-ray", "sigterm-ray"])
def test_a_signal_stops_the_sweep_and_keeps_what_finished(how, request, matrix_file, tmp_path):
    run_dir = tmp_path / "run"
    args = ["run", str(matrix_file(MATRIX)), "-o", str(run_dir)]
    if how == "sigint-no-ray":
        args.append("--no-ray")
        sig = signal.SIGINT
    else:
        args += ["--ray-address", request.getfixturevalue("ray_cluster").address]
        sig = signal.SIGTERM
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", *args], cwd=tmp_path, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        # a background child inherits an ignored SIGINT; a terminal's Ctrl-C is not ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not (run_dir / "results.jsonl").exists() or not workers_of(run_dir):
        assert time.monotonic() < deadline, "the long cell never started"
        time.sleep(0.2)
    assert len(cell_records(run_dir)) == 1  # the short cell finished, the long one runs
    os.kill(process.pid, sig)
    # stopped, not waited out: the 60 s cell never ends (its record, below, is absent);
    # the shutdown's own length is load, not behaviour, so only a hang is bounded
    stdout, stderr = process.communicate(timeout=50)
    assert process.returncode == 130, stderr
    assert "run the same command again to resume" in stdout
    time.sleep(0.5)
    assert workers_of(run_dir) == []
    (finished,) = cell_records(run_dir)
    assert finished["status"] == "ok" and finished["param.seconds"] == 0.2
    assert (run_dir / "report.md").exists() and not (run_dir / "run.lock").exists()


QUICK = """
name: quick
hardware: [{name: box, kind: local}]
stacks: [{name: here, executor: process}]
workloads:
  - {name: sleep, params: {seconds: [0.01, 0.02, 0.03]}}
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_while_the_report_is_written_waits_for_it(sig, matrix_file, tmp_path):
    run_dir = tmp_path / "run"
    path = matrix_file(QUICK.replace("0.03]", "0.03, 0.04]"))
    first = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(path), "-o",
                            str(run_dir), "--no-ray", "--only", "seconds=0.01"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr  # a report of one cell, to go stale
    env = {**os.environ, "MATRIX_BENCH_KILL_AT": f"report:1:{sig}"}  # a real signal, there
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(path), "-o",
                           str(run_dir), "--no-ray"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr
    assert "written first; run the same command again to resume" in done.stdout
    report = (run_dir / "report.md").read_text()
    assert "from 4 cells" in report  # this sweep's, not the stale one of 1
    assert len(pd.read_parquet(run_dir / "results.parquet")["cell_id"].unique()) == 4
    assert not list(run_dir.glob(".*.tmp"))


def test_a_double_ctrl_c_still_writes_the_parquet_and_the_report(matrix_file, tmp_path):
    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "run", str(matrix_file(MATRIX)), "-o",
         str(run_dir), "--no-ray"], cwd=tmp_path, text=True, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not (run_dir / "results.jsonl").exists() or not workers_of(run_dir):
        assert time.monotonic() < deadline, "the long cell never started"
        time.sleep(0.2)
    os.kill(process.pid, signal.SIGINT)
    time.sleep(0.3)  # an impatient second Ctrl-C, while the sweep winds down
    os.kill(process.pid, signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130 and "Traceback" not in stderr, stderr
    assert "run the same command again to resume" in stdout
    assert "from 1 cells" in (run_dir / "report.md").read_text()
    assert len(pd.read_parquet(run_dir / "results.parquet")) >= 1
