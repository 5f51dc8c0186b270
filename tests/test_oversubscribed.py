"""A row says when its CPU workers outnumber the cores it had (issue 21): such workers share
cores, and neither their time nor a speedup from it means what it would on their own cores."""

from __future__ import annotations

import os

import pytest

from tests.conftest import cell_records, own_reasons, run_cli

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier


def test_more_cpu_workers_than_cores_is_flagged_oversubscribed(matrix_file, tmp_path):
    cores = os.cpu_count() or 1
    matrix = matrix_file(f"""
name: crowded
hardware: [{{name: box, kind: local}}]
stacks: [{{name: here, executor: process}}]
workloads:
  - {{name: nmt_dp, preset: tiny, epochs: 1, params: {{workers: [1, {cores + 1}]}}}}
""")
    done = run_cli("run", str(matrix), "-o", str(tmp_path / "run"), "--no-ray", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    by_workers = {c["param.workers"]: c for c in cell_records(tmp_path / "run")}
    crowded = by_workers[cores + 1]
    assert crowded["status"] == "ok", crowded
    assert "oversubscribed" in crowded["flags"]
    # the machine's own reasons (another test worker on the CPUs) may stand beside it
    assert own_reasons(crowded) == [f"oversubscribed: {cores + 1} workers on {cores} CPU cores"]
    assert "oversubscribed" not in by_workers[1]["flags"]
    assert own_reasons(by_workers[1]) == []
