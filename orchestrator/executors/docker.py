"""The docker executor: run a cell's worker in a container of its stack's image, through
the Docker engine's API.

The container is the fault boundary, as the subprocess is for the process executor. What
it holds (mounts, labels, user, limits: container.py) is every container executor's; here
the engine starts it, is asked in slices whether it still answers (an engine that goes
away or hangs fails the cell in seconds, not at its timeout), kills it at the timeout and
removes it afterwards, on Ctrl-C too.
"""

from __future__ import annotations

import contextlib
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.errors import first_line
from orchestrator.executors.container import (
    LABEL_CELL,
    LABEL_RUN,
    ContainerExecutor,
    ContainerSpec,
    as_process_status,
    container_spec,
    fetch_dataset,
    in_image,
    provenance,
    refusal,
)
from orchestrator.executors.outcome import CellFiles, WorkerExit, records_for
from orchestrator.images.engine import (
    EngineUnavailable,
    check_engine,
    docker_client,
    engine_errors,
    engine_keeps_answering,
    engine_lost,
    engine_lost_errors,
    engine_name,
    stopped_by_the_engine,
)
from orchestrator.registry.cell_run import Cell, CellRun, ImageRef
from orchestrator.registry.providers import registry_auth
from orchestrator.results.records import Record, Status
from orchestrator.worker import datasets

WAIT_SLICE_S = 10.0  # a cell's wait asks the engine this often whether it still answers


ENGINE_ERRORS = engine_errors()


def run_cell(run: CellRun) -> list[Record]:
    """Run `run.cell` in a container of `run.image` and return its journal records."""
    cell, image = run.cell, run.image
    files = CellFiles.prepare(in_image(cell), run.run_root, run.node.node_rank)
    refused = refusal(run, files, "docker")
    if image is None:
        return refused(Status.IMAGE_FAILED, f"stack {cell.stack.name} has no image")
    try:
        client = docker_client()
        local_tag = _image_here(client, image)
        fetch_dataset(cell)
    except EngineUnavailable as exc:
        return refused(Status.EXECUTOR_UNAVAILABLE, str(exc))
    except ENGINE_ERRORS as exc:  # it answered the ping, then went away
        return refused(Status.EXECUTOR_UNAVAILABLE, engine_lost(exc))
    except datasets.DataUnavailable as exc:  # a failure of the run: the next one retries
        return refused(Status.DATA_UNAVAILABLE, str(exc))
    except datasets.DatasetError as exc:
        return refused(Status.FAILED, str(exc))
    except LookupError as exc:
        return refused(Status.IMAGE_FAILED, str(exc))

    start, since = time.perf_counter(), datetime.now(UTC)
    try:
        container = _start(client, _options(container_spec(cell, files.cell.parent,
                                                           local_tag, run.node)))
    except Exception as exc:  # the engine refused (no GPU runtime, gone away): not a crash
        return refused(Status.EXECUTOR_UNAVAILABLE, f"the Docker engine at {engine_name()} "
                                                   f"did not start the container: "
                                                   f"{first_line(exc)}")
    run.started()
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
                      wall_s=time.perf_counter() - start, oom_killed=oom, node_id=run.node_id)
    override = None if lost is None else (Status.EXECUTOR_UNAVAILABLE, lost)
    return records_for(cell, exit, files, run.tool, provenance(image),
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


def _options(spec: ContainerSpec) -> dict[str, Any]:
    """The container, in the engine's API."""
    import docker

    options: dict[str, Any] = {
        "image": spec.image,
        "command": list(spec.command),
        "detach": True,
        # docker-init as PID 1: the worker gets signals as a process does (PID 1 ignores
        # them), so an abort is `crashed` and the engine's stop reaches it at once.
        "init": True,
        "network_mode": "host" if spec.host_network else "none",
        "user": spec.user,
        "environment": spec.environment,
        "volumes": {m.host: {"bind": m.container, "mode": "ro" if m.read_only else "rw"}
                    for m in spec.mounts},
        "labels": spec.labels,
        "name": spec.name,
    }
    if spec.gpus:
        options["device_requests"] = [docker.types.DeviceRequest(
            count=spec.gpus, capabilities=[["gpu"]])]
    if spec.memory_limit_mb:
        options["mem_limit"] = f"{spec.memory_limit_mb}m"
        options["memswap_limit"] = f"{spec.memory_limit_mb}m"
    return options


def _start(client: Any, options: dict[str, Any]) -> Any:
    """Run the container; a container of this cell that an earlier attempt left on this
    engine (its name is taken) is removed first."""
    import docker

    try:
        return client.containers.run(**options)
    except docker.errors.APIError as exc:
        if exc.status_code != 409:
            raise
    with contextlib.suppress(docker.errors.NotFound):
        client.containers.get(options["name"]).remove(force=True)
    return client.containers.run(**options)


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
    return False, as_process_status(int(result["StatusCode"])), oom


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


# The registered `docker` executor (orchestrator/executors/__init__.py).
EXECUTOR = ContainerExecutor(run_cell, remove_leftovers, remove_cell_container)
