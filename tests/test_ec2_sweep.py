"""EC2 sweeps end to end, on moto and the loopback Ray cluster (tests/aws_env.py): the
cluster is launched with Ray's AWS provider, the head driver runs as a real Ray job, the
follower merges its records, the budget stops cells, and no instance outlives a sweep."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

import boto3
import pytest

from orchestrator.plan.cells import expand
from orchestrator.providers.aws.cluster import Clients, prepare
from orchestrator.providers.ray_head.driver import DONE_LINE, RECORDS_LINE, DriverInput, Teardown
from orchestrator.providers.ray_head.follower import JobFollower, stage_job
from orchestrator.registry.cell_run import Cell, ToolInfo
from orchestrator.results.records import CellRecord
from orchestrator.validate import load_spec
from tests.aws_env import LoopbackLauncher, Proxy, instances_of, live, moto_account
from tests.conftest import PROJECT, cell_records, journal, write

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

TOOL = ToolInfo(version="test", git_revision=None)


@pytest.fixture
def aws(moto_server):
    ec2 = boto3.client("ec2", region_name="us-east-1")
    ami = moto_account(ec2, boto3.client("iam", region_name="us-east-1"))
    return ec2, ami


def with_aws(path: Path, ami: str, text: str) -> Path:
    """A matrix file whose aws section launches into moto."""
    write(path, text)
    path.write_text(path.read_text() + f"aws: {{region: us-east-1, ami: {ami}, instance_profile: "
                    "matrix-bench-node, ssh_cidr: 203.0.113.7/32, max_workers: 1}\n")
    return path


def driver_cells(tmp_path: Path, ami: str, seconds: float, hardware: str = "[node-a, node-b]",
                 repeats: int = 2) -> tuple[list[Cell], Path]:
    """Cells of the sleep workload on the cluster's hw:node-a and hw:node-b, in the process
    executor (the head driver runs whatever executor a cell has)."""
    matrix = with_aws(tmp_path / "driver.yaml", ami, f"""
        name: driver-run
        hardware:
          - {{name: node-a, kind: ec2, instance_type: c5.xlarge}}
          - {{name: node-b, kind: ec2, instance_type: c5.4xlarge}}
        stacks: [{{name: here, executor: process}}]
        workloads: [{{name: sleep, params: {{seconds: {seconds}}}, epochs: 1}}]
        include: []
        exclude: []
        repeats: {repeats}
        """)
    spec = load_spec(matrix)
    cells = [c for c in expand(spec) if c.hardware.name in hardware]
    return cells, matrix


def launched(tmp_path: Path, matrix: Path, run_id: str, ray_cluster) -> LoopbackLauncher:
    """The run's key pair, config and instances, as `matrix run` makes them."""
    launcher = LoopbackLauncher(ray_cluster.dashboard_url)
    files = prepare(load_spec(matrix), run_id, tmp_path, Clients.for_region("us-east-1"))
    launcher.up(files.config)
    return launcher


def submit(follower: JobFollower, tmp_path: Path, driver_input: DriverInput) -> str:
    staging = tmp_path / "job"
    staging.mkdir()
    return follower.submit(stage_job(staging, driver_input), sys.executable)


def wait_terminal(follower: JobFollower, job: str, timeout: float = 120) -> str:
    client = follower._connect()
    deadline = time.monotonic() + timeout
    while not client.get_job_status(job).is_terminal():
        assert time.monotonic() < deadline, client.get_job_logs(job)[-2000:]
        time.sleep(0.5)
    return str(client.get_job_logs(job))


def test_the_head_tears_the_cluster_down_when_no_follower_takes_the_results(
        aws, ray_cluster, tmp_path, monkeypatch):
    ec2, ami = aws
    monkeypatch.setenv("HOME", str(tmp_path))  # the run's key file goes to ~/.ssh
    cells, matrix = driver_cells(tmp_path, ami, seconds=0.2, repeats=1)
    launched(tmp_path, matrix, "alone", ray_cluster)
    assert len(live(instances_of(ec2, "alone"))) == 3  # the head and one node per type
    follower = JobFollower(lambda: ray_cluster.dashboard_url, warn=print,
                           forwarded_env=("AWS_ENDPOINT_URL",))
    job = submit(follower, tmp_path, DriverInput(
        run_id="alone", run_root=str(tmp_path / "nodes"), cells=cells, images={}, tool=TOOL,
        teardown=Teardown(function="orchestrator.providers.aws.cleanup:tear_down_run",
                          args={"region": "us-east-1", "run": "alone"}),
        follower_grace_s=1))
    log = wait_terminal(follower, job)  # nobody follows: the user's machine went away
    assert log.count(RECORDS_LINE) == len(cells) and DONE_LINE in log
    assert "tearing the cluster down" in log
    assert live(instances_of(ec2, "alone")) == []
    assert ec2.describe_key_pairs(
        Filters=[{"Name": "key-name", "Values": ["matrix-bench-alone"]}])["KeyPairs"] == []


