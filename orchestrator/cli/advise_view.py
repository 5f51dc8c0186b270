"""`matrix advise RUN... --items N`: the command and what a person reads (a table within
80 columns: the configuration folds, never cut) or a script reads (`--format json|csv`:
every figure, full precision). The projection itself is report/advise.py."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.cli.options import Db

if TYPE_CHECKING:
    import pandas as pd
    from rich.console import Console

    from orchestrator.report.advise import Advice, Projection, SpotPrice


class AdviseFormat(StrEnum):
    TABLE = "table"
    CSV = "csv"
    JSON = "json"


def advise_command(
    items: Annotated[float, typer.Option(
        min=1, help="The job's size in the workload's unit (tokens, samples, words...).",
        show_default=False)],
    runs: Annotated[list[str] | None, typer.Argument(
        help="Run directories (or s3://...) to project the job onto (default: every run in "
             "the results store).", show_default=False)] = None,
    workload: Annotated[str | None, typer.Option(
        help="The job's workload, where the runs hold several.")] = None,
    deadline: Annotated[str | None, typer.Option(
        help="Finish within this: 36h, 90m, 2d, 600s.")] = None,
    budget: Annotated[float | None, typer.Option(min=0, help="Spend at most this (USD).")
                      ] = None,
    grid_intensity: Annotated[float | None, typer.Option(
        min=0, help="Your grid's gCO2 per kWh, for the emissions (never fetched).")] = None,
    form: Annotated[AdviseFormat, typer.Option("--format", help="table, csv or json.")
                    ] = AdviseFormat.TABLE,
    region: Annotated[str | None, typer.Option(help="The bucket's region, for s3://.")
                      ] = None,
    db: Db = None,
    spot: Annotated[bool, typer.Option(
        help="Price EC2 rows at their instance type's spot price (its price history).")
                    ] = False,
    interruptions_per_day: Annotated[float | None, typer.Option(
        min=0, help="With --spot: how often you expect to be interrupted.")] = None,
    checkpoint_every: Annotated[str | None, typer.Option(
        help="With --spot: how far apart your checkpoints are (2h, 30m).")] = None,
    aws_region: Annotated[str, typer.Option(help="The region of the spot prices.")
                          ] = "us-east-1",
    figure: Annotated[Path | None, typer.Option(
        help="Also draw time to train against cost (PNG): intervals, the front, the limits.")
                      ] = None,
    include_flagged: Annotated[bool, typer.Option(
        help="Answer from flagged repeats too (contended, throttled...), each with its flags "
             "beside it; implausible ones never.")] = False,
) -> None:
    """Project a training job of --items onto every configuration the runs measured: the
    time (95% interval over repeats), cost and energy of the whole job on each, the fastest
    within --budget, the cheapest within --deadline, and the Pareto front."""
    from rich.console import Console

    from orchestrator.report.advise import AdviseError, Job, advise, duration_s
    from orchestrator.spec.job import job_from_options

    job_from_options(items=items, budget=budget, grid_intensity=grid_intensity)  # bounds
    job = Job(items=items, deadline_s=duration_s(deadline) if deadline else None,
              budget_usd=budget, grid_g_per_kwh=grid_intensity, spot=spot,
              interruptions_per_day=interruptions_per_day,
              checkpoint_every_s=duration_s(checkpoint_every, "--checkpoint-every")
              if checkpoint_every else None, include_flagged=include_flagged)
    found = advise(measured(runs, db, region, workload), job, workload,
                   spot_prices(aws_region) if spot else None)
    if figure is not None:
        from orchestrator.report.plots import job_figure, save

        drawn = job_figure(found)
        if drawn is None:
            raise AdviseError("--figure: no configuration has a price, so there is no cost "
                              "to draw time against")
        save(drawn, figure)
    if form is AdviseFormat.TABLE:
        show_advice(found, deadline, Console(highlight=False, soft_wrap=True))
    else:
        write_data(found, form)


def spot_prices(region: str) -> SpotPrice:
    """An instance type's spot price in `region` from EC2's price history where credentials
    exist, else the price cache (providers/aws/pricing.py); looked up once per type."""
    from orchestrator.providers.aws.costs import price_clients
    from orchestrator.providers.aws.pricing import PriceBook

    book, clients, seen = PriceBook(), price_clients(region), {}

    def price(instance_type: str) -> tuple[float, str] | None:
        if instance_type not in seen:
            found = book.price(instance_type, region, True, clients)
            seen[instance_type] = None if found is None else (found.usd_per_hour,
                                                              found.describe())
        return seen[instance_type]

    return price


def measured(runs: list[str] | None, db: str | None, region: str | None,
             workload: str | None = None) -> pd.DataFrame:
    """The rows to answer from: the runs named (each once), else every run in the results
    store (database/store_rows.py), of `workload` alone where one is named (the store
    selects them: the rest is never read)."""
    import pandas as pd

    from orchestrator.report.advise import AdviseError

    if runs and db:
        raise AdviseError("give run directories or --db, not both")
    if runs:
        from orchestrator.cli.runs import local_run
        from orchestrator.report.frame import run_frame

        return pd.concat([run_frame(local_run(run, region)) for run in dict.fromkeys(runs)],
                         ignore_index=True)
    from orchestrator.database.history import Filters
    from orchestrator.database.schema import open_store
    from orchestrator.database.store_rows import store_rows
    from orchestrator.database.url import store_url

    conn = open_store(store_url(db), create=False)
    try:
        rows = store_rows(conn, Filters(workloads=(workload,) if workload else ()))
        # none of that workload: every row, so that advise names the workloads there are
        return store_rows(conn, Filters()) if rows.empty and workload else rows
    finally:
        conn.close()


def show_advice(found: Advice, deadline: str | None, console: Console) -> None:
    from rich.table import Table

    from orchestrator.report import advise_text

    console.print(advise_text.job_line(found, deadline), markup=False)
    for line in advise_text.method(found):
        _say(console, line)
    table = Table(box=None, padding=(0, 1, 0, 0), pad_edge=False)
    table.add_column("configuration", overflow="fold", min_width=14)
    for column in advise_text.headers(found):
        table.add_column(column, justify="left" if column == "marks" else "right",
                         no_wrap=column != "marks")
    scale, _ = advise_text.time_scale(found)
    for p in found.projections:
        table.add_row(p.label, *advise_text.row(p, scale))
    console.print(table, markup=False)
    for line in advise_text.conclusions(found):
        _say(console, line)


def _say(console: Console, line: str) -> None:
    """One statement, folded at the terminal's width; its text never read as markup."""
    import textwrap

    console.print("\n".join(textwrap.wrap(line, console.width, subsequent_indent="  ",
                                          break_on_hyphens=False)), markup=False)


