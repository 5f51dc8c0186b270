"""The docker executor: run a cell's worker in a container of its stack's image.

The container is the fault boundary, as the subprocess is for the process executor: the
cell file and OUT_FILE go through the run's mounted `cells/` folder, the data cache is
mounted read-only (the cell's dataset is fetched on the host first), the network is off,
GPUs are requested for the cell's count, and the container is killed at the timeout and
removed afterwards, on Ctrl-C too. Containers are labelled with their run and cell, so one
left behind by a crashed sweep is found and removed by the next.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.executors.outcome import CellFiles, ToolInfo, WorkerExit, records_for
from orchestrator.images.engine import (
    EngineUnavailable,
    check_engine,
    docker_client,
    engine_errors,
    engine_keeps_answering,
    engine_lost,
    engine_lost_errors,
    engine_name,
    first_line,
    stopped_by_the_engine,
)
from orchestrator.images.ref import ImageRef, image_workload_dir
from orchestrator.plan.cells import Cell
from orchestrator.providers import registry_auth
from orchestrator.results.records import Record, Status
from orchestrator.worker import datasets

CELLS_MOUNT = "/matrix/cells"
DATA_MOUNT = "/matrix/data"
LABEL_RUN = "matrix-bench.run"
LABEL_CELL = "matrix-bench.cell"
WAIT_SLICE_S = 10.0  # a cell's wait asks the engine this often whether it still answers


ENGINE_ERRORS = engine_errors()


def run_cell(cell: Cell, run_root: Path, tool: ToolInfo, image: ImageRef | None,
             node_id: str | None = None,
             on_start: Callable[[], None] | None = None) -> list[Record]:
    """Run `cell` in a container of `image` and return its journal records."""
    # A user's workload folder, or a command's, is in the image, not at its path here.
    in_image = cell.model_copy(update={
        key: image_workload_dir(cell.workload) for key in ("workload_dir", "command_cwd")
        if getattr(cell, key) is not None})
    files = CellFiles.prepare(in_image, run_root)

    def refused(status: Status, why: str) -> list[Record]:
        files.log.write_text(f"docker executor: {why}\n")
        exit = WorkerExit(returncode=None, timed_out=False, started_at=files.started_at,
                          wall_s=0.0, node_id=node_id)
        return records_for(cell, exit, files, tool, _provenance(image),
                           status_override=(status, why))

    if image is None:
        return refused(Status.IMAGE_FAILED, f"stack {cell.stack.name} has no image")
    try:
        client = docker_client()
        local_tag = _image_here(client, image)
        _fetch_dataset(cell)
    except EngineUnavailable as exc:
        return refused(Status.EXECUTOR_UNAVAILABLE, str(exc))
    except ENGINE_ERRORS as exc:  # it answered the ping, then went away
        return refused(Status.EXECUTOR_UNAVAILABLE, engine_lost(exc))
    except datasets.DatasetError as exc:
        return refused(Status.FAILED, str(exc))
    except LookupError as exc:
        return refused(Status.IMAGE_FAILED, str(exc))

    start, since = time.perf_counter(), datetime.now(UTC)
    try:
        container = _start(client, local_tag, _container_options(cell, files.cell.parent))
    except Exception as exc:  # the engine refused (no GPU runtime, gone away): not a crash
        return refused(Status.EXECUTOR_UNAVAILABLE, f"the Docker engine at {engine_name()} "
                                                   f"did not start the container: "
                                                   f"{first_line(exc)}")
    if on_start is not None:
        on_start()
    follower = threading.Thread(target=_follow_logs, args=(container, files.log), daemon=True)
    follower.start()
    lost: str | None = None
    answers = True
    try:
        timed_out, returncode, oom = _wait(client, container, cell.timeout_s)
        if returncode is not None and returncode < 0 and not oom:
            lost = stopped_by_the_engine(client, container.id, since, "the container",
                                         " mid-cell")
            if lost is not None and engine_keeps_answering(client):
                lost = None  # a `docker kill` from outside: the cell crashed by its signal
    except ENGINE_ERRORS as exc:  # gone or hung, or it answered with an error
        timed_out, returncode, oom = False, None, False
        answers = not isinstance(exc, engine_lost_errors())
        lost = (f"the Docker engine at {engine_name()} failed mid-cell: {first_line(exc)}"
                if answers else engine_lost(exc, " mid-cell"))
    except BaseException:  # Ctrl-C or a cancelled Ray task: take the container down too
        _remove(container)
        raise
    follower.join(timeout=10 if answers else 1)
    if answers:  # else the next sweep removes it (a hung engine would hold this one here)
        _remove(container)
    exit = WorkerExit(returncode=returncode, timed_out=timed_out, started_at=files.started_at,
                      wall_s=time.perf_counter() - start, oom_killed=oom, node_id=node_id)
    override = None if lost is None else (Status.EXECUTOR_UNAVAILABLE, lost)
    return records_for(cell, exit, files, tool, _provenance(image),
                       status_override=override)


def _image_here(client: Any, image: ImageRef) -> str:
    """The image's local name: its tag if this engine has it, else pulled by its digest."""
    import docker

    try:
        client.images.get(image.tag)
        return image.tag
    except docker.errors.ImageNotFound:
        pass
    if image.repo_digest is None:
        raise LookupError(f"image {image.tag} is not on this node and was not pushed to a "
                          "registry (set images.registry in the matrix)")
    auth = registry_auth(image.repo_digest, for_push=False)
    try:
        client.images.pull(image.repo_digest, auth_config=auth)
    except docker.errors.APIError as exc:
        raise LookupError(f"cannot pull {image.repo_digest}: {exc.explanation}") from None
    return image.repo_digest


