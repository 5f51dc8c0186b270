"""A cell across nodes (issue 58): one training job whose ranks span nodes, its network
measured, its price every node's. The Ray tests run gpt_lm across the session's two real Ray
nodes (both offer hw:pair); the others need no cluster."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import cell_records, descendants, journal, left_behind, run_cli, write

PAIR = """
name: {name}
hardware:
  - {{name: pair, kind: local, nodes: {nodes}, price_per_hour: 1.5}}
stacks: [{{name: here, executor: process}}]
workloads:
  - name: gpt_lm
    params: {{preset: tiny, workers: 1, steps_per_epoch: {steps}, warmup_steps: 1}}
    epochs: {epochs}
    timeout_s: 300
"""


def _provenance(run_dir: Path, cell_id: str) -> dict:
    (record,) = [r for r in journal(run_dir) if r["record"] == "provenance"
                 and r["cell_id"] == cell_id]
    return record


@pytest.mark.ray
def test_gpt_lm_across_two_ray_nodes_is_one_group_with_its_network_measured(
        ray_cluster, tmp_path):
    import pandas as pd

    path = write(tmp_path / "m.yaml", PAIR.format(name="pair", nodes=[1, 2], steps=4, epochs=2))
    done = run_cli("run", str(path), "--ray-address", ray_cluster.address, "--db", "none",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "reports" / "pair"
    one, cell = sorted(cell_records(run_dir), key=lambda c: c.get("hw.nodes") or 1)
    assert (one["status"], cell["status"]) == ("ok", "ok"), (one.get("error"), cell.get("error"))
    assert "hw.nodes" not in one and cell["hw.nodes"] == 2  # told apart in every table
    provenance = _provenance(run_dir, cell["cell_id"])
    assert provenance["nodes"] == 2 and provenance["world_size"] == 2
    assert len(provenance["rank_hosts"]) == 2
    assert provenance["devices_used"] == 2  # its throughput counts both ranks' tokens
    assert provenance["net_busbw_gbs"] > 0
    assert provenance["net_probe_bytes"] >= 8
    # every node of the cell is paid for
    assert provenance["price_per_hour_usd"] == pytest.approx(3.0)
    # node 1 ran its own worker, with its own files, and told the rendezvous it used
    node1_log = (run_dir / "logs" / f"{cell['cell_id']}.node1.log").read_text()
    assert "node 1 of 2, rendezvous" in node1_log
    assert "all-reduce bus bandwidth over 8 B" in node1_log
    rows = pd.read_parquet(run_dir / "results.parquet")
    row = rows[rows["cell_id"] == cell["cell_id"]].iloc[0]
    assert row["nodes"] == 2 and row["world_size"] == 2 and row["net_busbw_gbs"] > 0
    assert _provenance(run_dir, one["cell_id"])["nodes"] == 1
    section = (run_dir / "report.md").read_text().split("### Scaling across nodes", 1)[1]
    assert "| pair | here | 2 | 2 |" in section.split("##", 1)[0]


@pytest.mark.ray
def test_a_rank_killed_on_one_node_fails_the_cell_and_leaves_nothing_on_either(
        ray_cluster, tmp_path):
    import psutil

    path = write(tmp_path / "m.yaml", PAIR.format(name="killed", nodes=2, steps=400, epochs=3))
    run_dir = tmp_path / "reports" / "killed"
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        sweep = pool.submit(run_cli, "run", str(path), "--ray-address", ray_cluster.address,
                            "--db", "none", cwd=tmp_path)
        victim, cell_id = node1_worker_once_training(run_dir, sweep.done)
        os.kill(victim, signal.SIGKILL)
        done = sweep.result(timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (cell,) = cell_records(run_dir)
    assert cell["status"] in {"failed", "crashed"}, cell
    assert "node 1 of 2 ended crashed: worker killed by SIGKILL" in cell["error"]
    assert cell["wall_s"] > 0  # the time it held both nodes, recorded (not a cancel's 0)
    time.sleep(1)  # the cancelled tasks' executors end their groups as they unwind
    still = [p.pid for p in psutil.process_iter(["cmdline"])  # its workers, on either node
             if "orchestrator.worker" in (p.info["cmdline"] or [])
             and any(cell_id in part for part in p.info["cmdline"])]
    assert still == [], f"processes of the cell left running: {still}"


def node1_worker_once_training(run_dir: Path, ended: Callable[[], bool]) -> tuple[int, str]:
    """Node 1's worker process, once its log says it trains (the probe done), and the id
    of its cell; `ended`: whether the sweep has ended (then it never will)."""
    import psutil

    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not ended():
        for log in (run_dir / "logs").glob("*.node1.log") if (run_dir / "logs").exists() \
                else []:
            if "all-reduce bus bandwidth" not in log.read_text():
                continue
            cell_id = log.name.split(".")[0]
            for process in psutil.process_iter(["cmdline"]):
                cmdline = process.info["cmdline"] or []
                if "orchestrator.worker" in cmdline and any(
                        f"{cell_id}.node1.json" in part for part in cmdline):
                    return process.pid, cell_id
        time.sleep(0.2)
    raise AssertionError("node 1's worker never trained"
                         + (": the sweep ended first" if ended() else ""))


NMT_DP = """
  - name: nmt_dp
    params: {preset: tiny, workers: 1, batches_per_round: 2, warmup_steps: 1}
    epochs: 1
    timeout_s: 300
