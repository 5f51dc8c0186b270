"""`matrix db ...` and `matrix history ...`: the results store's commands (app.py adds
them); what `history` prints is history_view.py.

Heavy modules are imported inside the commands, as in app.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.cli.history_view import Format
from orchestrator.cli.options import Db
from orchestrator.database.url import store_url
from orchestrator.report.compare import RULE as COMPARE_RULE

if TYPE_CHECKING:
    import pandas as pd
    from rich.console import Console

Workload = Annotated[list[str] | None, typer.Option(
    "--workload", help="Only these workloads (repeat, or comma-separate).")]
Hardware = Annotated[list[str] | None, typer.Option(
    "--hardware", help="Only these hardware names (repeat, or comma-separate).")]
Stack = Annotated[list[str] | None, typer.Option(
    "--stack", help="Only these stacks (repeat, or comma-separate).")]
Since = Annotated[str | None, typer.Option(
    "--since", help="Only cells started on or after this date (YYYY-MM-DD, UTC).")]
FormatOption = Annotated[Format, typer.Option("--format", help="table, csv or json.")]

db_app = typer.Typer(help="The results store: every run's records in one database.",
                     no_args_is_help=True)
history_app = typer.Typer(
    help="Questions across every run in the results store (the repeat is the unit).",
    no_args_is_help=True)


@db_app.command(name="import")
def import_runs(
    sources: Annotated[list[str], typer.Argument(
        help="Run directories or s3://BUCKET/PREFIX/RUN URIs.", show_default=False)],
    db: Db = None,
    region: Annotated[str | None, typer.Option(help="The bucket's region, for s3://.")] = None,
) -> None:
    """Add runs to the store from their journals; what is there already is kept as it is."""
    from orchestrator.cli.runs import local_run
    from orchestrator.database.results_db import ResultsDB

    stores = [local_run(source, region) for source in sources]  # every one found first
    results = ResultsDB.open(store_url(db))
    try:
        for store in stores:
            written = results.import_run(store)
            typer.echo(f"{store.root}: {written.attempts} cell attempt(s), "
                       f"{written.new_attempts} new, {written.new_measurements} new "
                       "measurement(s)")
        typer.echo(f"store: {results.url.shown}")
    finally:
        results.close()


@db_app.command()
def info(db: Db = None) -> None:
    """Where the store is, its schema version, and how many runs and cells it holds."""
    from orchestrator.database.schema import open_store, stored_version

    url = store_url(db)
    conn = open_store(url, create=False)
    try:
        runs, = conn.query("SELECT COUNT(*) FROM runs")[0]
        cells, = conn.query("SELECT COUNT(*) FROM cells")[0]
        rows, = conn.query("SELECT COUNT(*) FROM measurements")[0]
        typer.echo(f"store: {url.shown} (schema version {stored_version(conn)})\n"
                   f"{runs} run(s), {cells} cell attempt(s), {rows} measurement(s)")
    finally:
        conn.close()


@dataclass(frozen=True)
class Selected:
    """What the history options select: the repeats with a throughput (history.repeats),
    their configurations-in-runs judged as the report judges (judging.judged_runs), or,
    for `best`, every timed epoch of them as `matrix advise --db` reads the store
    (store_rows.py), and the configurations-in-runs of scripts timed as a whole
    (whole_history)."""

    samples: pd.DataFrame
    runs: pd.DataFrame
    whole: pd.DataFrame
    rows: pd.DataFrame | None = None  # store_rows', with `advised`


def _selected(workload: list[str] | None, hardware: list[str] | None,
              stack: list[str] | None, since: str | None, db: str | None,
              advised: bool = False) -> Selected | None:
    """What the options select; None, said, when nothing that ended ok matches. `advised`:
    the store's rows as advise reads them instead of the judged runs (history best)."""
    import pandas as pd

    from orchestrator.database.history import (
        Filters,
        as_sequence,
        per_run,
        repeats,
        since_stamp,
        with_match_ids,
    )
    from orchestrator.database.judging import judged_runs
    from orchestrator.database.schema import open_store
    from orchestrator.database.whole_history import whole_per_run, whole_repeats

    if since is not None:
        since_stamp(since)  # a bad date is one line before the store is opened
    filters = Filters(as_sequence(workload), as_sequence(hardware), as_sequence(stack), since)
    url = store_url(db)
    conn = open_store(url, create=False)
    try:
        samples = repeats(conn, filters)
        whole = whole_per_run(conn, whole_repeats(conn, filters))
        if samples.empty and whole.empty:
            typer.echo(f"no results that ended ok in {url.shown} match")
            return None
        if advised:
            from orchestrator.database.store_rows import store_rows

            return Selected(samples, pd.DataFrame(), whole,
                            store_rows(conn, filters, samples))
        runs = (with_match_ids(judged_runs(conn, per_run(samples))) if not samples.empty
                else pd.DataFrame())
        return Selected(samples, runs, whole)
    finally:
        conn.close()


