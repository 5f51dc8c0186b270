"""Node loss on the session's real multi-node Ray cluster: nodes added for a test and killed
with SIGKILL (every process of the node: raylet, its Ray workers) while they run a cell.

A cell whose node dies runs again on another node of its hardware; with none left it waits
its timeout for one and ends `node_lost`; no cell waits forever, no worker is left behind.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.conftest import cell_records, journal, node_ports
from tests.faults.test_signals import workers_of

pytestmark = pytest.mark.ray

NODE_ARGS = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024}


def lossy_matrix(hardware: str, seconds: float, timeout_s: float) -> str:
    return f"""
name: lossy
hardware: [{{name: {hardware}, kind: local}}]
stacks: [{{name: here, executor: process}}]
workloads:
  - {{name: sleep, params: {{seconds: {seconds}, steps: 20}}, timeout_s: {timeout_s}}}
"""


@pytest.fixture
def add_node(ray_cluster) -> Iterator:
    """Add a node offering hw:<name> to the session cluster; what a test leaves is killed."""
    cluster = ray_cluster.cluster
    added = []

    def add(hardware: str):
        node = cluster.add_node(**NODE_ARGS, **node_ports(), resources={f"hw:{hardware}": 1})
        cluster.wait_for_nodes()
        added.append(node)
        return node

    yield add
    for node in added:
        if node in cluster.worker_nodes:
            cluster.remove_node(node, allow_graceful=False)


def start_sweep(matrix: Path, run_dir: Path, address: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "run", str(matrix), "-o", str(run_dir),
         "--ray-address", address], cwd=run_dir.parent, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def node_running_the_cell(run_dir: Path, nodes: list) -> object:
    """The node whose raylet is an ancestor of the cell's worker process."""
    deadline = time.monotonic() + 60
    while not workers_of(run_dir):
        assert time.monotonic() < deadline, "the cell never started"
        time.sleep(0.2)
    (worker,) = workers_of(run_dir)
    ancestors = {p.pid for p in worker.parents()}
    for node in nodes:
        raylet = node.all_processes["raylet"][0].process.pid
        if raylet in ancestors:
            return node
    raise AssertionError(f"no added node runs the cell (ancestors {ancestors})")


def test_a_cell_whose_node_dies_runs_again_on_another_node_of_its_hardware(
        ray_cluster, add_node, matrix_file, tmp_path):
    nodes = [add_node("twin"), add_node("twin")]
    run_dir = tmp_path / "run"
    sweep = start_sweep(matrix_file(lossy_matrix("twin", 4, 60)), run_dir,
                        ray_cluster.address)
    victim = node_running_the_cell(run_dir, nodes)
    (first_worker,) = workers_of(run_dir)
    ray_cluster.cluster.remove_node(victim, allow_graceful=False)
    survivor = next(n for n in nodes if n is not victim)
    _, stderr = sweep.communicate(timeout=120)
    assert sweep.returncode == 0, stderr
    assert not psutil.pid_exists(first_worker.pid) or \
        first_worker.status() == psutil.STATUS_ZOMBIE  # it died with its node
    (cell,) = cell_records(run_dir)  # one record: the attempt on the dead node left none
    assert cell["status"] == "ok", cell
    assert cell["attempts"] == 2
    assert cell["node_id"] == survivor.node_id


def test_a_cell_whose_only_node_dies_is_node_lost_after_its_timeout(
        ray_cluster, add_node, matrix_file, tmp_path):
    node = add_node("lonely")
    run_dir = tmp_path / "run"
    sweep = start_sweep(matrix_file(lossy_matrix("lonely", 60, 5)), run_dir,
                        ray_cluster.address)
    node_running_the_cell(run_dir, [node])
    ray_cluster.cluster.remove_node(node, allow_graceful=False)
    killed = time.monotonic()
    _, stderr = sweep.communicate(timeout=120)
    waited = time.monotonic() - killed
    assert sweep.returncode == 0, stderr
    (cell,) = cell_records(run_dir)
    assert cell["status"] == "node_lost", cell
    assert "was lost and no other node offered it within the cell's timeout (5 s)" in \
        cell["error"]
    assert 5 <= waited < 60, waited  # its timeout for a node to come, not forever
    assert workers_of(run_dir) == []
    assert len([r for r in journal(run_dir) if r["record"] == "cell"]) == 1