"""


NETWORK = """
  - name: network
    params: {workers: 1, size_mib: 1, steps: 4, warmup_steps: 1}
    epochs: 1
    timeout_s: 300
"""


TRANSFORMER_FT = """
  - name: transformer_ft
    params: {preset: tiny, workers: 1, examples: 48}
    epochs: 1
    timeout_s: 300
"""


@pytest.mark.parametrize("dp_mode", ["ddp", "fsdp", "nmt_dp allreduce", "network",
                                     "transformer_ft"])
def test_two_workers_of_one_cell_join_one_group_through_the_launch(tmp_path, dp_mode):
    """The executor's side without Ray: two launches of one cell, nodes 0 and 1, meet at
    the rendezvous they are given and train as one group (gpt_lm with DDP, or FSDP2 sharded
    across the nodes; nmt_dp's all-reduce; the network workload's all-reduce alone); node 1
    measures nothing and still ends ok."""
    from orchestrator.executors import NodePlace, execute
    from orchestrator.plan.cells import expand
    from orchestrator.registry.cell_run import ToolInfo
    from orchestrator.validate import load_spec

    text = PAIR.format(name="launch", nodes=2, steps=2, epochs=1)
    if dp_mode.startswith("nmt_dp"):
        text = text.split("  - name: gpt_lm")[0] + NMT_DP
    elif dp_mode in ("network", "transformer_ft"):
        text = text.split("  - name: gpt_lm")[0] + {"network": NETWORK,
                                                     "transformer_ft": TRANSFORMER_FT}[dp_mode]
    else:
        text = text.replace("workers: 1,", f"workers: 1, dp_mode: {dp_mode},")
    spec = load_spec(write(tmp_path / "m.yaml", text))
    (cell,) = expand(spec)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ended: dict[int, list] = {}
    before = descendants()

    def node(rank: int) -> None:
        ended[rank] = execute(cell, tmp_path / "run", ToolInfo("test", None), {},
                              node=NodePlace(2, rank, "127.0.0.1", port))

    threads = [threading.Thread(target=node, args=(rank,)) for rank in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(240)
    assert [ended[rank][-1].status.value for rank in (0, 1)] == ["ok", "ok"], \
        [ended[rank][-1].error for rank in (0, 1)]
    provenance = next(r for r in ended[0] if r.record == "provenance")
    assert (provenance.nodes, provenance.world_size) == (2, 2)
    assert provenance.rendezvous_s > 0
    assert not any(r.record == "measurement" for r in ended[1])
    assert (tmp_path / "run" / "cells" / f"{cell.cell_id}.node1.json").exists()
    if dp_mode == "network":  # its epochs are timed all-reduces: bytes/s, and busbw beside
        (epoch,) = [r for r in ended[0] if r.record == "measurement"]
        assert epoch.item_unit == "byte" and epoch.items == 4 * 2**20  # 4 timed of 1 MiB
        busbw = epoch.model_dump()["busbw_gbs"]
        assert busbw == pytest.approx(epoch.items_per_s * 2 * (2 - 1) / 2 / 1e9)
        assert provenance.net_busbw_gbs > 0
    if dp_mode == "transformer_ft":  # both ranks' examples counted: 48 each, 2 in warm-up
        (epoch,) = [r for r in ended[0] if r.record == "measurement"]
        assert epoch.items == 2 * (48 - 2 * 8) and provenance.devices_used == 2
    assert left_behind(before) == set()


def test_a_cell_across_nodes_alone_fails_naming_its_rendezvous(tmp_path):
    """A worker of a cell across nodes started without its place (a plugin's executor that
    drops it) fails in one line instead of waiting for nodes that never come."""
    from orchestrator.executors import execute
    from orchestrator.plan.cells import expand
    from orchestrator.registry.cell_run import ToolInfo
    from orchestrator.validate import load_spec

    spec = load_spec(write(tmp_path / "m.yaml",
                           PAIR.format(name="alone", nodes=2, steps=2, epochs=1)))
    (cell,) = expand(spec)
    records = execute(cell, tmp_path / "run", ToolInfo("test", None), {})
    assert records[-1].status.value == "failed"
    assert "needs NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT from its dispatcher" in \
        records[-1].error


def test_without_a_cluster_a_cell_across_nodes_is_refused_in_one_line(tmp_path):
    path = write(tmp_path / "m.yaml", PAIR.format(name="refused", nodes=2, steps=2, epochs=1))
    for extra in (["--no-ray"], []):
        done = run_cli("run", str(path), "--db", "none", *extra, cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert "hardware pair has nodes: 2: a cell across nodes runs on a Ray cluster" in \
            lines[0]
        assert not (tmp_path / "reports" / "refused" / "results.jsonl").exists() or \
            cell_records(tmp_path / "reports" / "refused") == []


@pytest.mark.ray
def test_plan_with_a_ray_address_plans_for_the_nodes_that_cluster_offers(ray_cluster,
                                                                         tmp_path):
    path = write(tmp_path / "m.yaml", PAIR.format(name="planned", nodes=[1, 2, 3], steps=2,
                                                  epochs=1))
    done = run_cli("plan", str(path), "--ray-address", ray_cluster.address, "--format",
                   "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    fates = {c["nodes"]: c["reason"] or c["action"] for c in json.loads(done.stdout)}
    assert fates == {1: "run", 2: "run", 3: "needs 3 nodes offering hw:pair; the cluster has 2"}
    alone = run_cli("plan", str(path), cwd=tmp_path)  # without a cluster: refused, one line
    assert alone.returncode == 2 and len(alone.stderr.strip().splitlines()) == 1, alone.stderr


def test_a_cluster_with_too_few_nodes_skips_the_cell_with_both_counts(tmp_path):
    from orchestrator.hardware.local import detect_local
    from orchestrator.plan.planner import make_plan
    from orchestrator.validate import load_spec

    spec = load_spec(write(tmp_path / "m.yaml",
                           PAIR.format(name="few", nodes=3, steps=2, epochs=1)))
    plan = make_plan(spec, detect_local(), cluster_hardware={"pair": 2})
    assert plan.to_run == []
    assert [s.reason for s in plan.skipped] == [
        "needs 3 nodes offering hw:pair; the cluster has 2"]
    assert make_plan(spec, detect_local(), cluster_hardware={"pair": 3}).skipped == []


def test_a_workload_that_runs_on_one_node_is_incompatible_with_several(tmp_path):
    from orchestrator.plan.cells import expand, incompatibility
    from orchestrator.validate import load_spec

    spec = load_spec(write(tmp_path / "m.yaml", """
        name: one
        hardware: [{name: pair, kind: local, nodes: 2}]
        stacks: [{name: here, executor: process}]
        workloads: [{name: sleep, params: {seconds: 0.1}}]
        """))
    (cell,) = expand(spec)
    assert incompatibility(cell) == "sleep runs on one node; pair has nodes: 2"


def test_ec2_refuses_nodes_above_one_for_now(tmp_path):
    kind = "ec2"
    path = write(tmp_path / "m.yaml", """
        name: launched
        hardware: [{name: big, kind: ec2, instance_type: c5.xlarge, nodes: 2}]
        stacks: [{name: here, executor: process}]
        workloads: [{name: gpt_lm, params: {preset: tiny}}]
        """)
    done = run_cli("validate", str(path), cwd=tmp_path)
    assert done.returncode == 2
    assert f"kind {kind} runs a cell on one node for now (nodes: 2)" in done.stderr


def test_slurms_plan_counts_the_node_hours_of_every_node_a_task_holds(tmp_path):
    path = write(tmp_path / "m.yaml", """
        name: planned
        hardware: [{name: pair, kind: slurm, partition: gpu, nodes: [1, 2],
                    time_limit: "01:00:00", price_per_hour: 2}]
        stacks: [{name: here, executor: process}]
        workloads: [{name: gpt_lm, params: {preset: tiny}}]
        """)
    done = run_cli("plan", str(path), cwd=tmp_path, env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert ("3.00 node-hours requested (2 tasks holding 3 nodes x 1:00:00), up to $6.00 at "
            "$2/h") in " ".join(done.stdout.split())


def test_nodes_enter_identity_only_above_one_and_price_every_node(tmp_path):
    from orchestrator.plan.cells import expand
    from orchestrator.registry.prices import Price
    from orchestrator.validate import load_spec

    def only_cell(nodes: str):
        spec = load_spec(write(tmp_path / "m.yaml", f"""
            name: ids
            hardware: [{{name: pair, kind: local{nodes}}}]
            stacks: [{{name: here, executor: process}}]
            workloads: [{{name: gpt_lm, params: {{preset: tiny}}}}]
            """))
        (cell,) = expand(spec)
        return cell

    plain, one, two = only_cell(""), only_cell(", nodes: 1"), only_cell(", nodes: 2")
    assert plain.config_id == one.config_id != two.config_id
    assert only_cell(", net_gbps: 100").config_id == plain.config_id  # a datasheet figure
    price = Price(4.0, "declared in the matrix", "2026-11-29", share="whole instance")
    assert price.for_cell(one) is price
    assert price.for_cell(two).usd_per_hour == 8.0
    assert price.for_cell(two).share == "2 nodes, each whole instance"


def test_the_network_probe_reports_bus_bandwidth_as_nccl_tests_does():
    from workloads.net_probe import bus_factor, sizes

    assert bus_factor(2) == 1.0 and bus_factor(8) == pytest.approx(1.75)
    found = sizes()
    assert found[0] == 8 and found[-1] <= 32 * 2**20 and found[-1] * 4 > 32 * 2**20


def test_a_list_of_node_counts_is_an_axis_each_count_its_own_configuration(tmp_path):
    from orchestrator.plan.cells import expand
    from orchestrator.validate import load_spec

    def config_ids(nodes: object) -> list[str]:
        spec = load_spec(write(tmp_path / "m.yaml", PAIR.format(name="axis", nodes=nodes,
                                                                steps=2, epochs=1)))
        return [cell.config_id for cell in expand(spec)]

    both = config_ids([1, 2])
    assert both == config_ids(1) + config_ids(2)  # the same ids as entries of one count


@pytest.mark.parametrize(("nodes", "why"), [
    ("[1, 1]", "nodes lists a count twice: [1, 1]"),
    ("[]", "nodes is a count or a list of counts"),
    ("[1, 0]", "nodes is a count or a list of counts"),
    ("0", "greater than 0"),
])
def test_a_bad_node_count_is_one_line_at_its_entry(tmp_path, nodes, why):
    path = write(tmp_path / "m.yaml", PAIR.format(name="bad", nodes=nodes, steps=2, epochs=1))
    done = run_cli("validate", str(path), cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and why in lines[0] and "m.yaml:3" in lines[0], done.stderr


def scaled_run(tmp_path: Path) -> Path:
    """A journal of gpt_lm on 1 node at 1,000 tokens/s and on 2 at 1,800 (1.80x, 90% of 2 x
    one node), with the bus bandwidth measured between the two; $1.50 an hour a node."""
    from orchestrator.results.records import (
        CellRecord,
        MeasurementRecord,
        ProvenanceRecord,
        Status,
    )
    from orchestrator.results.run_directory import RunDirectory

    store = RunDirectory(tmp_path / "scaled")
    store.root.mkdir()
    for cell_id, nodes, rate in (("one", 1, 1000.0), ("two", 2, 1800.0)):
        ident = {"run": "scaled", "cell_id": cell_id, "config_id": cell_id, "repeat": 1}
        across = {"world_size": nodes, "net_busbw_gbs": 1.25, "net_probe_bytes": 32 << 20,
                  "rendezvous_s": 30.0}
        store.append([
            ProvenanceRecord(**ident, cpu_count=2, nodes=nodes, devices_used=nodes,
                             price_per_hour_usd=1.5 * nodes, price_source="declared",
                             **(across if nodes > 1 else {})),
            *(MeasurementRecord(**ident, epoch=epoch, train_s=10.0, items=rate * 10,
                                item_unit="token", items_per_s=rate) for epoch in (1, 2)),
            CellRecord(**ident, status=Status.OK, started_at="2026-11-29T00:00:00+00:00",
                       wall_s=20.0, hardware="pair", stack="here", workload="gpt_lm",
                       **{"param.preset": "tiny", "param.workers": 1},
                       **({"hw.nodes": nodes} if nodes > 1 else {}))])
    return store.root


def test_the_report_sets_each_node_count_beside_its_one_node_twin(tmp_path):
    run_dir = scaled_run(tmp_path)
    done = run_cli("report", str(run_dir), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = (run_dir / "report.md").read_text()
    section = report.split("### Scaling across nodes", 1)[1].split("##", 1)[0]
    assert "| pair | here | 1 | 1 | 1,000 | 1.00x | 100.0% |  |  |" in section
    assert "| pair | here | 2 | 2 | 1,800 | 1.80x | 90.0% | 1.25 |  |" in section
    assert "| pair (2 nodes) | - | 3 |" in report and "| pair | - | 1.5 |" in report
    assert "pair hw.nodes=1" in report  # the best choices name the count


def test_advise_projects_a_node_count_not_measured_and_prices_every_node(tmp_path):
    """3,000,000 tokens in 20 minutes: 2 nodes (1,800 tokens/s) take 1,667 s, plus the 30 s
    their ranks took to meet. Amdahl over the node counts (serial fraction 1/9) gives 3 nodes
    2,455 tokens/s (1,252 s: too slow) and 4 nodes 3,000 (1,030 s): 4 nodes, projected, at
    4 x $1.50 an hour, the rendezvous counted in its start-up."""
    import json

    run_dir = scaled_run(tmp_path)
    done = run_cli("advise", str(run_dir), "--items", "3000000", "--deadline", "20m",
                   "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    (projected,) = [p for p in answer["projections"] if p["projected"]]
    assert projected["configuration"] == ("pair hw.nodes=4 (4 devices; Amdahl over node "
                                          "counts, serial fraction 0.111)")
    assert answer["picks"]["fastest"]["configuration"] == projected["configuration"]
    assert projected["items_per_s"] == pytest.approx(3000.0, rel=0.01)
    assert projected["usd_per_hour"] == pytest.approx(6.0)
    assert projected["startup_s"] == 30.0 and projected["time_s"] == pytest.approx(1030, 0.01)
    assert projected["cost_usd"] == pytest.approx(1030 / 3600 * 6.0, rel=0.01)
    two = next(p for p in answer["projections"] if p["configuration"] == "pair hw.nodes=2")
    one = next(p for p in answer["projections"] if p["configuration"] == "pair hw.nodes=1")
    assert two["startup_s"] == 30.0 and one["startup_s"] is None  # one node: nothing to meet


def test_the_dashboard_draws_scaling_across_nodes_and_names_each_count(tmp_path, browser):
    from tests.test_dashboard import table_rows

    url = f"sqlite:///{tmp_path / 'store.db'}"
    done = run_cli("db", "import", str(scaled_run(tmp_path)), "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    done = run_cli("dashboard", "-o", str(tmp_path / "site"), "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert browser.open(tmp_path / "site" / "workload-gpt_lm.html") == []
    labels = browser.js("return window.matrixCharts['throughput-gpt_lm'].data.labels;")
    assert sorted(labels) == ["pair/here hw.nodes=1", "pair/here hw.nodes=2"], labels
    lines = browser.js("return window.matrixCharts['nodes-gpt_lm'].data.datasets.map("
                       "d => [d.label, d.data.map(p => [p.x, p.y])]);")
    assert lines == [["pair/here (1 CPU a node)", [[1, 1000], [2, 1800]]],
                     ["pair/here (1 CPU a node): ideal", [[1, 1000], [2, 2000]]]], lines
    assert any("hw.nodes" in " ".join(row) for row in table_rows(browser, "rows-gpt_lm"))
    within = browser.js("return window.matrixCharts['scaling-gpt_lm'].data.datasets.map("
                        "d => d.label);")
    assert sorted(within) == ["pair/here hw.nodes=1 (CPU)", "pair/here hw.nodes=2 (CPU)"]
    browser.screenshot("dashboard-nodes")


def test_a_node_that_never_comes_fails_the_cell_naming_its_rendezvous_in_half_its_timeout(
        tmp_path):
    """Node 0 alone: its ranks wait for node 1 at most half the cell's timeout (30 s of 60),
    then the cell fails, naming the rendezvous, instead of ending `timeout` with no why."""
    from orchestrator.executors import NodePlace, execute
    from orchestrator.plan.cells import expand
    from orchestrator.registry.cell_run import ToolInfo
    from orchestrator.validate import load_spec

    text = PAIR.format(name="alone", nodes=2, steps=2, epochs=1).replace("timeout_s: 300",
                                                                          "timeout_s: 60")
    (cell,) = expand(load_spec(write(tmp_path / "m.yaml", text)))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    before = descendants()
    records = execute(cell, tmp_path / "run", ToolInfo("test", None), {},
                      node=NodePlace(2, 0, "127.0.0.1", port))
    ended = records[-1]
    assert ended.status.value == "failed", ended.error
    assert f"RendezvousError: the rendezvous at 127.0.0.1:{port} did not complete: the 2 " \
        "ranks of 2 nodes did not all join within 30 s" in ended.error
    assert ended.wall_s >= 30  # it waited its whole bound, not less
    assert left_behind(before) == set()


def test_a_workloads_check_without_nodes_is_still_asked_and_gpt_lm_counts_them(tmp_path):
    """checks.py's `problem(params, gpus)`, written before node counts, still refuses in
    one line; gpt_lm's counts the nodes' ranks: FSDP on 2 nodes of 1 rank shards."""
    from tests.test_user_workloads import make_folder, matrix

    folder = make_folder(tmp_path)
    write(folder / "checks.py", """
        def problem(params, gpus):
            return ("n", "n above 5000 is too much") if params["n"] > 5000 else None
        """)
    done = run_cli("validate", str(matrix(tmp_path)), cwd=tmp_path)
    assert done.returncode == 2 and "n above 5000 is too much (on box)" in done.stderr
    fsdp = PAIR.format(name="fsdp", nodes="[1, 2]", steps=2, epochs=1).replace(
        "workers: 1,", "workers: 1, dp_mode: fsdp,")
    done = run_cli("validate", str(write(tmp_path / "f.yaml", fsdp)), cwd=tmp_path)
    assert done.returncode == 2, done.stdout  # 1 node of 1 rank: nothing to shard
    assert "fsdp shards the model over the ranks" in done.stderr
    done = run_cli("validate", str(write(tmp_path / "g.yaml", fsdp.replace("[1, 2]", "2"))),
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_history_judges_a_bus_bandwidth_above_the_link_as_the_report_does(tmp_path):
    """Every path a figure takes: the store's rows are judged by the same bound."""
    from tests.test_impossible_rows import history
    from tests.test_judge import journal_cell, new_store

    store = new_store(tmp_path)
    for name, busbw in (("fast", 60.0), ("honest", 45.0)):
        journal_cell(store, name, "sleep", name, {"seconds": 1.0}, 5, "sample",
                     instance_type="p4d.24xlarge",
                     provenance={"nodes": 2, "world_size": 2, "net_busbw_gbs": busbw})
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert run_cli("db", "import", str(store.root), "--db", url, cwd=tmp_path).returncode == 0
    judged = {r["configuration"].split("/")[0]: r for r in history(url, tmp_path, "trend")}
    assert "all-reduce bus bandwidth 60 GB/s between nodes linked at 400 Gbit/s (50 GB/s; " \
        "1.2x)" in judged["fast"]["judgement"]
    assert "implausible" in judged["fast"]["flags"]
    assert judged["honest"]["judgement"] == "" and "implausible" not in judged["honest"]["flags"]


