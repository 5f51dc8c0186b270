"""The build stage of a sweep and of `matrix build`: one image per stack that runs in one.

Each stack is rendered, found or built (its log in `<run>/build/<stack>.log`), and pushed
when the matrix names a registry. A stack whose image cannot be had is a BuildFailure, and
its cells become rows with its status; the other stacks go on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from orchestrator.executors.logs import tail_of
from orchestrator.executors.outcome import not_run_records
from orchestrator.images.engine import (
    EngineUnavailable,
    docker_client,
    engine_lost,
    engine_lost_errors,
)
from orchestrator.images.stack_image import (
    BuildFailure,
    BuildStepStopped,
    ImageError,
    ImageRef,
    build_image,
    find_image,
    own_workload_files,
    push,
    render,
)
from orchestrator.registry.cell_run import Cell
from orchestrator.registry.executors import needs_image
from orchestrator.results.records import Record, Status
from orchestrator.spec.model import MatrixSpec, Stack


@dataclass(frozen=True)
class BuiltImages:
    """The outcome of the build stage, per stack name."""

    refs: dict[str, ImageRef]
    failures: dict[str, BuildFailure]
    built: tuple[str, ...] = ()  # stacks built now (the rest were found)


def image_stacks(spec: MatrixSpec, cells: list[Cell] | None = None) -> list[Stack]:
    """The stacks that run in an image, limited to those of `cells` when given."""
    wanted = None if cells is None else {cell.stack.name for cell in cells}
    return [s for s in spec.stacks if needs_image(s)
            and (wanted is None or s.name in wanted)]


def build_images(spec: MatrixSpec, stacks: list[Stack], run_root: Path,
                 console: Console) -> BuiltImages:
    """Find or build (then push) the image of each stack; failures are data, not exceptions."""
    refs: dict[str, ImageRef] = {}
    failures: dict[str, BuildFailure] = {}
    built: list[str] = []
    if not stacks:
        return BuiltImages(refs, failures)
    try:
        client = docker_client()
    except EngineUnavailable as exc:
        return BuiltImages({}, {s.name: BuildFailure(s.name, str(exc), "", True) for s in stacks})
    import docker

    for index, stack in enumerate(stacks):
        log = run_root / "build" / f"{stack.name}.log"
        try:
            rendered = render(stack, spec.images, own_workload_files(spec))
            found = find_image(client, stack.name, rendered.tag)
            if found is None:
                start = time.perf_counter()
                with console.status(f"building {stack.name} ({rendered.tag})") as status:
                    def show(line: str, s: Any = status, n: str = stack.name) -> None:
                        s.update(f"building {n}: {line[:100]}")

                    found = build_image(client, rendered, log, show)
                built.append(stack.name)
                console.print(f"built {stack.name}: {found.tag} "
                              f"({found.size_bytes / 1e9:.2f} GB, "
                              f"{time.perf_counter() - start:.0f} s, log {log})")
            if spec.images.registry:
                found = push(client, found, spec.images.registry)
                console.print(f"pushed {stack.name}: {found.repo_digest}")
            refs[stack.name] = found
        except BuildStepStopped as exc:  # the engine's doing: it may answer the next stack
            failures[stack.name] = BuildFailure(stack.name, str(exc), tail_of(log), True)
            console.print(f"[red]image failed:[/] {exc} (log {log})")
        except (ImageError, docker.errors.APIError) as exc:  # the engine refused a step
            failures[stack.name] = BuildFailure(stack.name, str(exc), tail_of(log))
            console.print(f"[red]image failed:[/] {exc} (log {log})")
        except engine_lost_errors() as exc:  # gone: this stack and the rest have no engine
            reason = engine_lost(exc, f" while preparing the image of {stack.name}")
            console.print(f"[red]image failed:[/] {reason}")
            for rest in stacks[index:]:
                failures[rest.name] = BuildFailure(rest.name, reason,
                                                   tail_of(log) if rest is stack else "", True)
            break
    return BuiltImages(refs, failures, tuple(built))


def failed_image_records(cell: Cell, failure: BuildFailure) -> list[Record]:
    """The rows of a cell whose stack has no image: `executor_unavailable` without an engine,
    `image_failed` otherwise, with the build log's tail."""
    status = Status.EXECUTOR_UNAVAILABLE if failure.engine_unavailable else Status.IMAGE_FAILED
    return not_run_records(cell, status, failure.reason, log_tail=failure.log_tail or None)
