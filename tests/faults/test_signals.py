"""Ctrl-C and SIGTERM: the sweep stops within seconds, kills its workers, keeps what
finished, writes the report and says how to resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.conftest import cell_records

MATRIX = """
name: interrupt
hardware: [{name: node-a, kind: local}]
stacks: [{name: here, executor: process}]
workloads:
  - {name: sleep, params: {seconds: [0.2, 60], steps: 60}}
"""


def workers_of(run_dir) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if "orchestrator.worker" in cmdline and str(run_dir) in cmdline:
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
    start = time.monotonic()
    stdout, stderr = process.communicate(timeout=30)
    assert time.monotonic() - start < 10
    assert process.returncode == 130, stderr
    assert "run the same command again to resume" in stdout
    time.sleep(0.5)
    assert workers_of(run_dir) == []
    (finished,) = cell_records(run_dir)
    assert finished["status"] == "ok" and finished["param.seconds"] == 0.2
    assert (run_dir / "report.md").exists() and not (run_dir / "run.lock").exists()