def _console() -> Console:
    from rich.console import Console

    return Console(highlight=False)


WHOLE_HEADING = "timed as a whole (no matrix_bench client): wall time and cost per run"


@history_app.command(name="best")
def best(workload: Workload = None, hardware: Hardware = None, stack: Stack = None,
         since: Since = None, format: FormatOption = Format.TABLE, db: Db = None) -> None:
    """Per workload, across all runs: `matrix advise`'s answer per million items, the
    fastest configuration and, where rows carry a price, the cheapest (the same pick as
    advise --db, the report's Best choices and the dashboard): its median items/s over its
    repeats pooled across runs, $ per million items, repeats, the latest run that measured
    it, advise's ties and caveats, and what it left out (flagged or implausible) with why.
    Scripts timed as a whole: the quickest run and the cheapest, in a table of their own."""
    from orchestrator.cli.history_view import show_frame, show_parts
    from orchestrator.database.history import best as best_of
    from orchestrator.database.whole_history import whole_best

    selected = _selected(workload, hardware, stack, since, db, advised=True)
    if selected is None:
        return
    assert selected.rows is not None  # asked for: advised=True
    picks = best_of(selected.rows, selected.samples)
    whole = whole_best(selected.whole) if not selected.whole.empty else selected.whole
    if format is not Format.TABLE:
        if format is Format.CSV:  # a list is one cell: its items joined
            picks = _joined(picks, ("ties", "notes"))
        show_parts(picks, whole, {
            "workload": "workload", "best": "best", "label": "configuration",
            "config_id": "config_id", "timing": "timing", "hardware": "hardware",
            "stack": "stack", "items_per_s": "items_per_s", "item_unit": "item_unit",
            "usd_per_million_items": "usd_per_million_items", "wall_s": "wall_s",
            "usd_per_run": "usd_per_run", "repeats": "repeats", "runs": "runs",
            "date": "date", "run": "run", "location": "location", "flags": "flags",
            "ties": "ties", "notes": "notes", "dropped": "kept_with_fewer_repeats",
            "best_guess": "best_guess", "why": "left_out_why"}, format, _console())
        return
    console = _console()  # each workload heads its picks, advise's words under each
    if not picks.empty:
        show_frame(picks, {"best": "best", "label": "configuration", "items_per_s": "median",
                           "usd_per_million_items": "$/M", "repeats": "n", "date": "date",
                           "location": "run"}, format, console, group="workload")
    if not whole.empty:
        console.print(("\n" if not picks.empty else "") + WHOLE_HEADING, markup=False)
        show_frame(whole, {"best": "best", "label": "configuration", "wall_s": "wall",
                           "usd_per_run": "$/run", "repeats": "n", "date": "date",
                           "location": "run"}, format, console, group="workload")


