"""`executor: podman`: a cell's worker in a container of its stack's image, started by
Podman's command line (no daemon, rootless where the machine allows: what HPC sites run
where a Docker daemon is not allowed).

It is registered by entry point (`matrix_bench.executors` in pyproject.toml), as a plugin
from any distribution would be, so every process that reads the registry finds it and no
core module names it. The container is every container executor's (../container.py);
runner.py only says it in Podman's arguments.
"""

from __future__ import annotations

from orchestrator.executors import Executor, ExecutorKind, ImageNeed


def _load() -> Executor:
    from orchestrator.executors.podman.runner import EXECUTOR
    return EXECUTOR


KIND = ExecutorKind("podman", image=ImageNeed(
    runtime="Podman",
    arrives="copied from the Docker engine that built it on this machine (Podman's "
            "docker-daemon: transport), else pulled by digest from images.registry"),
    load=_load)