def write_data(found: Advice, form: AdviseFormat) -> None:
    """Every projection as a record (CSV: those alone); JSON also carries the job, each
    pick with its ties and caveats, and what was left out or set aside, with why."""
    import pandas as pd

    records = [projection_record(found, p) for p in found.projections]
    if form is AdviseFormat.CSV:
        sys.stdout.write(pd.DataFrame(records).to_csv(index=False))
        return
    sys.stdout.write(json.dumps(advice_record(found, records), indent=1) + "\n")


def projection_record(found: Advice, p: Projection) -> dict[str, Any]:
    return {
        "workload": found.workload, "item_unit": found.unit, "items": found.job.items,
        "configuration": p.label, "config_id": p.config_id, "repeats": p.repeats,
        "items_per_s": p.items_per_s, "time_s": p.time_s, "startup_s": p.startup_s,
        "time_low_s": p.time_range_s[0] if p.time_range_s else None,
        "time_high_s": p.time_range_s[1] if p.time_range_s else None,
        "usd_per_hour": p.usd_per_hour, "price_source": p.price_source,
        "cost_usd": p.cost_usd,
        "cost_low_usd": p.cost_range_usd[0] if p.cost_range_usd else None,
        "cost_high_usd": p.cost_range_usd[1] if p.cost_range_usd else None,
        "energy_kwh": p.energy_kwh, "co2_kg": p.co2_kg, "marks": ",".join(p.marks),
        "projected": p.projected, "flags": p.flags}


def advice_record(found: Advice, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole answer as JSON: the job, the picks, the projections, what was set aside."""
    from orchestrator.report import advise_text

    job = found.job
    picks = {}
    for question in ("fastest", "cheapest"):
        pick = found.pick(question)
        picks[question] = None if pick is None else {
            "configuration": pick.label, "config_id": pick.config_id,
            "projected": pick.projected, "time_s": pick.time_s, "cost_usd": pick.cost_usd,
            "fits": pick.fits(job), "ties": found.ties.get(question, []),
            "notes": found.notes.get(question, []),
            "line": advise_text.pick_line(found, question)}
    return {"job": {"workload": found.workload, "item_unit": found.unit, "items": job.items,
                    "deadline_s": job.deadline_s, "budget_usd": job.budget_usd,
                    "grid_g_per_kwh": job.grid_g_per_kwh, "spot": job.spot,
                    "include_flagged": job.include_flagged},
            "picks": picks, "best_guess": found.guess, "projections": records,
            "left_out": found.left_out, "kept_with_fewer_repeats": found.dropped}
