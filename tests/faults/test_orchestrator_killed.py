"""`matrix run` killed with SIGKILL, then run again: nothing finished is lost or counted
twice, the rest runs, and the outputs equal an uninterrupted sweep's in their cells.

Kills land at fail points (orchestrator/failpoints.py: Ray just started, half-way through a
journal write, while the report renders), mid-cell (seen from outside: a worker runs), and
at seeded random times across the sweep.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from tests.conftest import cell_records, journal, run_cli
from tests.faults.test_signals import workers_of

pytestmark = pytest.mark.ray

MATRIX = """
name: killed
hardware: [{name: node-a, kind: local}]
stacks: [{name: here, executor: process}]
workloads:
  - {name: sleep, params: {seconds: [0.3, 0.4, 0.5, 0.6, 0.7, 0.8], steps: 2}}
"""
CELLS = 6


@pytest.fixture(scope="module")
def reference(ray_cluster, tmp_path_factory) -> Path:
    """The same matrix swept once without interruption."""
    folder = tmp_path_factory.mktemp("reference")
    (folder / "m.yaml").write_text(MATRIX)
    result = run_cli("run", "m.yaml", "-o", "run", "--ray-address", ray_cluster.address,
                     cwd=folder)
    assert result.returncode == 0, result.stderr
    return folder / "run"


def sweep(folder: Path, address: str | None, kill_at: str | None = None) -> subprocess.Popen:
    args = ["run", "m.yaml", "-o", "run"] + (["--ray-address", address] if address else [])
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("RAY_ADDRESS", None)
    env.pop("MATRIX_BENCH_KILL_AT", None)
    if kill_at:
        env["MATRIX_BENCH_KILL_AT"] = kill_at
    return subprocess.Popen([sys.executable, "-m", "orchestrator.cli", *args], cwd=folder,
                            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def kill_hard(process: subprocess.Popen) -> list[psutil.Process]:
    """SIGKILL the sweep; return what it had started, to check that none outlives it."""
    try:
        children = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    return children


def assert_none_left(children: list[psutil.Process], run_dir: Path) -> None:
    deadline = time.monotonic() + 20
    while [c for c in children if _running(c)] or workers_of(run_dir):
        assert time.monotonic() < deadline, \
            f"left behind: {[c.cmdline() for c in children if _running(c)]}"
        time.sleep(0.3)


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def ray_daemons() -> dict[int, str]:
    """The machine's live raylets and GCS servers (zombies left by others are no daemons),
    with their command lines."""
    found = {}
    for process in psutil.process_iter(["name", "cmdline"]):
        if process.info["name"] in ("raylet", "gcs_server") and _running(process):
            found[process.pid] = " ".join(process.info["cmdline"] or [])
    return found


def _starter_alive(cmdline: str) -> bool:
    """Whether the process that started this daemon's Ray still runs: Ray names a session
    after it (session_<date>_<time>_<pid>)."""
    started_by = re.search(r"session_[0-9_-]+_([0-9]+)\b", cmdline)
    return started_by is not None and psutil.pid_exists(int(started_by[1]))


def orphaned_ray_daemons(before: set[int]) -> list[str]:
    """Raylets and GCS servers started since `before` was taken that still run though the
    process that started their Ray is gone (the session cluster's are in `before`; a sweep
    another test runs meanwhile still runs its own). Ray's node agents are not counted: they
    notice their raylet's death within a minute."""
    deadline = time.monotonic() + 10
    while True:
        found = [cmdline[:160] for pid, cmdline in ray_daemons().items()
                 if pid not in before and not _starter_alive(cmdline)]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def finished_cells(run_dir: Path) -> dict[str, str]:
    """cell_id -> started_at of the cells the journal holds as ended."""
    if not (run_dir / "results.jsonl").exists():
        return {}
    return {c["cell_id"]: c["started_at"] for c in _cell_lines(run_dir)}


def _cell_lines(run_dir: Path) -> list[dict]:
    import json

    found = []
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # the torn line a kill left
        if record.get("record") == "cell":
            found.append(record)
    return found