def test_a_nodes_container_gets_its_own_files_the_rendezvous_and_the_hosts_network(tmp_path):
    """Docker and Podman start a node of a cell across nodes on the host's network (its
    ranks reach the other nodes' over it), with the rendezvous and files of its own; every
    other container keeps no network at all."""
    from orchestrator.executors import NodePlace
    from orchestrator.executors.container import container_spec
    from orchestrator.executors.docker import _options
    from orchestrator.executors.podman.runner import run_arguments
    from orchestrator.plan.cells import expand
    from orchestrator.validate import load_spec

    (cell,) = expand(load_spec(write(tmp_path / "m.yaml", PAIR.format(
        name="boxes", nodes=2, steps=2, epochs=1))))
    node = container_spec(cell, tmp_path / "cells", "img", NodePlace(2, 1, "10.0.0.7", 29500))
    assert node.host_network and node.name.endswith(f"{cell.cell_id}.node1")
    assert node.command[-2:] == (f"/matrix/cells/{cell.cell_id}.node1.json",
                                 f"/matrix/cells/{cell.cell_id}.node1.out.jsonl")
    assert {k: node.environment[k] for k in ("NNODES", "NODE_RANK", "MASTER_ADDR",
                                              "MASTER_PORT")} == {
        "NNODES": "2", "NODE_RANK": "1", "MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "29500"}
    assert _options(node)["network_mode"] == "host"
    assert run_arguments(node)[:4] == ["--detach", "--init", "--network", "host"]
    alone = container_spec(cell, tmp_path / "cells", "img")
    assert not alone.host_network and "NODE_RANK" not in alone.environment
    assert _options(alone)["network_mode"] == "none"
    assert run_arguments(alone)[:4] == ["--detach", "--init", "--network", "none"]


def test_a_cpu_row_across_nodes_is_held_to_every_nodes_cores(tmp_path):
    """Without its node's estimate, a CPU row is held to what any CPU of its cores could do;
    a row across two nodes counts both nodes' cores: 1.5x one node's bound is possible on
    two, and impossible on one."""
    from orchestrator.report.judge import CPU_CORE_CEILING_FLOPS
    from tests.test_judge import GPT2, journal_cell, new_store, report_of
    from workloads.gpt_lm.flops import flops_per_item

    params = {**GPT2, "precision": "fp32"}
    one_node = CPU_CORE_CEILING_FLOPS["fp32"] * 2  # journal_cell's rows: cpu_count 2
    rate = 1.5 * one_node / flops_per_item(params)
    store = new_store(tmp_path)
    journal_cell(store, "two", "gpt_lm", "pair", params, rate, "token",
                 provenance={"nodes": 2, "devices_used": 2})
    journal_cell(store, "one", "gpt_lm", "box", params, rate, "token")
    _, rows = report_of(store, tmp_path)
    judged = rows.drop_duplicates("cell_id").set_index("cell_id")
    assert "implausible" in judged.loc["one", "flags"]
    assert "implausible" not in judged.loc["two", "flags"], judged.loc["two", "judgement"]
    assert judged.loc["two", "peak_note"] == "any CPU of 2 cores, on each of 2 nodes"
