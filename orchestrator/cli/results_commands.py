"""The commands that read runs already made: `matrix ls`, `fetch` (from S3), `report` (one
run or several merged) and `compare` (two runs, configuration by configuration)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.options import console
from orchestrator.report.compare import RULE as COMPARE_RULE


def list_runs(reports: Annotated[Path, typer.Option(help="Where runs live.")] = Path("reports"),
              ) -> None:
    """List the runs under reports/ with their cells per status."""
    from orchestrator.results.run_directory import list_runs as find_runs

    runs = find_runs(reports)
    if not runs:
        typer.echo(f"no runs under {reports}")
    for run_dir, counts in runs:
        summary = ", ".join(f"{n} {s}" if n else s for s, n in counts.items()) or "no cells"
        typer.echo(f"{run_dir}: {summary}")


def fetch(uri: Annotated[str, typer.Argument(help="s3://bucket/prefix/<run>", show_default=False)],
          output: Annotated[Path | None, typer.Option(
              "--output", "-o", help="Where to put it (default reports/<run>).")] = None,
          region: Annotated[str | None, typer.Option(help="The bucket's region.")] = None,
          ) -> None:
    """Download a run's results from S3 into a local run directory."""
    import boto3

    from orchestrator.errors import RunDirError
    from orchestrator.providers.aws.s3 import download_run, split_uri
    from orchestrator.results.run_directory import JOURNAL

    _, prefix = split_uri(uri)
    destination = output or Path("reports") / prefix.rstrip("/").split("/")[-1]
    journal = destination / JOURNAL
    if journal.exists() or journal.is_symlink():  # a local run's cells are never replaced
        raise RunDirError(f"{destination} holds a run already ({JOURNAL}): fetch into another "
                          "folder with -o DIR, or move that run away first")
    download_run(boto3.client("s3", region_name=region), uri.rstrip("/"), destination)
    typer.echo(f"fetched {uri} into {destination}; `matrix report {destination}` redraws it")


def report(
    sources: Annotated[list[str], typer.Argument(
        help="Run directories or s3://BUCKET/PREFIX/RUN URIs; several are merged.",
        show_default=False)],
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Where to write a merged report (required for several runs; "
                               "default for one: its own directory).")] = None,
    region: Annotated[str | None, typer.Option(help="The bucket's region, for s3://.")] = None,
) -> None:
    """Write the parquet of one or many runs merged, and report.md with its plots: tables per
    workload (and in the seeds' shapes), best choices, scaling, cost, failures, environment."""
    from orchestrator.cli.runs import local_run
    from orchestrator.errors import RunDirError
    from orchestrator.report.frame import merged_frame, run_frame
    from orchestrator.report.writer import write_report
    from orchestrator.results.run_directory import write_parquet
    from orchestrator.run.interrupts import signals_deferred
    from orchestrator.spec.job import common_job

    stores = list({s.root.resolve(): s for s in (local_run(x, region) for x in sources)}
                  .values())
    if len(stores) > 1 and output is None:
        raise typer.BadParameter("several runs are merged into a new directory: give -o DIR")
    out_dir = output or stores[0].root
    if output is not None and (output / "results.jsonl").exists() and not (
            len(stores) == 1 and output.resolve() == stores[0].root.resolve()):
        raise RunDirError(f"{output} holds another run (its results.jsonl), whose report and "
                          "parquet this would overwrite: give a new or empty folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunDirError(f"cannot write {out_dir}: {exc.strerror or exc}") from None
    df = merged_frame(stores) if len(stores) > 1 else run_frame(stores[0])
    if df.empty or "cell_id" not in df:
        raise RunDirError(f"{', '.join(str(s.journal) for s in stores)}: no cell record (an "
                          "empty journal, or only lines this matrix-bench cannot read): "
                          "nothing to report")
    with signals_deferred() as pending:  # both whole, of the same journal
        write_parquet(df, out_dir / "results.parquet")
        path = write_report(out_dir, df, title=None if len(stores) == 1 else
                            f"{out_dir.name}: {', '.join(s.root.name for s in stores)}",
                            log_tails={k: v for s in stores for k, v in s.log_tails().items()},
                            job=common_job([s.root for s in stores]))
    typer.echo(f"results: {out_dir / 'results.parquet'}\nreport:  {path}")
    if pending:
        raise typer.Exit(130)


COMPARE_HELP = f"""Compare two runs configuration by configuration: did NEW get slower
or faster than BASE? {COMPARE_RULE} Exit code 1 when any regression is marked, else 0."""


def compare(
    base: Annotated[str, typer.Argument(help="The base run: a run directory or s3://...",
                                        show_default=False)],
    new: Annotated[str, typer.Argument(help="The new run: a run directory or s3://...",
                                       show_default=False)],
    threshold: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="The smallest change that counts (0.05: 5%).")] = 0.05,
    region: Annotated[str | None, typer.Option(help="The bucket's region, for s3://.")] = None,
) -> None:
    from orchestrator.cli.compare_view import show_comparison
    from orchestrator.cli.runs import local_run
    from orchestrator.report.compare import comparable, compare_runs
    from orchestrator.report.frame import run_frame

    base_frame = comparable(run_frame(local_run(base, region)), "BASE", base)
    new_frame = comparable(run_frame(local_run(new, region)), "NEW", new)
    found = compare_runs(base_frame, new_frame, threshold)
    if show_comparison(found, base_frame, new_frame, threshold, console()):
        raise typer.Exit(1)
