"""Two `matrix run` of one matrix and run directory at once: one sweeps, the other refuses
with one clear line (exit 2) and touches nothing; the journal stays whole."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import cell_records

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

MATRIX = """
name: twice
hardware: [{name: node-a, kind: local}]
stacks: [{name: here, executor: process}]
workloads:
  - {name: sleep, params: {seconds: 0.4, steps: [1, 2, 3]}}
"""
CELLS = 3


def start(matrix: Path, run_dir: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "run", str(matrix), "-o", str(run_dir),
         "--no-ray"], cwd=run_dir.parent, text=True, env={**os.environ, "COLUMNS": "200"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def assert_whole_journal(run_dir: Path) -> None:
    cells = cell_records(run_dir)  # every line parses
    assert sorted(c["status"] for c in cells) == ["ok"] * CELLS
    assert len({c["cell_id"] for c in cells}) == CELLS  # no cell twice


def assert_refused(result: tuple[str, str], returncode: int) -> None:
    stdout, stderr = result
    assert returncode == 2, stdout + stderr
    (line,) = stderr.strip().splitlines()
    assert "is in use by pid" in line and "one sweep at a time" in line


def test_a_second_sweep_of_a_running_run_refuses(matrix_file, tmp_path):
    matrix, run_dir = matrix_file(MATRIX), tmp_path / "run"
    first = start(matrix, run_dir)
    deadline = time.monotonic() + 60
    while not (run_dir / "results.jsonl").exists():
        assert time.monotonic() < deadline and first.poll() is None, first.communicate()
        time.sleep(0.1)
    second = start(matrix, run_dir)
    assert_refused(second.communicate(timeout=60), second.returncode)
    first.communicate(timeout=120)
    assert first.returncode == 0
    assert_whole_journal(run_dir)


def test_two_sweeps_started_together_never_both_run(matrix_file, tmp_path):
    matrix = matrix_file(MATRIX)
    for attempt in range(3):  # each attempt races the two locks afresh
        run_dir = tmp_path / f"run{attempt}"
        both = [start(matrix, run_dir), start(matrix, run_dir)]
        results = [(p.communicate(timeout=120), p.returncode) for p in both]
        assert sorted(code for _, code in results) == [0, 2], results
        assert_refused(*next(r for r in results if r[1] == 2))
        assert_whole_journal(run_dir)
        assert not (run_dir / "run.lock").exists()
