"""The registries are the only seams: an executor defined here, registered here, runs a
sweep end to end with no change to the orchestrator's code."""

from __future__ import annotations

import ast
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator import executors
from orchestrator.executors import ExecutorKind, executor_names
from orchestrator.executors.outcome import CellFiles, ToolInfo, WorkerExit, records_for
from orchestrator.matrix import Cell
from orchestrator.records import Record
from orchestrator.sweep import SweepOptions, run_sweep
from tests.conftest import PROJECT, journal, run_cli


class NicedExecutor:
    """A user's executor: the worker at the lowest CPU priority (`nice -n 19`), through
    the building blocks every executor shares (the cell's files, the worker, the outcome)."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.cleaned: list[str] = []

    def run_cell(self, cell: Cell, run_root: Path, tool: ToolInfo, image: object,
                 node_id: str | None, on_start: Callable[[], None] | None) -> list[Record]:
        files = CellFiles.prepare(cell, run_root)
        if on_start is not None:
            on_start()
        start = time.perf_counter()
        with open(files.log, "wb") as log:
            try:
                returncode: int | None = subprocess.run(
                    ["nice", "-n", "19", sys.executable, "-m", "orchestrator.worker",
                     str(files.cell), str(files.out)], stdout=log, stderr=subprocess.STDOUT,
                    cwd=PROJECT, timeout=cell.timeout_s, check=False).returncode
                timed_out = False
            except subprocess.TimeoutExpired:
                returncode, timed_out = None, True
        self.ran.append(cell.cell_id)
        exit = WorkerExit(returncode=returncode, timed_out=timed_out,
                          started_at=files.started_at, wall_s=time.perf_counter() - start,
                          node_id=f"niced:{node_id}")
        return records_for(cell, exit, files.out, files.log, tool, {})

    def remove_leftovers(self, run: str) -> int:
        self.cleaned.append(run)
        return 0

    def stop_cell(self, cell: Cell) -> None:
        pass


MATRIX = """
name: seams
hardware: [{name: box, kind: local}]
stacks: [{name: low-priority, executor: niced}]
workloads: [{name: sleep, params: {seconds: 0.1, steps: [1, 2]}}]
"""


@pytest.fixture
def niced(monkeypatch):
    executor = NicedExecutor()
    monkeypatch.setitem(executors._REGISTRY, "niced",
                        ExecutorKind("niced", needs_image=False, load=lambda: executor))
    return executor


def test_an_executor_registered_outside_the_orchestrator_runs_a_sweep(niced, matrix_file,
                                                                      tmp_path):
    assert "niced" in executor_names()
    summary = run_sweep(matrix_file(MATRIX), SweepOptions(output=tmp_path / "run",
                                                          no_ray=True), Console(quiet=True))
    assert summary.statuses == {"ok": 2}
    cells = [r for r in journal(tmp_path / "run") if r["record"] == "cell"]
    assert sorted(niced.ran) == sorted(r["cell_id"] for r in cells)
    assert all(r["node_id"].startswith("niced:") and r["stack"] == "low-priority"
               for r in cells)
    measurements = [r for r in journal(tmp_path / "run") if r["record"] == "measurement"]
    assert sorted(m["items"] for m in measurements) == [1.0, 2.0]


def test_an_unregistered_executor_is_one_located_line(matrix_file, tmp_path):
    result = run_cli("validate", str(matrix_file(MATRIX)), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: {tmp_path / 'm.yaml'}:3: stacks[0].executor: unknown executor 'niced' "
        "(registered: docker, process)")


class LabProvider:
    """A user's provider: its lab's registry logs in with a token; other registries are not
    its business."""

    def registry_auth(self, reference: str, for_push: bool) -> dict[str, str] | None:
        if reference.partition("/")[0] != "registry.lab.example":
            return None
        return {"username": "bench", "password": "push" if for_push else "pull"}


def test_registry_credentials_come_from_the_provider_that_owns_the_registry(monkeypatch,
                                                                            moto_server):
    from orchestrator import providers

    monkeypatch.setitem(providers._REGISTRY, "lab",
                        providers.ProviderKind("lab", load=LabProvider))
    assert providers.registry_auth("registry.lab.example/mb@sha256:ab", for_push=False) == \
        {"username": "bench", "password": "pull"}
    assert providers.registry_auth("localhost:5000/matrix-bench") is None  # no login
    ecr = providers.registry_auth("123456789012.dkr.ecr.us-east-1.amazonaws.com/mb")
    assert ecr is not None and ecr["username"] == "AWS"  # the aws provider, through moto


def test_the_docker_executor_and_the_images_import_no_cloud_code():
    """They ask the providers for registry credentials; no import of a cloud module is left
    in them (the matrix schema still reaches cloud/network.py: the providers issue)."""
    for module in ("orchestrator/executors/docker.py", "orchestrator/images.py"):
        tree = ast.parse((PROJECT / module).read_text())
        imported = {node.module for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module} | {
            alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
            for alias in node.names}
        assert not {m for m in imported if m.startswith(("orchestrator.cloud", "boto3"))}, module
