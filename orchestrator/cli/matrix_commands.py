"""The commands that read a matrix file: `matrix run`, `plan`, `build`, `lock`, `validate`,
and `schema` (the file's JSON Schema). Heavy modules are imported inside each command."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.cli.options import (
    Db,
    MatrixFile,
    Only,
    Output,
    Rerun,
    Retry,
    console,
    selectors,
)
from orchestrator.run.waves import DEFAULT_MAX_REPEATS

if TYPE_CHECKING:
    from orchestrator.run.waves import UntilDecided


NoRay = Annotated[bool, typer.Option(
    "--no-ray", help="Run the cells here serially in this environment, without Ray (Slurm "
    "cells still go to Slurm; EC2 cells, which run on a Ray cluster, are skipped).")]


RayAddress = Annotated[str | None, typer.Option(
    "--ray-address", envvar="RAY_ADDRESS",
    help="Use this Ray cluster: run on (and plan for) the hardware its nodes offer "
         "(default: an embedded local Ray, this machine).")]


def run(
    matrix_file: MatrixFile,
    output: Output = None,
    ray_address: RayAddress = None,
    no_ray: NoRay = False,
    only: Only = None,
    rerun: Rerun = False,
    retry: Retry = None,
    allow_over_budget: Annotated[bool, typer.Option(
        "--allow-over-budget", help="Run even when the estimated cost exceeds budget_usd.")
    ] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Show Ray's own output (else kept in the run's ray.log).")
    ] = False,
    db: Db = None,
    until_decided: Annotated[bool, typer.Option(
        "--until-decided", help="Then run more repeats of only the configurations the answer "
        "cannot tell apart (a pick and its ties: the matrix's job:, else fastest and cheapest "
        "per million items), until they separate or a limit is reached.")] = False,
    max_repeats: Annotated[int, typer.Option(
        min=2, help="With --until-decided: at most this many repeats of a configuration.")
    ] = DEFAULT_MAX_REPEATS,
    max_time: Annotated[str | None, typer.Option(
        help="With --until-decided: stop adding repeats after this long (30m, 2h).")
    ] = None,
) -> None:
    """Run every cell of the matrix that has not ended yet, then write the report; a cell
    that failed with the run (crashed, timeout, node lost...) runs again, one whose
    configuration gave its end (unsupported, oom...) only when its inputs change or with
    --retry. Each cell is journalled in the run directory and indexed in the results store."""
    from orchestrator.plan.retry import parse_retry
    from orchestrator.run.sweep import SweepOptions, run_sweep

    options = SweepOptions(output=output, ray_address=ray_address, no_ray=no_ray,
                           only=selectors(only), rerun=rerun, retry=parse_retry(retry),
                           allow_over_budget=allow_over_budget, verbose=verbose, db=db,
                           until_decided=_until(until_decided, max_repeats, max_time))
    summary = run_sweep(matrix_file, options, console())
    if summary.interrupted or summary.stopped:
        raise typer.Exit(130 if summary.interrupted else 1)


def _until(wanted: bool, max_repeats: int, max_time: str | None) -> UntilDecided | None:
    """--until-decided's limits; a limit without it is a user error, said in one line."""
    from orchestrator.report.advise import AdviseError, duration_s
    from orchestrator.run.waves import UntilDecided

    if not wanted:
        if max_time is not None or max_repeats != DEFAULT_MAX_REPEATS:
            raise AdviseError("--max-repeats and --max-time go with --until-decided")
        return None
    return UntilDecided(max_repeats, duration_s(max_time, "--max-time") if max_time else None)


class PlanForm(StrEnum):
    TEXT = "text"
    JSON = "json"
    CSV = "csv"