def test_a_spend_that_reaches_the_budget_stops_new_cells(aws, ray_cluster, tmp_path):
    _, ami = aws
    # $1 per second of node-a; each 3 s cell is estimated at $3. A cell's wall is its 3 s
    # and the worker's start, about 0.2 s here and 1.1 s beside two busy loops: the second
    # starts while the first's wall is under 5.5 s, the third never (6 s and more spent).
    cells, _ = driver_cells(tmp_path, ami, seconds=3.0, hardware="[node-a]", repeats=4)
    follower = JobFollower(lambda: ray_cluster.dashboard_url, warn=print, poll_s=0.5)
    job = submit(follower, tmp_path, DriverInput(
        run_id="budget", run_root=str(tmp_path / "nodes"), cells=cells,
        images={}, tool=TOOL, budget_usd=8.5, usd_per_hour={"node-a": 3600.0},
        estimate_s={c.cell_id: 3.0 for c in cells}, follower_grace_s=60))
    try:
        ended = [records[-1] for _, records in follower.follow(job, cells)]
    finally:
        follower.stop(job)
    assert all(isinstance(r, CellRecord) for r in ended)
    statuses = Counter(r.status.value for r in ended if isinstance(r, CellRecord))
    assert statuses == {"ok": 2, "budget_stopped": 2}, [(r.status, r.wall_s) for r in ended]
    stopped = [r for r in ended if isinstance(r, CellRecord) and r.status == "budget_stopped"]
    assert all("budget_usd 8.5 reached" in str(r.error) for r in stopped)


def test_the_follower_catches_up_after_a_lost_connection(aws, ray_cluster, tmp_path):
    _, ami = aws
    cells, _ = driver_cells(tmp_path, ami, seconds=1.0, repeats=3)
    proxy = Proxy(urlparse(ray_cluster.dashboard_url).port or 0)
    warnings: list[str] = []
    follower = JobFollower(lambda: f"http://127.0.0.1:{proxy.port}", warn=warnings.append,
                           poll_s=0.5)
    job = submit(follower, tmp_path, DriverInput(
        run_id="lost", run_root=str(tmp_path / "nodes"), cells=cells,
        images={}, tool=TOOL, follower_grace_s=60))
    taken: list[str] = []
    try:
        for cell, records in follower.follow(job, cells):
            taken.append(cell.cell_id)
            assert isinstance(records[-1], CellRecord) and records[-1].status == "ok"
            if len(taken) == 1:  # cut off for 4 s while polling; the head goes on meanwhile
                proxy.cut()
                threading.Timer(4, proxy.restore).start()
    finally:
        follower.stop(job)
    assert sorted(taken) == sorted(c.cell_id for c in cells)  # each once, none lost
    assert any("lost the connection" in w for w in warnings)
    assert any("reconnected" in w for w in warnings)


@pytest.fixture
def sweep_matrix(aws, image_env, registry, tmp_path):
    """A matrix with two EC2 hardware entries (the loopback nodes) and the local machine."""
    _, ami = aws

    def make(name: str, seconds: float, faults: str, budget: float = 50) -> Path:
        return with_aws(tmp_path / f"{name}.yaml", ami, f"""
            name: {name}
            images: {{locks: {image_env.locks}, wheelhouse: {image_env.wheelhouse},
                      registry: {registry}/matrix-bench}}
            hardware:
              - {{name: node-a, kind: ec2, instance_type: c5.xlarge}}
              - {{name: node-b, kind: ec2, instance_type: c5.4xlarge, spot: true}}
              - {{name: laptop, kind: local}}
            stacks:
              - {{name: here, executor: process}}
              - {image_env.stack('torch-cpu')}
            workloads:
              - {{name: sleep, params: {{seconds: {seconds}, fault: {faults}}}, epochs: 1}}
            exclude:
              - {{hardware: laptop, stack: torch-cpu}}
              - {{hardware: laptop, params: {{fault: raise}}}}
            budget_usd: {budget}
            """)
    return make


def run_sweep_process(matrix: Path, ray_cluster, tmp_path: Path) -> subprocess.Popen[str]:
    # MKL_NUM_THREADS: a thread setting the cluster's nodes lack, for the head driver to pass on
    env = {**dict(__import__("os").environ), "HOME": str(tmp_path), "COLUMNS": "200",
           "MKL_NUM_THREADS": "1"}
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen(
        [sys.executable, str(PROJECT / "tests" / "ec2_sweep_main.py"), str(matrix),
         ray_cluster.dashboard_url], cwd=tmp_path, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def assert_nothing_left(ec2, run: str, tmp_path: Path) -> None:
    instances = instances_of(ec2, run)
    assert len(instances) == 3, instances  # the head and one node per EC2 hardware entry
    assert live(instances) == []
    name = f"matrix-bench-{run}"
    assert ec2.describe_key_pairs(Filters=[{"Name": "key-name", "Values": [name]}]
                                  )["KeyPairs"] == []
    assert ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": [name]}]
                                        )["SecurityGroups"] == []
    assert not (tmp_path / ".ssh" / f"{name}.pem").exists()
    shutil.rmtree(Path.home() / "matrix-bench" / "runs" / run, ignore_errors=True)


