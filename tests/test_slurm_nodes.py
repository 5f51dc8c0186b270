"""A cell across nodes on Slurm (issue 58): the test Slurm's `pair` partition holds two
nodes (tests/slurm_cluster.py: a second slurmd on this machine, at 127.0.0.2). gpt_lm runs
across both as one job of two nodes, one step per node, its ranks one group; a rank killed
on one node fails the cell and leaves nothing on either."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.conftest import cell_records, journal, run_cli, write
from tests.slurm_cluster import SECOND_NODE, SlurmCluster
from tests.test_nodes import PAIR as PAIR_ON_RAY
from tests.test_nodes import node1_worker_once_training
from tests.test_slurm import arrays_submitted, start_sweep, tasks_of

pytestmark = pytest.mark.slow

# test_nodes.py's matrix, its entry a Slurm partition's
PAIR = PAIR_ON_RAY.replace(
    "{{name: pair, kind: local, nodes: {nodes}, price_per_hour: 1.5}}",
    "{{name: pair, kind: slurm, partition: {partition}, cpus: 1, nodes: {nodes}, "
    "price_per_hour: 1.5}}") + "slurm: {{poll_s: 0.5}}\n"


def pair_matrix(root: Path, name: str, nodes: object, steps: int = 4, epochs: int = 2,
                partition: str = "pair") -> Path:
    return write(root / "m.yaml", PAIR.format(name=name, nodes=nodes, steps=steps,
                                              epochs=epochs, partition=partition))


def test_gpt_lm_across_two_slurm_nodes_is_one_job_one_group_with_its_network_measured(
        slurm: SlurmCluster, tmp_path):
    import pandas as pd

    done = run_cli("run", str(pair_matrix(tmp_path, "onpair", [1, 2])), "--db", "none",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "reports" / "onpair"
    one, two = sorted(cell_records(run_dir), key=lambda c: c.get("hw.nodes") or 1)
    assert (one["status"], two["status"]) == ("ok", "ok"), (one.get("error"), two.get("error"))
    assert "hw.nodes" not in one and two["hw.nodes"] == 2
    # one array per node count: the two-node one holds both nodes, one task on each
    arrays = dict(arrays_submitted(done.stdout))
    assert len(arrays) == 2, done.stdout
    jobs = {array: slurm.scontrol("show", "job", "-o", array) for array in arrays}
    (pair_job,) = [text for text in jobs.values() if " NumNodes=2 " in text]
    assert SECOND_NODE in pair_job and slurm.node in pair_job and "NumTasks=2" in pair_job
    (provenance,) = [r for r in journal(run_dir) if r["record"] == "provenance"
                     and r["cell_id"] == two["cell_id"]]
    assert provenance["nodes"] == 2 and provenance["world_size"] == 2
    assert len(provenance["rank_hosts"]) == 2 and provenance["devices_used"] == 2
    assert provenance["net_busbw_gbs"] > 0 and provenance["net_probe_bytes"] >= 8
    assert provenance["price_per_hour_usd"] == pytest.approx(3.0)  # both nodes paid for
    # node 1 ran as a step on the other node, with its own files, at node 0's NodeAddr
    node1_log = (run_dir / "logs" / f"{two['cell_id']}.node1.log").read_text()
    assert "node 1 of 2, rendezvous" in node1_log and "127.0.0." in node1_log
    steps = (run_dir / "slurm").glob("pair-*/task-*.log")
    said = "".join(path.read_text() for path in steps)
    assert f"node 1 of 2 of cell {two['cell_id']} on" in said, said
    rows = pd.read_parquet(run_dir / "results.parquet")
    row = rows[rows["cell_id"] == two["cell_id"]].iloc[0]
    assert row["nodes"] == 2 and row["world_size"] == 2 and row["net_busbw_gbs"] > 0
    section = (run_dir / "report.md").read_text().split("### Scaling across nodes", 1)[1]
    assert "| pair | here | 2 | 2 |" in section.split("##", 1)[0]
    assert tasks_of(slurm, "onpair") == {}


def test_a_rank_killed_on_one_slurm_node_fails_the_cell_and_leaves_nothing_on_either(
        slurm: SlurmCluster, tmp_path):
    import psutil

    sweep = start_sweep(pair_matrix(tmp_path, "killed", 2, steps=400, epochs=3), tmp_path)
    run_dir = tmp_path / "reports" / "killed"
    try:
        victim, cell_id = node1_worker_once_training(run_dir, lambda: sweep.poll() is not None)
        os.kill(victim, signal.SIGKILL)
        output, _ = sweep.communicate(timeout=300)
    finally:
        sweep.kill()
    assert sweep.returncode == 0, output
    (cell,) = cell_records(run_dir)
    assert cell["status"] in {"failed", "crashed"}, cell
    assert "node 1 of 2 ended crashed: worker killed by SIGKILL" in cell["error"], cell
    still = [p.pid for p in psutil.process_iter(["cmdline"])  # its workers, on either node
             if any(cell_id in part for part in p.info["cmdline"] or [])]
    assert still == [], f"processes of the cell left running: {still}"
    assert tasks_of(slurm, "killed") == {}


def test_a_partition_with_fewer_nodes_than_a_cell_asks_is_refused_in_one_line(
        slurm: SlurmCluster, tmp_path):
    path = pair_matrix(tmp_path, "few", [1, 2], partition="debug")
    done = run_cli("run", str(path), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "hardware pair: nodes: 2, but partition debug has 1 node(s) (sinfo)" in line
    assert tasks_of(slurm, "few") == {}
