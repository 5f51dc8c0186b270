"""Docker faults on a second, real engine (tests/faults/docker2.py) that the tests stop:
the engine going away mid-sweep or before it, and a container a killed sweep left behind.

The stack image is built once on the machine's engine (test_docker.py reuses it) and
copied into the second engine with `docker save | docker load`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.executors.docker import LABEL_RUN
from orchestrator.images import render
from orchestrator.spec import load_spec
from tests.conftest import ImageEnv, cell_records, run_cli, write
from tests.faults.docker2 import SecondEngine, remove_second_engine, start_second_engine

pytestmark = pytest.mark.docker


def matrix_text(image_env: ImageEnv, name: str, workload: str) -> str:
    return f"""
        name: {name}
        hardware: [{{name: box, kind: local}}]
        stacks: [{image_env.stack("torch-cpu")}]
        workloads: [{workload}]
        """ + image_env.images_section()


@pytest.fixture(scope="module")
def engine(image_env: ImageEnv, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[SecondEngine]:
    """The second engine, holding the torch-cpu stack image of this code."""
    root = tmp_path_factory.mktemp("engine2")
    matrix = write(root / "m.yaml", matrix_text(image_env, "image", "{name: sleep}"))
    built = run_cli("build", str(matrix), cwd=root)  # on the machine's engine, once
    assert built.returncode == 0, built.stdout + built.stderr
    spec = load_spec(matrix)
    tag = render(spec.stacks[0], spec.images).tag
    second = start_second_engine()
    try:
        second.load(tag)
        yield second
    finally:
        remove_second_engine(second)


def sweep(matrix: Path, engine: SecondEngine) -> subprocess.Popen:
    env = {**os.environ, "DOCKER_HOST": engine.host, "COLUMNS": "200"}
    return subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "run", str(matrix),
                             "-o", str(matrix.parent / "run"), "--no-ray"],
                            cwd=matrix.parent, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def wait_for(condition, what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def running(engine: SecondEngine, run: str) -> list[str]:
    listed = engine.docker("ps", "-q", "--filter", f"label={LABEL_RUN}={run}", text=True,
                           timeout=30)
    return listed.stdout.split()


@pytest.mark.parametrize("how", ["stopped", "crashed"])
def test_the_engine_going_away_mid_sweep_makes_cells_executor_unavailable(
        how, engine, image_env, tmp_path):
    # Stopped, the engine kills the running container after its 10 s stop grace: that
    # cell is long. Crashed, the API is gone at once. Either way it is the engine's fault.
    seconds = "[2, 30, 30.1]" if how == "stopped" else "[2, 3, 3.1, 3.2]"
    matrix = write(tmp_path / "m.yaml", matrix_text(
        image_env, "engine-gone", f"{{name: sleep, params: {{seconds: {seconds}}}}}"))
    run_dir = tmp_path / "run"
    process = sweep(matrix, engine)
    wait_for(lambda: (run_dir / "results.jsonl").exists() and running(engine, "engine-gone"),
             "the second cell's container never ran")
    engine.stop(crash=how == "crashed")
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stdout + stderr
    assert "Traceback" not in stderr
    cells = sorted(cell_records(run_dir), key=lambda c: c["param.seconds"])
    assert len({c["cell_id"] for c in cells}) == len(cells) == seconds.count(",") + 1
    assert cells[0]["status"] == "ok"
    assert {c["status"] for c in cells[1:]} == {"executor_unavailable"}, cells
    assert "went away mid-cell" in cells[1]["error"], cells[1]
    assert (run_dir / "report.md").exists()
    if how == "stopped":
        engine.start()
        return

    # Still down: the next sweep refuses the cells the same way, at once.
    again = run_cli("run", str(matrix), "-o", str(run_dir), "--no-ray", cwd=tmp_path,
                    env={"DOCKER_HOST": engine.host})
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    latest = {c["cell_id"]: c["status"] for c in cell_records(run_dir)}
    assert sorted(latest.values()) == ["executor_unavailable"] * 3 + ["ok"]

    engine.start()  # back: the same command runs the rest, and only the rest
    done = run_cli("run", str(matrix), "-o", str(run_dir), "--no-ray", cwd=tmp_path,
                   env={"DOCKER_HOST": engine.host})
    assert done.returncode == 0, done.stdout + done.stderr
    ok = [c for c in cell_records(run_dir) if c["status"] == "ok"]
    assert len(ok) == len({c["cell_id"] for c in ok}) == 4
    assert [c["started_at"] for c in ok if c["cell_id"] == cells[0]["cell_id"]] == \
        [cells[0]["started_at"]]  # not run again
    # The others' third attempt: mid-sweep, with the engine down, and now.
    assert sorted(c["attempts"] for c in ok) == [1, 3, 3, 3]


def test_a_container_left_by_a_killed_sweep_is_removed_by_the_next(engine, image_env,
                                                                    tmp_path):
    matrix = write(tmp_path / "m.yaml", matrix_text(
        image_env, "left-behind", "{name: sleep, params: {fault: hang}, timeout_s: 5}"))
    process = sweep(matrix, engine)
    wait_for(lambda: running(engine, "left-behind"), "the cell's container never ran")
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    (left,) = running(engine, "left-behind")  # nobody is left to remove it
    again = run_cli("run", str(matrix), "-o", str(tmp_path / "run"), "--no-ray",
                    cwd=tmp_path, env={"DOCKER_HOST": engine.host})
    assert again.returncode == 0, again.stderr
    assert "removed 1 container(s) a previous sweep left behind" in again.stdout
    assert left not in engine.containers(f"{LABEL_RUN}=left-behind")
    assert engine.containers(f"{LABEL_RUN}=left-behind") == []  # the new one is gone too
    (cell,) = cell_records(tmp_path / "run")
    assert cell["status"] == "timeout"


def test_worker_faults_in_a_container_get_the_same_statuses(engine, image_env, tmp_path):
    matrix = write(tmp_path / "m.yaml", matrix_text(
        image_env, "container-faults",
        "{name: sleep, params: {seconds: 0.2, fault: [raise, abort, kill, garbage]}}"))
    done = run_cli("run", str(matrix), "-o", str(tmp_path / "run"), "--no-ray", cwd=tmp_path,
                   env={"DOCKER_HOST": engine.host})
    assert done.returncode == 0, done.stderr
    statuses = {c["param.fault"]: c["status"] for c in cell_records(tmp_path / "run")}
    assert statuses == {"raise": "failed", "abort": "crashed", "kill": "crashed",
                        "garbage": "invalid_output"}