def resume_and_check(folder: Path, address: str, kept: dict[str, str],
                     reference: Path) -> subprocess.CompletedProcess:
    """Run the same command to the end and check it against the uninterrupted sweep."""
    run_dir = folder / "run"
    result = run_cli("run", "m.yaml", "-o", "run", "--ray-address", address, cwd=folder)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    cells = cell_records(run_dir)  # every line parses: a torn tail was cut, not merged
    assert len(cells) == CELLS  # each cell once: the kept ones were not run again
    assert {c["status"] for c in cells} == {"ok"}
    after = {c["cell_id"]: c["started_at"] for c in cells}
    assert {k: after[k] for k in kept} == kept
    frame, expected = (pd.read_parquet(d / "results.parquet") for d in (run_dir, reference))
    assert sorted(frame["cell_id"].unique()) == sorted(expected["cell_id"].unique())
    assert len(frame) == len(expected)  # one row per measured epoch, none doubled
    assert report_cells(run_dir) == report_cells(reference)
    assert not list(run_dir.glob("**/.*.tmp")), "a temporary file of an atomic write is left"
    assert not (run_dir / "run.lock").exists()
    return result


def report_cells(run_dir: Path) -> tuple[str, list[str]]:
    """The report's cell count and the configurations of its sleep table."""
    text = (run_dir / "report.md").read_text()
    count = re.search(r"from (\d+) cells", text)
    assert count, text[:300]
    configs = sorted("|".join(line.split("|")[1:4]) for line in text.splitlines()
                     if line.startswith("| node-a | here |"))
    assert len(configs) == CELLS, text
    return count.group(1), configs


@pytest.mark.parametrize("kill_at", ["ray-start", "journal-append:3", "report"])
def test_killed_at_a_fail_point_resumes_to_the_uninterrupted_result(
        kill_at, ray_cluster, reference, tmp_path):
    (tmp_path / "m.yaml").write_text(MATRIX)
    # Ray start is the embedded Ray's; the other points use the session's cluster.
    address = None if kill_at == "ray-start" else ray_cluster.address
    daemons = set(ray_daemons())
    process = sweep(tmp_path, address, kill_at)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == -signal.SIGKILL, stderr
    run_dir = tmp_path / "run"
    assert_none_left([], run_dir)
    assert orphaned_ray_daemons(daemons) == []  # the embedded Ray's raylet and GCS died too
    kept = finished_cells(run_dir)
    expected_kept = {"ray-start": 0, "journal-append:3": 2, "report": CELLS}[kill_at]
    assert len(kept) == expected_kept
    result = resume_and_check(tmp_path, ray_cluster.address, kept, reference)
    if kill_at.startswith("journal-append"):
        assert "warning:" in result.stderr and "torn last line" in result.stderr


def test_killed_mid_cell_leaves_no_worker_and_resumes(ray_cluster, reference, tmp_path):
    (tmp_path / "m.yaml").write_text(MATRIX.replace("0.8]", "30]"))  # a long last cell
    run_dir = tmp_path / "run"
    process = sweep(tmp_path, ray_cluster.address)
    deadline = time.monotonic() + 60
    while len(finished_cells(run_dir)) < CELLS - 1 or not workers_of(run_dir):
        assert time.monotonic() < deadline, "the long cell never started"
        time.sleep(0.2)
    kept = finished_cells(run_dir)
    assert_none_left(kill_hard(process), run_dir)  # its worker died with it
    (tmp_path / "m.yaml").write_text(MATRIX)
    resume_and_check(tmp_path, ray_cluster.address, kept, reference)


def test_killed_at_random_moments_loses_and_doubles_nothing(ray_cluster, reference, tmp_path):
    (tmp_path / "m.yaml").write_text(MATRIX)
    run_dir = tmp_path / "run"
    rng = random.Random(8)  # seeded: a failure names the moments it used
    kept: dict[str, str] = {}
    for _ in range(3):
        delay = rng.uniform(0.5, 4.0)
        process = sweep(tmp_path, ray_cluster.address)
        time.sleep(delay)
        if process.poll() is not None:
            break  # it finished before this kill
        assert_none_left(kill_hard(process), run_dir)
        before = finished_cells(run_dir)
        assert {k: before[k] for k in kept} == kept, f"a kill at {delay:.2f} s lost a cell"
        kept = before
    resume_and_check(tmp_path, ray_cluster.address, kept, reference)
    assert len(journal(run_dir)) >= CELLS
