"""Docker faults on a second, real engine (tests/faults/docker2.py) that the tests stop:
the engine going away mid-sweep, mid-build or before the sweep, an engine that hangs, a
container that a killed sweep left behind, and one that an earlier attempt of the cell left.

`matrix run --no-ray` reaches the second engine as a user points it at one: DOCKER_HOST.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orchestrator.executors import CellRun
from orchestrator.executors.docker import LABEL_CELL, LABEL_RUN, run_cell
from orchestrator.images.engine import docker_client
from orchestrator.images.stack_image import find_image, render
from orchestrator.plan.cells import expand
from orchestrator.registry.cell_run import ToolInfo
from orchestrator.results.records import Status
from orchestrator.validate import load_spec
from tests.conftest import ImageEnv, cell_records, run_cli, write
from tests.faults.docker2 import (
    STACK,
    SecondEngine,
    second_engine_fixture,  # noqa: F401 - the session's engine2
    stack_matrix,
)

pytestmark = pytest.mark.docker


@pytest.fixture
def engine(engine2: SecondEngine) -> Iterator[SecondEngine]:
    """The second engine, running and answering (a test before may have left it stopped, or
    failed while it was starting)."""
    if engine2.process is not None and not engine2.answers():
        engine2.stop(crash=True)
    if engine2.process is None:
        engine2.start()
    yield engine2


@pytest.fixture
def sweep(engine: SecondEngine) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start `matrix run` on the second engine in the background; killed if a test fails."""
    started: list[subprocess.Popen[str]] = []

    def start(matrix: Path, env_given: dict[str, str] | None = None) -> subprocess.Popen[str]:
        env = {**os.environ, "DOCKER_HOST": engine.host, "COLUMNS": "200", **(env_given or {})}
        started.append(subprocess.Popen(
            [sys.executable, "-m", "orchestrator.cli", "run", str(matrix),
             "-o", str(matrix.parent / "run"), "--no-ray"], cwd=matrix.parent, env=env,
            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        return started[-1]

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.communicate()


def rerun(matrix: Path, engine: SecondEngine) -> subprocess.CompletedProcess[str]:
    """The same command again, to its end."""
    done = run_cli("run", str(matrix), "-o", str(matrix.parent / "run"), "--no-ray",
                   cwd=matrix.parent, env={"DOCKER_HOST": engine.host}, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def wait_for(condition: Callable[[], object], what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


@pytest.mark.parametrize("how", ["stopped", "crashed"])
def test_the_engine_going_away_mid_sweep_makes_cells_executor_unavailable(
        how, engine, sweep, image_env, tmp_path):
    matrix = write(tmp_path / "m.yaml", stack_matrix(
        image_env, "engine-gone", "{name: sleep, params: {seconds: [2, 2.5, 3, 3.5]}}"))
    run_dir, label = tmp_path / "run", f"{LABEL_RUN}=engine-gone"
    process = sweep(matrix)
    wait_for(lambda: (run_dir / "results.jsonl").exists()
             and engine.containers(label, running_only=True),
             "the second cell's container never ran")
    engine.stop(crash=how == "crashed")
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0 and "Traceback" not in stderr, stdout + stderr
    cells = cell_records(run_dir)  # in the order they ended
    assert len({c["cell_id"] for c in cells}) == len(cells) == 4
    assert [c["status"] for c in cells] == ["ok"] + ["executor_unavailable"] * 3, cells
    assert "mid-cell" in cells[1]["error"] and engine.host in cells[1]["error"], cells[1]
    assert all(f"no Docker engine answers at {engine.host}" in c["error"] for c in cells[2:])
    assert (run_dir / "report.md").exists()

    if how == "crashed":  # still down: the next sweep refuses its cells the same way, at once
        down = rerun(matrix, engine)
        assert down.returncode == 0, down.stdout + down.stderr
        latest = cell_records(run_dir)[4:]
        assert [c["status"] for c in latest] == ["executor_unavailable"] * 3
        assert all(f"no Docker engine answers at {engine.host}" in c["error"] for c in latest)

    engine.start()  # back: the same command runs the rest, and only the rest
    done = rerun(matrix, engine)
    assert done.returncode == 0, done.stdout + done.stderr
    ok = [c for c in cell_records(run_dir) if c["status"] == "ok"]
    assert len(ok) == len({c["cell_id"] for c in ok}) == 4
    assert [c["started_at"] for c in ok if c["cell_id"] == cells[0]["cell_id"]] == \
        [cells[0]["started_at"]]  # not run again
    tries = 3 if how == "crashed" else 2  # mid-sweep, (with the engine down,) and now
    assert sorted(c["attempts"] for c in ok) == [1, tries, tries, tries]
    assert engine.containers(label) == []


def sweep_with_a_running_container(sweep: Callable[..., subprocess.Popen[str]],
                                   engine: SecondEngine, image_env: ImageEnv,
                                   tmp_path: Path, run: str, workload: str
                                   ) -> tuple[subprocess.Popen[str], str, str]:
    """A sweep of one cell on the second engine, once its container runs: (the sweep, the
    run's label, the container's id)."""
    matrix = write(tmp_path / "m.yaml", stack_matrix(image_env, run, workload))
    label = f"{LABEL_RUN}={run}"
    process = sweep(matrix)
    wait_for(lambda: engine.containers(label, running_only=True),
             "the cell's container never ran")
    (container,) = engine.containers(label, running_only=True)
    return process, label, container


def test_a_container_killed_from_outside_is_crashed_with_its_signal(
        engine, sweep, image_env, tmp_path):
    process, label, container = sweep_with_a_running_container(
        sweep, engine, image_env, tmp_path, "killed-outside",
        "{name: sleep, params: {seconds: 60}}")
    assert engine.docker("kill", container).returncode == 0  # as an operator would
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0 and "Traceback" not in stderr, stdout + stderr
    (cell,) = cell_records(tmp_path / "run")
    assert cell["status"] == "crashed", cell  # the engine is fine: not executor_unavailable
    assert cell["error"] == "worker killed by SIGKILL"
    assert engine.answers() and engine.containers(label) == []


def test_a_hung_engine_fails_its_cell_in_seconds_not_at_the_cell_timeout(
        engine, sweep, image_env, tmp_path):
    matrix = write(tmp_path / "m.yaml", stack_matrix(
        image_env, "engine-hung", "{name: sleep, params: {seconds: [2, 2.5]}, timeout_s: 300}"))
    run_dir = tmp_path / "run"
    process = sweep(matrix)
    wait_for(lambda: (run_dir / "results.jsonl").exists()
             and engine.containers(f"{LABEL_RUN}=engine-hung", running_only=True),
             "the second cell's container never ran")
    with engine.hung():
        stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0 and "Traceback" not in stderr, stdout + stderr
    first, hung = cell_records(run_dir)
    assert first["status"] == "ok" and hung["status"] == "executor_unavailable", hung
    assert "stopped answering mid-cell" in hung["error"] and hung["wall_s"] < 60, hung


def test_a_container_left_by_a_killed_sweep_is_removed_by_the_next(
        engine, sweep, image_env, tmp_path):
    process, label, left = sweep_with_a_running_container(
        sweep, engine, image_env, tmp_path, "left-behind",
        "{name: sleep, params: {fault: hang}, timeout_s: 5}")
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    assert engine.containers(label, running_only=True) == [left]  # nobody left to remove it
    labels = json.loads(engine.docker("inspect", "--format", "{{json .Config.Labels}}",
                                      left).stdout)
    again = rerun(tmp_path / "m.yaml", engine)  # the matrix the helper wrote
    assert again.returncode == 0, again.stdout + again.stderr
    assert "removed 1 container(s) a previous sweep left behind" in again.stdout
    assert engine.containers(label) == []  # the leftover, and the new cell's own
    (cell,) = cell_records(tmp_path / "run")
    assert cell["status"] == "timeout"  # the sweep went on to the end
    assert labels[LABEL_RUN] == "left-behind" and labels[LABEL_CELL] == cell["cell_id"]


def start_a_build(sweep: Callable[..., subprocess.Popen[str]], image_env: ImageEnv,
                  tmp_path: Path) -> subprocess.Popen[str]:
    """A sweep whose stack must be built, once the build's pip step is running. The image
    installs with pip here: its install of torch runs for seconds, long enough to be stopped
    mid-step, where uv's may be over before the test can act."""
    locks = tmp_path / "locks"  # the same pins under another tag: the build starts
    shutil.copytree(image_env.locks, locks)
    with open(locks / f"{STACK}.txt", "a") as lock:
        lock.write("# the same pins, another image\n")
    matrix = write(tmp_path / "m.yaml", stack_matrix(
        image_env, "build-gone", "{name: sleep, params: {seconds: [1, 2]}}",
        f"images: {{locks: {locks}, wheelhouse: {image_env.wheelhouse}}}\n"))
    build_log = tmp_path / "run" / "build" / f"{STACK}.log"
    process = sweep(matrix, {"MATRIX_BENCH_IMAGE_INSTALLER": "pip"})
    wait_for(lambda: build_log.exists() and "Collecting" in build_log.read_text(),
             "the build never reached pip")
    return process


def build_stopped_cells(process: subprocess.Popen[str], tmp_path: Path) -> list[dict]:
    """The cells of a sweep whose build the engine lost, once it has ended cleanly."""
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0 and "Traceback" not in stderr, stdout + stderr
    cells = cell_records(tmp_path / "run")
    assert [c["status"] for c in cells] == ["executor_unavailable"] * 2, cells
    assert all("Collecting" in cell["log_tail"] for cell in cells)
    return cells


def test_the_engine_stopping_mid_build_gives_executor_unavailable_rows_with_the_build_log(
        engine, sweep, image_env, tmp_path):
    process = start_a_build(sweep, image_env, tmp_path)
    engine.stop()
    # A stopping engine either drops the build's stream, or first kills the running step
    # and reports its exit 137 as the step's error: the engine's doing either way.
    lost = re.compile(rf"the Docker engine at {re.escape(engine.host)} (stopped answering|"
                      rf"stopped the build step) while preparing the image of {STACK}")
    for cell in build_stopped_cells(process, tmp_path):
        assert lost.search(cell["error"]), cell["error"]


def test_a_build_step_the_engine_stops_is_not_the_stacks_failure(
        engine, sweep, image_env, tmp_path):
    process = start_a_build(sweep, image_env, tmp_path)
    (step,) = engine.docker("ps", "-q").stdout.split()  # the pip step's container
    engine.docker("kill", step)
    for cell in build_stopped_cells(process, tmp_path):
        assert (f"the Docker engine at {engine.host} stopped the build step while preparing "
                f"the image of {STACK} (signals 9)") in cell["error"], cell["error"]
        assert "returned a non-zero code: 137" in cell["error"]  # the step's own words
    assert engine.answers()


def test_a_container_an_earlier_attempt_left_does_not_block_the_cell(
        engine, image_env, tmp_path, monkeypatch):
    # `matrix run` removes its run's leftovers on its own engine; a Ray node's engine keeps
    # them, and the cell's next attempt there finds its container name taken.
    spec = load_spec(write(tmp_path / "m.yaml", stack_matrix(
        image_env, "same-name", "{name: sleep, params: {seconds: 0.2}}")))
    (cell,) = expand(spec)
    tag = render(spec.stacks[0], spec.images).tag
    name = f"matrix-{cell.run}-{cell.cell_id}"
    made = engine.docker("create", "--name", name, "--label", f"{LABEL_RUN}={cell.run}",
                         tag, "sleep", "60")
    assert made.returncode == 0, made.stderr
    monkeypatch.setenv("DOCKER_HOST", engine.host)
    image = find_image(docker_client(), STACK, tag)
    records = run_cell(CellRun(cell, tmp_path / "run", ToolInfo("test", None), image))
    assert records[-1].status is Status.OK, records[-1]
    assert engine.containers(f"{LABEL_RUN}={cell.run}") == []


def test_worker_faults_in_a_container_get_the_same_statuses(engine, image_env, tmp_path):
    matrix = write(tmp_path / "m.yaml", stack_matrix(
        image_env, "container-faults",
        "{name: sleep, params: {seconds: 0.2, fault: [raise, abort, kill, garbage]}}"))
    done = rerun(matrix, engine)
    assert done.returncode == 0, done.stderr
    statuses = {c["param.fault"]: c["status"] for c in cell_records(tmp_path / "run")}
    assert statuses == {"raise": "failed", "abort": "crashed", "kill": "crashed",
                        "garbage": "invalid_output"}