def _fetch_dataset(cell: Cell) -> None:
    """The container has no network: its dataset is fetched into the host's cache first."""
    dataset = cell.params.get("dataset")
    if isinstance(dataset, str) and dataset in datasets.catalogue():
        datasets.fetch(dataset)
    datasets.data_dir().mkdir(parents=True, exist_ok=True)


def _container_options(cell: Cell, cells_dir: Path) -> dict[str, Any]:
    import docker

    options: dict[str, Any] = {
        # An argument list: values from the matrix reach the worker as data, never a shell.
        "command": ["python3", "-m", "orchestrator.worker", f"{CELLS_MOUNT}/{cell.cell_id}.json",
                    f"{CELLS_MOUNT}/{cell.cell_id}.out.jsonl"],
        "detach": True,
        # docker-init as PID 1: the worker gets signals as a process does (PID 1 ignores
        # them), so an abort is `crashed` and the engine's stop reaches it at once.
        "init": True,
        "network_mode": "none",
        "user": f"{os.getuid()}:{os.getgid()}",  # files in cells/ stay the user's
        "environment": {"MATRIX_BENCH_DATA": DATA_MOUNT, "HOME": "/tmp",
                        "PYTHONUNBUFFERED": "1"},
        "volumes": {str(cells_dir.resolve()): {"bind": CELLS_MOUNT, "mode": "rw"},
                    str(datasets.data_dir().resolve()): {"bind": DATA_MOUNT, "mode": "ro"}},
        "labels": {LABEL_RUN: cell.run, LABEL_CELL: cell.cell_id},
        "name": f"matrix-{cell.run}-{cell.cell_id}"[:120],
    }
    if cell.hardware.gpus:
        options["device_requests"] = [docker.types.DeviceRequest(
            count=cell.hardware.gpus, capabilities=[["gpu"]])]
    if cell.memory_limit_mb:
        options["mem_limit"] = f"{cell.memory_limit_mb}m"
        options["memswap_limit"] = f"{cell.memory_limit_mb}m"  # no swap to hide in
    return options


def _start(client: Any, tag: str, options: dict[str, Any]) -> Any:
    """Run the container; a container of this cell that an earlier attempt left on this
    engine (its name is taken) is removed first."""
    import docker

    try:
        return client.containers.run(tag, **options)
    except docker.errors.APIError as exc:
        if exc.status_code != 409:
            raise
    with contextlib.suppress(docker.errors.NotFound):
        client.containers.get(options["name"]).remove(force=True)
    return client.containers.run(tag, **options)


def _wait(client: Any, container: Any, timeout_s: float) -> tuple[bool, int | None, bool]:
    """(timed out, exit status as a process's, OOM-killed by the engine). It waits in
    slices and pings the engine after each, so an engine that goes away or hangs raises
    one of ENGINE_ERRORS within seconds, not at the cell's timeout."""
    import docker
    import requests

    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            result = container.wait(timeout=min(left, WAIT_SLICE_S))
            break
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            check_engine(client)  # a slice's end comes as either, and so does a dead engine
    else:
        with contextlib.suppress(docker.errors.APIError):  # it ended at the deadline
            container.kill()
        container.wait(timeout=30)
        return True, None, False
    container.reload()
    oom = bool(container.attrs["State"].get("OOMKilled"))
    code = int(result["StatusCode"])
    # The engine reports death by signal N as 128 + N; the outcome classifier wants -N.
    return False, -(code - 128) if 128 < code <= 128 + 64 else code, oom


def _follow_logs(container: Any, log_file: Path) -> None:
    """Copy the container's output to its log until it ends or the engine goes away."""
    with open(log_file, "wb") as log, contextlib.suppress(*ENGINE_ERRORS):
        for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=True):
            log.write(chunk)
            log.flush()


def _remove(container: Any) -> None:
    # Already gone, or the engine is gone: nothing left to remove here.
    with contextlib.suppress(Exception):
        container.remove(force=True)


def remove_leftovers(run: str) -> int:
    """Remove the containers of `run` that a crashed or killed sweep left behind."""
    try:
        client = docker_client()
    except EngineUnavailable:
        return 0
    try:
        leftovers = client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run}"})
    except ENGINE_ERRORS:
        return 0
    for container in leftovers:
        _remove(container)
    return len(leftovers)


def remove_cell_container(cell: Cell) -> None:
    """Remove `cell`'s container from this machine's engine, if it is there (best effort:
    the driver ended the cell, and the container may run on another node)."""
    try:
        client = docker_client()
        containers = client.containers.list(
            all=True, filters={"label": f"{LABEL_CELL}={cell.cell_id}"})
    except EngineUnavailable:
        return
    except ENGINE_ERRORS:
        return
    for container in containers:
        _remove(container)


def _provenance(image: ImageRef | None) -> dict[str, Any]:
    if image is None:
        return {}
    return {"image_tag": image.tag, "image_id": image.image_id,
            "repo_digest": image.repo_digest}


class DockerExecutor:
    """The registered `docker` executor (orchestrator/executors/__init__.py)."""

    def run_cell(self, cell: Cell, run_root: Path, tool: ToolInfo, image: ImageRef | None,
                 node_id: str | None, on_start: Callable[[], None] | None) -> list[Record]:
        return run_cell(cell, run_root, tool, image, node_id, on_start)

    def remove_leftovers(self, run: str) -> int:
        return remove_leftovers(run)

    def stop_cell(self, cell: Cell) -> None:
        remove_cell_container(cell)


EXECUTOR = DockerExecutor()
