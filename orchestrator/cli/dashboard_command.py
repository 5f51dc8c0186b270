"""`matrix dashboard -o SITE [--items N ...]`: the command; the build is dashboard/build.py."""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator.cli.options import Db


def dashboard_command(
    output: Annotated[str, typer.Option(
        "--output", "-o", help="The folder to write the site into (its index.html): new, "
        "empty, or a site written before, which is replaced whole.")],
    db: Db = None,
    items: Annotated[float | None, typer.Option(
        min=1, help="A training job's size in its workload's unit: its workload's page "
                    "answers it as `matrix advise` does.", show_default=False)] = None,
    workload: Annotated[str | None, typer.Option(
        help="The job's workload, where the store holds several.")] = None,
    deadline: Annotated[str | None, typer.Option(
        help="The job's deadline: 36h, 90m, 2d, 600s.")] = None,
    budget: Annotated[float | None, typer.Option(min=0, help="The job's budget (USD).")
                      ] = None,
    grid_intensity: Annotated[float | None, typer.Option(
        min=0, help="Your grid's gCO2 per kWh, for the job's emissions.")] = None,
) -> None:
    """Write a static site over the results store: workloads by hardware, a page per
    workload (sortable, filterable tables; throughput, cost, scaling and history charts),
    a page per run, and with --items your job on every configuration. It needs no server
    and no network."""
    from orchestrator.dashboard.build import DashboardError, build_dashboard
    from orchestrator.report.advise import duration_s
    from orchestrator.spec.job import job_from_options

    job = None
    if items is not None:
        if deadline is not None:
            duration_s(deadline)  # a deadline that is not a duration: one line
        job = job_from_options(items=items, workload=workload, deadline=deadline,
                               budget=budget, grid_intensity=grid_intensity)
    elif any(v is not None for v in (workload, deadline, budget, grid_intensity)):
        raise DashboardError("--workload, --deadline, --budget and --grid-intensity describe "
                             "a job: give its size with --items")
    typer.echo(build_dashboard(output, db, job))
