"""A cell computes on the threads of the driver's environment wherever it runs (issue 46's
follow-up, executors/environment.py): in a Ray task as with `--no-ray`, not on Ray's own
OMP_NUM_THREADS=1 nor on a node's setting; and its provenance says which threads those were
(worker/threads.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from orchestrator.executors.environment import with_thread_settings
from orchestrator.worker.threads import thread_variables
from tests.conftest import assert_statuses, journal, run_cli, write

DEFAULTS = """
version: "1"
description: "Multiplies two small matrices with torch per step."
item_unit: sample
epochs: 1
params:
  steps: {type: int, default: 3, min: 2}
"""
WORKLOAD = """
import torch


def run(ctx):
    for epoch in ctx.epoch_range():
        meter = ctx.start_epoch(warmup_steps=1)
        for _ in range(ctx.params["steps"]):
            with meter.step(items=1):
                torch.ones(16, 16) @ torch.ones(16, 16)
        ctx.end_epoch(epoch, meter)
"""


def threads_matrix(root, hardware: str = "box"):
    (root / "matmul").mkdir()
    write(root / "matmul" / "defaults.yaml", DEFAULTS)
    write(root / "matmul" / "workload.py", WORKLOAD)
    return write(root / "m.yaml", f"""
        name: threads
        hardware: [{{name: {hardware}, kind: local}}]
        stacks: [{{name: here, executor: process}}]
        workloads: [{{name: matmul, path: ./matmul}}]
        """)


def provenance_of_the_cell(run_dir) -> dict:
    assert_statuses(run_dir, ["ok"])
    (found,) = [r for r in journal(run_dir) if r["record"] == "provenance"]
    return found


def torch_default_threads() -> int:
    """What torch computes with in a process of this machine where nothing sets threads."""
    env = {k: v for k, v in os.environ.items() if k not in thread_variables(os.environ)}
    done = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                          env=env, capture_output=True, text=True, check=True, timeout=120)
    return int(done.stdout)


@pytest.mark.ray
def test_where_the_user_sets_no_threads_ray_and_no_ray_compute_on_the_same(tmp_path):
    matrix = threads_matrix(tmp_path)
    unset = thread_variables(os.environ)  # the tests' own OMP_NUM_THREADS=1 among them
    found = {}
    for how, args in (("ray", ()), ("serial", ("--no-ray",))):
        done = run_cli("run", str(matrix), "-o", str(tmp_path / how), "--db", "none", *args,
                       cwd=tmp_path, unset=unset)
        assert done.returncode == 0, done.stdout + done.stderr
        found[how] = provenance_of_the_cell(tmp_path / how)
    # not Ray's OMP_NUM_THREADS=1 for a task: the framework's own default, as serially
    default = torch_default_threads()
    for how, provenance in found.items():
        assert provenance["thread_settings"] == {}, (how, provenance)
        assert provenance["cpu_threads"] == default, (how, provenance)
    report = (tmp_path / "ray" / "report.md").read_text()
    assert "cpu_threads" in report.split("## Environment", 1)[1]


@pytest.mark.ray
def test_the_drivers_setting_reaches_a_cell_on_a_node_that_sets_another(ray_cluster, tmp_path):
    # The cluster's nodes started with the tests' OMP_NUM_THREADS=1; this driver says 2.
    matrix = threads_matrix(tmp_path, hardware="node-b")
    done = run_cli("run", str(matrix), "--ray-address", ray_cluster.address, "--db", "none",
                   cwd=tmp_path, env={"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stdout + done.stderr
    provenance = provenance_of_the_cell(tmp_path / "reports" / "threads")
    assert provenance["thread_settings"] == {"MKL_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}
    assert provenance["cpu_threads"] == 2


def test_thread_settings_hold_for_the_block_and_are_put_back(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as Ray sets it in a task
    monkeypatch.setenv("KMP_AFFINITY", "compact")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    before = thread_variables(os.environ)
    with with_thread_settings({"MKL_NUM_THREADS": "4", "OMP_API_TOKEN": "s3cret"}):
        # exactly the driver's, and never a variable that names a credential
        assert thread_variables(os.environ) == {"MKL_NUM_THREADS": "4"}
    assert thread_variables(os.environ) == before
    with pytest.raises(RuntimeError), with_thread_settings({}):
        raise RuntimeError("a cell's executor failed")
    assert os.environ["OMP_NUM_THREADS"] == "1"
