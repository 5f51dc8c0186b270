"""The `matrix` command line: thin commands that parse options and call one function each.

User errors (MatrixError) become one red line and exit code 2; anything else is a bug and
keeps its traceback. Heavy modules are imported inside the commands that need them, so
`matrix --help` answers at once.
"""

from __future__ import annotations

import sys
import warnings
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from orchestrator.dashboard.command import dashboard_command
from orchestrator.database.commands import Db, db_app, history_app
from orchestrator.errors import MatrixError, MatrixWarning
from orchestrator.report.advise_view import advise_command
from orchestrator.report.compare import RULE as COMPARE_RULE
from orchestrator.report.explain_view import explain_command

if TYPE_CHECKING:
    from rich.console import Console

    from orchestrator.plan.planner import Selector

app = typer.Typer(
    help="Run deep-learning training benchmarks over a matrix of hardware and software stacks.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)

MatrixFile = Annotated[Path, typer.Argument(help="The matrix file (YAML).", show_default=False)]
Output = Annotated[Path | None, typer.Option("--output", "-o",
                                             help="Run directory (default reports/<name>).")]
Only = Annotated[list[str] | None, typer.Option(
    "--only", help="Run a subset: KEY=V1,V2 where KEY is hardware, stack, workload or a "
                   "parameter; repeat to combine.")]
Rerun = Annotated[bool, typer.Option("--rerun", help="Redo cells that already finished ok.")]
Retry = Annotated[list[str] | None, typer.Option(
    "--retry", help="Run again the cells that ended with these statuses though nothing that "
                    "shapes them changed, e.g. --retry unsupported,oom.")]
app.add_typer(db_app, name="db")
app.add_typer(history_app, name="history")
app.command(name="advise")(advise_command)
app.command(name="explain")(explain_command)
app.command(name="dashboard")(dashboard_command)


def _console() -> Console:
    from rich.console import Console
    return Console(highlight=False, soft_wrap=True)


def _selectors(only: list[str] | None) -> tuple[Selector, ...]:
    from orchestrator.plan.planner import Selector
    return tuple(Selector.parse(text) for text in only or [])


@app.command()
def run(
    matrix_file: MatrixFile,
    output: Output = None,
    ray_address: Annotated[str | None, typer.Option(
        "--ray-address", envvar="RAY_ADDRESS",
        help="Use this Ray cluster (default: start an embedded local Ray).")] = None,
    no_ray: Annotated[bool, typer.Option("--no-ray", help="Run the cells serially in this "
                                                           "environment, without Ray.")] = False,
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
) -> None:
    """Run every cell of the matrix that has not ended yet, then write the report; a cell
    that failed with the run (crashed, timeout, node lost...) runs again, one whose
    configuration gave its end (unsupported, oom...) only when its inputs change or with
    --retry. Each cell is journalled in the run directory and indexed in the results store."""
    from orchestrator.plan.retry import parse_retry
    from orchestrator.run.sweep import SweepOptions, run_sweep

    options = SweepOptions(output=output, ray_address=ray_address, no_ray=no_ray,
                           only=_selectors(only), rerun=rerun, retry=parse_retry(retry),
                           allow_over_budget=allow_over_budget, verbose=verbose, db=db)
    summary = run_sweep(matrix_file, options, _console())
    if summary.interrupted or summary.stopped:
        raise typer.Exit(130 if summary.interrupted else 1)


class PlanForm(StrEnum):
    TEXT = "text"
    JSON = "json"
    CSV = "csv"


@app.command()
def plan(matrix_file: MatrixFile, output: Output = None, only: Only = None,
         rerun: Rerun = False, retry: Retry = None,
         verbose: Annotated[bool, typer.Option(
             "--verbose", "-v", help="List every cell, to run and skipped.")] = False,
         form: Annotated[PlanForm, typer.Option(
             "--format", help="text (a summary), or json or csv: every cell, for scripts.")
         ] = PlanForm.TEXT) -> None:
    """Show what would run (per hardware, stack and workload), what is skipped and why, the
    images, time and cost; every cell with --verbose, or as JSON or CSV."""
    from orchestrator.plan.retry import parse_retry
    from orchestrator.plan.view import show_plan

    show_plan(matrix_file, output, _selectors(only), rerun, _console(), verbose,
              form.value, parse_retry(retry))


@app.command()
def build(matrix_file: MatrixFile, output: Output = None) -> None:
    """Build the image of every stack that runs in one (only those missing), and push them
    where the matrix names a registry."""
    from orchestrator.images.build import build_images, image_stacks
    from orchestrator.run.sweep import run_dir_for
    from orchestrator.spec.load import load_spec

    spec = load_spec(matrix_file)
    stacks = image_stacks(spec)
    if not stacks:
        typer.echo(f"{matrix_file}: no stack runs in an image (all use executor: process)")
        return
    console = _console()
    built = build_images(spec, stacks, run_dir_for(spec, output), console)
    for name, ref in built.refs.items():
        state = "built" if name in built.built else "cached"
        console.print(f"{name}: {ref.tag} {state}, id {ref.image_id[:19]}, "
                      f"{ref.size_bytes / 1e9:.2f} GB" + (f", {ref.repo_digest}"
                                                           if ref.repo_digest else ""))
    if built.failures:
        raise typer.Exit(1)


@app.command()
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
    from orchestrator.images.resolver import lock_command

    lock_command(matrix_file, stack or [], wheelhouse, output, typer.echo)


@app.command(name="cluster-config")
def cluster_config(
    matrix_file: MatrixFile,
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the YAML.")],
    ssh_cidr: Annotated[str | None, typer.Option(
        help="SSH ingress, e.g. 203.0.113.7/32 (default aws.ssh_cidr).")] = None,
) -> None:
    """Write the Ray cluster-launcher config of the matrix's EC2 hardware, checked against
    Ray's schema, and make (or put right) its security group `matrix-bench-<name>`: SSH from
    the one range, Ray among the nodes, nothing else. Needs AWS credentials; the AMI is
    aws.ami or the Deep Learning Base AMI (SSM)."""
    from orchestrator.providers.aws.config_file import write_cluster_config

    typer.echo(write_cluster_config(matrix_file, output, ssh_cidr))


@app.command()
def cleanup(
    region: Annotated[str, typer.Option(help="The AWS region to sweep.")] = "us-east-1",
    reports: Annotated[Path, typer.Option(help="Where this machine's runs live.")] = Path(
        "reports"),
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List, change nothing.")] = False,
    provider: Annotated[list[str] | None, typer.Option(help="Only this provider's (aws, "
                                                       "slurm); may repeat.")] = None,
) -> None:
    """Remove what runs no live sweep owns left behind, each provider its own (EC2
    instances, key pairs, security groups; Slurm jobs), and list it; a provider that cannot
    be asked (no credentials, no Slurm) is named, with exit code 1."""
    from orchestrator.providers import provider_names, remove_leftovers
    from orchestrator.results.store import owned_runs

    names = provider or provider_names()
    actions, failures = remove_leftovers(names, set(owned_runs(reports)), dry_run, region)
    typer.echo("".join(line + "\n" for line in failures), err=True, nl=False)
    typer.echo("".join(("would " if dry_run else "") + a + "\n" for a in actions), nl=False)
    if not actions and not failures:
        typer.echo(f"nothing left behind (checked: {', '.join(names)}; region {region})")
    if failures:
        raise typer.Exit(1)


@app.command()
def validate(
    matrix_file: MatrixFile,
    offline: Annotated[bool, typer.Option("--offline", help="Ask no package index.")] = False,
) -> None:
    """Check a matrix file; errors name the file, line and field. Notes what its images
    still need before they can build (a lock file). A framework version newer than the
    release tables is looked up on the package index (5 s at most)."""
    from orchestrator.plan.view import grid_counts, validation_notes
    from orchestrator.spec.load import load_spec
    from orchestrator.spec.release_index import ReleaseIndex

    spec = load_spec(matrix_file, ReleaseIndex.offline() if offline else ReleaseIndex.here())
    typer.echo(f"{matrix_file}: ok: {grid_counts(spec)}; `matrix plan` says which run here")
    for note in validation_notes(spec):
        typer.echo(f"note: {note}")


@app.command()
def workloads(
    name: Annotated[str | None, typer.Argument(
        help="A workload: list its parameters.", show_default=False)] = None,
    matrix: Annotated[Path | None, typer.Option(
        "--matrix", "-m", help="Also this matrix file's own workloads (path:, command:).",
        show_default=False, exists=True, dir_okay=False)] = None,
) -> None:
    """List the workloads a matrix can name (built-in, installed packages', and with
    --matrix that matrix's own folders), with where each comes from and what it counts;
    with NAME, its parameters (type, default, allowed values, meaning) and presets."""
    from orchestrator.workload_view import show_workload, show_workloads

    if name is None:
        show_workloads(_console(), matrix)
    else:
        show_workload(name, _console(), matrix)


@app.command(name="new-workload")
def new_workload(
    name: Annotated[str, typer.Argument(
        help="The workload's name (ASCII letters, digits and _, at most 80).",
        show_default=False)],
    output: Annotated[Path, typer.Option("--output", "-o", help="The folder to create.")],
    package: Annotated[bool, typer.Option(
        help="A distribution to install: pyproject.toml, the workload as a package.")] = False,
) -> None:
    """Make a workload folder to start from: a small PyTorch model on synthetic data with its
    parameters, a tiny preset, a FLOP model, a test and example.yaml, which runs as made:
    `matrix run DIR/example.yaml` (with --package, once `pip install -e DIR` is done)."""
    from orchestrator.scaffold import new_workload as scaffold

    written = scaffold(name, output, package)
    typer.echo(f"{output}: {', '.join(str(p.relative_to(output)) for p in written)}\n"
               + (f"install it: pip install -e {output}\n" if package else "")
               + f"run it: matrix run {output / 'example.yaml'}")


@app.command()
def schema() -> None:
    """Print the JSON Schema of the matrix file (for editors)."""
    import json

    from orchestrator.spec.json_schema import json_schema
    typer.echo(json.dumps(json_schema(), indent=2))


@app.command(name="ls")
def list_runs(reports: Annotated[Path, typer.Option(help="Where runs live.")] = Path("reports"),
              ) -> None:
    """List the runs under reports/ with their cells per status."""
    from orchestrator.results.store import list_runs as find_runs

    runs = find_runs(reports)
    if not runs:
        typer.echo(f"no runs under {reports}")
    for run_dir, counts in runs:
        summary = ", ".join(f"{n} {s}" if n else s for s, n in counts.items()) or "no cells"
        typer.echo(f"{run_dir}: {summary}")


@app.command()
def fetch(uri: Annotated[str, typer.Argument(help="s3://bucket/prefix/<run>", show_default=False)],
          output: Annotated[Path | None, typer.Option(
              "--output", "-o", help="Where to put it (default reports/<run>).")] = None,
          region: Annotated[str | None, typer.Option(help="The bucket's region.")] = None,
          ) -> None:
    """Download a run's results from S3 into a local run directory."""
    import boto3

    from orchestrator.providers.aws.s3 import download_run, split_uri

    _, prefix = split_uri(uri)
    destination = output or Path("reports") / prefix.rstrip("/").split("/")[-1]
    download_run(boto3.client("s3", region_name=region), uri.rstrip("/"), destination)
    typer.echo(f"fetched {uri} into {destination}; `matrix report {destination}` redraws it")


@app.command()
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
    from orchestrator.errors import RunDirError
    from orchestrator.report.frame import merged_frame, run_frame
    from orchestrator.report.writer import write_report
    from orchestrator.results.runs import local_run
    from orchestrator.results.store import write_parquet
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


@app.command(help=f"""Compare two runs configuration by configuration: did NEW get slower
or faster than BASE? {COMPARE_RULE} Exit code 1 when any regression is marked, else 0.""")
def compare(
    base: Annotated[str, typer.Argument(help="The base run: a run directory or s3://...",
                                        show_default=False)],
    new: Annotated[str, typer.Argument(help="The new run: a run directory or s3://...",
                                       show_default=False)],
    threshold: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="The smallest change that counts (0.05: 5%).")] = 0.05,
    region: Annotated[str | None, typer.Option(help="The bucket's region, for s3://.")] = None,
) -> None:
    from orchestrator.report.compare import comparable, compare_runs
    from orchestrator.report.compare_view import show_comparison
    from orchestrator.report.frame import run_frame
    from orchestrator.results.runs import local_run

    base_frame = comparable(run_frame(local_run(base, region)), "BASE", base)
    new_frame = comparable(run_frame(local_run(new, region)), "NEW", new)
    found = compare_runs(base_frame, new_frame, threshold)
    if show_comparison(found, base_frame, new_frame, threshold, _console()):
        raise typer.Exit(1)


def _show_matrix_warnings_in_one_line() -> None:
    """A MatrixWarning (a torn journal line, say) is one yellow line, not a source excerpt."""
    default = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        if issubclass(category, MatrixWarning):
            typer.secho(f"warning: {message}", fg="yellow", err=True)
        else:
            default(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def main() -> None:
    from orchestrator.redact import guard_logging

    guard_logging()
    _show_matrix_warnings_in_one_line()
    try:
        app()
    except MatrixError as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