def test_a_sweep_launches_runs_prices_and_leaves_no_instance(
        aws, sweep_matrix, ray_cluster, tmp_path):
    ec2, _ = aws
    matrix = sweep_matrix("ec2-sweep", seconds=0.5, faults="[none, raise]")
    process = run_sweep_process(matrix, ray_cluster, tmp_path)
    out, _ = process.communicate(timeout=600)
    assert process.returncode == 0, out
    run_dir = tmp_path / "reports" / "ec2-sweep"
    cells = cell_records(run_dir)
    assert len(cells) == len({c["cell_id"] for c in cells}) == 5, out  # each cell once
    by_key = {(c["hardware"], c["param.fault"]): c for c in cells}
    assert by_key[("laptop", "none")]["status"] == "ok"  # the local group, beside the cluster
    for node in ("node-a", "node-b"):
        assert by_key[(node, "none")]["status"] == "ok", out
        assert by_key[(node, "raise")]["status"] == "failed"
        assert "injected failure" in by_key[(node, "raise")]["log_tail"]
        assert by_key[(node, "none")]["provision_s"] > 0  # the cluster's boot, for advise
    assert "provision_s" not in by_key[("laptop", "none")]  # nothing boots for it
    provenance = {r["cell_id"]: r for r in journal(run_dir) if r["record"] == "provenance"}
    for node, node_id in ray_cluster.node_of_hw.items():
        assert by_key[(node, "none")]["node_id"] == node_id  # on the node offering hw:<name>
        row = provenance[by_key[(node, "none")]["cell_id"]]
        assert row["price_per_hour_usd"] > 0 and row["price_source"]
        assert row["instance_type"] == ("c5.xlarge" if node == "node-a" else "c5.4xlarge")
        # the cell computed on the user's thread settings, which the head driver passed on
        assert row["thread_settings"]["MKL_NUM_THREADS"] == "1", row
    assert "price: node-a $" in out and "tearing down the cluster of run ec2-sweep" in out
    spot = [i for i in instances_of(ec2, "ec2-sweep") if i.get("InstanceLifecycle") == "spot"]
    assert [i["InstanceType"] for i in spot] == ["c5.4xlarge"]
    assert_nothing_left(ec2, "ec2-sweep", tmp_path)


def test_sigint_mid_sweep_tears_the_cluster_down(aws, sweep_matrix, ray_cluster, tmp_path,
                                                 image_env):
    ec2, _ = aws
    matrix = sweep_matrix("ec2-interrupted", seconds=120, faults="none")
    process = run_sweep_process(matrix, ray_cluster, tmp_path)
    lines: list[str] = []
    submitted = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if "head driver: Ray job" in line:
                submitted.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert submitted.wait(300), "".join(lines)
    time.sleep(8)  # the cells are running in their containers on the nodes
    process.send_signal(signal.SIGINT)
    started = time.monotonic()
    process.wait(timeout=180)
    reader.join(timeout=10)
    out = "".join(lines)
    assert process.returncode == 130, out
    assert time.monotonic() - started < 120, out
    assert "interrupted" in out and "tearing down the cluster" in out
    assert_nothing_left(ec2, "ec2-interrupted", tmp_path)
    left = image_env.client.containers.list(
        all=True, filters={"label": "matrix-bench.run=ec2-interrupted"})
    assert left == []


def test_a_plan_over_budget_launches_nothing_and_says_by_how_much(
        aws, sweep_matrix, ray_cluster, tmp_path, monkeypatch):
    ec2, _ = aws
    # A store of its own: earlier tests' runs of these cells would be the estimate (about
    # 1 s each, under any budget); with none, each cell's estimate is its timeout.
    monkeypatch.setenv("MATRIX_BENCH_DB", f"sqlite:///{tmp_path / 'empty.db'}")
    matrix = sweep_matrix("ec2-over", seconds=0.5, faults="none", budget=0.01)
    process = run_sweep_process(matrix, ray_cluster, tmp_path)
    out, _ = process.communicate(timeout=300)
    assert process.returncode == 2, out
    assert "over budget_usd 0.01 by $" in out and "--allow-over-budget" in out
    assert instances_of(ec2, "ec2-over") == []
    assert ec2.describe_key_pairs()["KeyPairs"] == []