def plan(matrix_file: MatrixFile, output: Output = None, only: Only = None,
         rerun: Rerun = False, retry: Retry = None, no_ray: NoRay = False,
         ray_address: RayAddress = None,
         verbose: Annotated[bool, typer.Option(
             "--verbose", "-v", help="List every cell, to run and skipped.")] = False,
         form: Annotated[PlanForm, typer.Option(
             "--format", help="text (a summary), or json or csv: every cell, for scripts.")
         ] = PlanForm.TEXT) -> None:
    """Show what would run (per hardware, stack and workload), what is skipped and why, the
    images, time and cost; every cell with --verbose, or as JSON or CSV."""
    from orchestrator.cli.plan_view import show_plan
    from orchestrator.plan.retry import parse_retry

    show_plan(matrix_file, output, selectors(only), rerun, console(), verbose,
              form.value, parse_retry(retry), launch=not no_ray, ray_address=ray_address)


def build(matrix_file: MatrixFile, output: Output = None) -> None:
    """Build the image of every stack that runs in one (only those missing), and push them
    where the matrix names a registry."""
    from orchestrator.run.image_builds import build_images, image_stacks
    from orchestrator.run.sweep import run_dir_for
    from orchestrator.validate import load_spec

    spec = load_spec(matrix_file)
    stacks = image_stacks(spec)
    if not stacks:
        typer.echo(f"{matrix_file}: no stack runs in an image (all use executor: process)")
        return
    out = console()
    built = build_images(spec, stacks, run_dir_for(spec, output), out)
    for name, ref in built.refs.items():
        state = "built" if name in built.built else "cached"
        out.print(f"{name}: {ref.tag} {state}, id {ref.image_id[:19]}, "
                  f"{ref.size_bytes / 1e9:.2f} GB" + (f", {ref.repo_digest}"
                                                       if ref.repo_digest else ""))
    if built.failures:
        raise typer.Exit(1)


def lock(matrix_file: Annotated[Path | None, typer.Argument(
             help="The matrix whose image stacks to lock.", show_default=False)] = None,
         stack: Annotated[list[str] | None, typer.Option(help="Only this stack (repeat).")] = None,
         wheelhouse: Annotated[Path | None, typer.Option(help="Pin this folder's wheels "
                                                         "instead (pip download -d).")] = None,
         output: Annotated[Path | None, typer.Option(
             "--output", "-o", help="With --wheelhouse: the lock file to write.")] = None,
         ) -> None:
    """Write each image stack's lock file (<locks>/<stack>.txt): its packages resolved by uv
    for the stack's Python and the images' platform, every one pinned by its hash."""
    from orchestrator.images.locks import lock_from_wheelhouse
    from orchestrator.images.resolver import LockError, make_locks
    from orchestrator.validate import load_spec

    if matrix_file is None and wheelhouse is not None and output is not None and not stack:
        text = lock_from_wheelhouse(wheelhouse)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
        typer.echo(f"{output}: {len(text.splitlines()) - 1} pinned packages")
    elif matrix_file is not None and wheelhouse is None and output is None:
        make_locks(load_spec(matrix_file), stack or [], typer.echo)
    else:
        raise LockError("give a matrix (matrix lock MATRIX [--stack NAME]), or --wheelhouse "
                        "DIR -o FILE and no matrix")


def validate(
    matrix_file: MatrixFile,
    offline: Annotated[bool, typer.Option("--offline", help="Ask no package index.")] = False,
) -> None:
    """Check a matrix file; errors name the file, line and field. Notes what its images
    still need before they can build (a lock file). A framework version newer than the
    release tables is looked up on the package index (5 s at most)."""
    from orchestrator.cli.plan_view import grid_counts, validation_notes
    from orchestrator.errors import RunDirError
    from orchestrator.spec.release_index import ReleaseIndex
    from orchestrator.validate import load_spec
    from orchestrator.validate.output import output_problem

    spec = load_spec(matrix_file, ReleaseIndex.offline() if offline else ReleaseIndex.here())
    if spec.output and (problem := output_problem(spec.output)):  # as `run` would find it
        raise RunDirError(f"{matrix_file}: output: {problem}")
    typer.echo(f"{matrix_file}: ok: {grid_counts(spec)}; `matrix plan` says which run here")
    for note in validation_notes(spec):
        typer.echo(f"note: {note}")


def schema() -> None:
    """Print the JSON Schema of the matrix file (for editors)."""
    import json

    from orchestrator.validate import json_schema
    typer.echo(json.dumps(json_schema(), indent=2))
