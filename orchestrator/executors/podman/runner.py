"""The podman executor's work: the container of container.py, said in `podman` arguments.

Podman has no daemon to ask whether it still answers: each step is a `podman` command with
a bound (the cell's wait is held to the cell's timeout, every other step to
`STEP_TIMEOUT_S`), and one that cannot start or does not answer makes the cell
`executor_unavailable` with podman's own first line; one that does not answer is
remembered on the node for a while (silence.py), so the cells after it do not each wait.
The image is found by its id (a copy keeps the id the Docker engine gave it), copied from
the Docker engine on this machine by Podman's `docker-daemon:` transport, or pulled by
digest from the matrix's registry with the provider's credentials in a private auth file
removed afterwards.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

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
from orchestrator.executors.podman.silence import forget, remember, why_silent
from orchestrator.registry.cell_run import Cell, CellRun, ImageRef
from orchestrator.results.records import Record, Status
from orchestrator.worker import datasets

STEP_TIMEOUT_S = 120.0  # a podman step other than the cell's own wait (a copy included)
KILL_GRACE_S = 30.0


class PodmanUnavailable(Exception):
    """Podman is not installed here, or a step of it failed or did not answer."""


class PodmanSlow(PodmanUnavailable):
    """A podman step that did not end within its bound (the cell's wait: its timeout)."""


class PodmanRefused(PodmanUnavailable):
    """A podman step that ended with an error of its own (an image it does not hold...)."""


def _podman(*args: str, timeout: float | None = None, cells_bound: bool = False,
            ask_anyway: bool = False) -> str:
    """Run one podman command; its stdout, or PodmanUnavailable with podman's first line.
    A step that gets no answer is remembered on this node (silence.py) and later steps fail
    at once, but for `ask_anyway` (the sweep's first question); `cells_bound`: the bound is
    the cell's own timeout, whose end is the cell's, not podman's silence."""
    binary = shutil.which("podman")
    if binary is None:
        raise PodmanUnavailable("podman is not installed on this node")
    if not ask_anyway and (why := why_silent()):
        raise PodmanSlow(why)
    timeout = STEP_TIMEOUT_S if timeout is None else timeout
    try:
        done = subprocess.run([binary, *args], capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        why = f"podman {args[0]} did not answer in {timeout:.0f} s"
        if not cells_bound:
            remember(why)
        raise PodmanSlow(why) from None
    if ask_anyway:
        forget()
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise PodmanRefused(f"podman {args[0]} failed: {why[:200]}")
    return done.stdout


def run_cell(run: CellRun) -> list[Record]:
    """Run `run.cell` in a Podman container of `run.image` and return its journal records."""
    cell, image = run.cell, run.image
    files = CellFiles.prepare(in_image(cell), run.run_root, run.node.node_rank)
    refused = refusal(run, files, "podman")
    if image is None:
        return refused(Status.IMAGE_FAILED, f"stack {cell.stack.name} has no image")
    try:
        local = _image_here(image)
        fetch_dataset(cell)
    except PodmanUnavailable as exc:
        return refused(Status.EXECUTOR_UNAVAILABLE, str(exc))
    except datasets.DataUnavailable as exc:  # a failure of the run: the next one retries
        return refused(Status.DATA_UNAVAILABLE, str(exc))
    except datasets.DatasetError as exc:
        return refused(Status.FAILED, str(exc))
    except LookupError as exc:
        return refused(Status.IMAGE_FAILED, str(exc))

    spec = container_spec(cell, files.cell.parent, local, run.node)
    start = time.perf_counter()
    try:
        _remove(spec.name)  # an earlier attempt's container holds the name
        container = _podman("run", *run_arguments(spec)).strip()
    except PodmanUnavailable as exc:
        return refused(Status.EXECUTOR_UNAVAILABLE, f"podman did not start the container: {exc}")
    run.started()
    lost: str | None = None
    with open(files.log, "wb") as log:
        follower = subprocess.Popen([shutil.which("podman") or "podman", "logs", "--follow",
                                     container], stdout=log, stderr=subprocess.STDOUT)
        try:
            timed_out, returncode = _wait(container, cell.timeout_s)
            oom = returncode is not None and _oom_killed(container)
        except PodmanUnavailable as exc:
            timed_out, returncode, oom, lost = False, None, False, f"{exc} mid-cell"
        except BaseException:  # Ctrl-C or a cancelled Ray task: take the container down too
            _remove(container)
            follower.kill()
            raise
        finally:
            with contextlib.suppress(subprocess.TimeoutExpired):
                follower.wait(timeout=10)
            if follower.poll() is None:
                follower.kill()
                follower.wait()
    _remove(container)
    exit = WorkerExit(returncode=returncode, timed_out=timed_out, started_at=files.started_at,
                      wall_s=time.perf_counter() - start, oom_killed=oom, node_id=run.node_id)
    override = None if lost is None else (Status.EXECUTOR_UNAVAILABLE, lost)
    return records_for(cell, exit, files, run.tool, provenance(image),
                       status_override=override)


def run_arguments(spec: ContainerSpec) -> list[str]:
    """`podman run`'s arguments for the container: an argument list, never a shell."""
    network = "host" if spec.host_network else "none"
    args = ["--detach", "--init", "--network", network, "--user", spec.user, "--name", spec.name]
    for key, value in spec.labels.items():
        args += ["--label", f"{key}={value}"]
    for key, value in spec.environment.items():
        args += ["--env", f"{key}={value}"]
    for mount in spec.mounts:
        args += ["--volume", f"{mount.host}:{mount.container}:{'ro' if mount.read_only else 'rw'}"]
    for index in range(spec.gpus):  # the node's GPUs by the Container Device Interface
        args += ["--device", f"nvidia.com/gpu={index}"]
    if spec.memory_limit_mb:
        args += ["--memory", f"{spec.memory_limit_mb}m", "--memory-swap",
                 f"{spec.memory_limit_mb}m"]
    return [*args, spec.image, *spec.command]


def _wait(container: str, timeout_s: float) -> tuple[bool, int | None]:
    """(timed out, exit status as a process's); killed at the timeout."""
    try:
        out = _podman("wait", container, timeout=timeout_s, cells_bound=True)
    except PodmanSlow:
        with contextlib.suppress(PodmanUnavailable):
            _podman("kill", container, timeout=KILL_GRACE_S)
            _podman("wait", container, timeout=KILL_GRACE_S)
        return True, None
    said = out.split()
    if not said or not said[-1].lstrip("-").isdigit():  # it answered, but not an exit status
        raise PodmanRefused(f"podman wait gave no exit status ({out.strip()[:80]!r})")
    return False, as_process_status(int(said[-1]))


def _oom_killed(container: str) -> bool:
    with contextlib.suppress(PodmanUnavailable):
        return _podman("inspect", "--format", "{{.State.OOMKilled}}",
                       container).strip() == "true"
    return False


def _remove(container: str) -> None:
    """Remove the container (by id or name) if it is there; best effort."""
    with contextlib.suppress(PodmanUnavailable):
        _podman("rm", "--force", "--ignore", container)


def _image_here(image: ImageRef) -> str:
    """How podman names the stack's image here: its id, copied in first if need be."""
    if _exists(image.image_id):
        return image.image_id
    with _image_lock(image.image_id):  # cells of one node copy an image once
        if _exists(image.image_id):
            return image.image_id
        with contextlib.suppress(PodmanUnavailable):
            _podman("pull", "--quiet", f"docker-daemon:{image.tag}", timeout=STEP_TIMEOUT_S * 5)
            if _exists(image.image_id):
                return image.image_id
        if image.repo_digest is None:
            raise LookupError(f"image {image.tag} is in neither Podman's storage nor a Docker "
                              "engine on this node, and was not pushed to a registry (set "
                              "images.registry in the matrix)")
        with _auth_file(image.repo_digest) as auth:
            try:
                _podman("pull", "--quiet", *auth, image.repo_digest,
                        timeout=STEP_TIMEOUT_S * 5)
            except PodmanUnavailable as exc:
                raise LookupError(f"cannot pull {image.repo_digest}: {exc}") from None
        return image.repo_digest


def _exists(reference: str) -> bool:
    try:
        _podman("image", "exists", reference)
    except PodmanRefused:  # it answered: not here (missing podman, or none that answers, raise)
        return False
    return True


@contextlib.contextmanager
def _image_lock(image_id: str) -> Iterator[None]:
    name = hashlib.sha256(image_id.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"matrix-bench-podman-{name}.lock"
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def _auth_file(reference: str) -> Iterator[list[str]]:
    """`--authfile FILE` with the registry's credentials, in a folder only this user reads
    and removed afterwards; nothing where the registry needs none. Never in an argument."""
    from orchestrator.registry.providers import registry_auth

    auth = registry_auth(reference, for_push=False)
    if auth is None:
        yield []
        return
    folder = Path(tempfile.mkdtemp(prefix="matrix-bench-podman-auth-"))
    try:
        secret = base64.b64encode(f"{auth['username']}:{auth['password']}".encode()).decode()
        path = folder / "auth.json"
        path.write_text(json.dumps({"auths": {reference.split("/")[0]: {"auth": secret}}}))
        path.chmod(0o600)
        yield ["--authfile", str(path)]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _containers(label: str, ask_anyway: bool = False) -> list[str]:
    with contextlib.suppress(PodmanUnavailable):
        return _podman("ps", "--all", "--quiet", "--filter", f"label={label}",
                       ask_anyway=ask_anyway).split()
    return []


def remove_leftovers(run: str) -> int:
    """Remove the containers of `run` that a crashed or killed sweep left behind. A sweep
    asks this first: podman is asked even where it was silent a moment ago."""
    leftovers = _containers(f"{LABEL_RUN}={run}", ask_anyway=True)
    for container in leftovers:
        _remove(container)
    return len(leftovers)


def stop_cell(cell: Cell) -> None:
    """Remove what is left of `cell`'s container here, after the driver gave up on it."""
    for container in _containers(f"{LABEL_CELL}={cell.cell_id}"):
        _remove(container)


# The `podman` executor (registered by entry point: podman/__init__.py).
EXECUTOR = ContainerExecutor(run_cell, remove_leftovers, stop_cell)
