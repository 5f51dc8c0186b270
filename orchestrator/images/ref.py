"""The images' error type, where an image carries a user's workload folder, and what a stack
whose image could not be had becomes (`BuildFailure`). What a built image is to the rest
of the tool (`ImageRef`) is the seam's (registry/cell_run.py): executors are handed it."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.errors import MatrixError

IMAGE_CODE_ROOT = "/opt/matrix-bench/code"  # where an image carries its code (PYTHONPATH)
IMAGE_USER_WORKLOADS = "user_workloads"  # beside orchestrator/ and workloads/ in it


def image_workload_dir(name: str) -> str:
    """Where an image carries the user workload folder named `name`."""
    return f"{IMAGE_CODE_ROOT}/{IMAGE_USER_WORKLOADS}/{name}"


class ImageError(MatrixError):
    """A stack image that cannot be rendered, built, found or pushed."""


@dataclass(frozen=True)
class BuildFailure:
    """A stack whose image could not be had: its cells become `image_failed` rows."""

    stack: str
    reason: str
    log_tail: str
    engine_unavailable: bool = False  # the engine was gone or stopped the build: not the stack