def _joined(frame: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """`frame` with each list in `columns` as one text, its items joined by "; "."""
    return frame.assign(**{c: ["; ".join(v) if isinstance(v, list) else v for v in frame[c]]
                           for c in columns if c in frame})


# a row's FLOP/s against the datasheet and against its node's measured ceiling (CSV, JSON)
FLOP_COLUMNS = {"achieved_flops": "achieved_flops", "peak_fraction": "peak_fraction",
                "ceiling_fraction": "ceiling_fraction",
                "node_ceiling_flops": "node_ceiling_flops"}


@history_app.command(name="trend")
def trend(workload: Workload = None, hardware: Hardware = None, stack: Stack = None,
          since: Since = None, format: FormatOption = Format.TABLE, db: Db = None,
          last: Annotated[int, typer.Option(
              "--last", min=0, help="The latest N runs of each configuration (0: all).")
          ] = 10) -> None:
    """Each configuration's figures run by run, oldest first: repeats, median items/s and
    their spread, the memory peak, the FLOP/s as a share of the datasheet peak and of the
    node's measured ceiling, and the cost per million items. Scripts timed as a whole: the
    wall time of a run and its cost, in a table of their own."""
    from orchestrator.cli.history_view import show_frame, show_parts

    selected = _selected(workload, hardware, stack, since, db)
    if selected is None:
        return
    runs, whole = selected.runs, selected.whole
    if last:
        runs = runs.groupby("match_id", sort=False).tail(last) if not runs.empty else runs
        whole = whole.groupby("match_id", sort=False).tail(last) if not whole.empty else whole
    if format is not Format.TABLE:
        show_parts(runs, whole, {
            "workload": "workload", "label": "configuration", "config_id": "config_id",
            "date": "date", "workload_version": "workload_version", "timing": "timing",
            "repeats": "repeats", "items_per_s": "items_per_s", "lowest": "lowest",
            "highest": "highest", "item_unit": "item_unit", "wall_s": "wall_s",
            "spread": "spread", "mem_peak_bytes": "mem_peak_bytes",
            "usd_per_million_items": "usd_per_million_items", "usd_per_run": "usd_per_run",
            "run": "run", "location": "location", **FLOP_COLUMNS, "flags": "flags",
            "judgement": "judgement"}, format, _console())
        return
    console = _console()  # each configuration heads its runs
    if not runs.empty:
        runs = runs.assign(label=runs["workload"] + " " + runs["label"])
        show_frame(runs, {"date": "date", "code": "code", "repeats": "n",
                          "items_per_s": "median", "spread": "spread",
                          "mem_peak_bytes": "memory", "peak_fraction": "% peak",
                          "ceiling_fraction": "% ceil", "usd_per_million_items": "$/M",
                          "location": "run"}, format, console, group="label")
    if not whole.empty:
        console.print(("\n" if not runs.empty else "") + WHOLE_HEADING, markup=False)
        whole = whole.assign(label=whole["workload"] + " " + whole["label"])
        show_frame(whole, {"date": "date", "code": "code", "repeats": "n", "wall_s": "wall",
                           "spread": "spread", "mem_peak_bytes": "memory",
                           "usd_per_run": "$/run", "location": "run"}, format, console,
                   group="label")


@history_app.command(name="regressions", help=f"""Each configuration's latest run against
its earlier runs (up to --baseline-runs, their repeats pooled). {COMPARE_RULE} Exit code 1
when any regression is marked, else 0.""")
def regressions(workload: Workload = None, hardware: Hardware = None, stack: Stack = None,
                since: Since = None, format: FormatOption = Format.TABLE, db: Db = None,
                threshold: Annotated[float, typer.Option(
                    min=0.0, max=1.0, help="The smallest change that counts (0.05: 5%).")
                ] = 0.05,
                baseline_runs: Annotated[int, typer.Option(
                    min=1, help="How many earlier runs the latest is compared with.")] = 5,
                ) -> None:
    from orchestrator.cli.history_view import show_regressions
    from orchestrator.database.history import regressions as judge

    selected = _selected(workload, hardware, stack, since, db)
    if selected is None:
        return
    if selected.samples.empty:
        typer.echo("no results with a throughput match: scripts timed as a whole have no "
                   "figure to compare (matrix history trend shows their wall times)")
        return
    found, alone = judge(selected.samples, selected.runs, threshold, baseline_runs)
    if show_regressions(found, alone, threshold, format, _console()):
        raise typer.Exit(1)
