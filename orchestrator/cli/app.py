"""The `matrix` command line: thin commands that parse options and call one function each,
every one registered here, in the order `matrix --help` lists them.

User errors (MatrixError) become one red line and exit code 2; anything else is a bug and
keeps its traceback. Heavy modules are imported inside the commands that need them, so
`matrix --help` answers at once.
"""

from __future__ import annotations

import sys
import warnings
from typing import TextIO

import typer

from orchestrator.cli.advise_view import advise_command
from orchestrator.cli.dashboard_command import dashboard_command
from orchestrator.cli.explain_view import explain_command
from orchestrator.cli.matrix_commands import build, lock, plan, run, schema, validate
from orchestrator.cli.provider_commands import cleanup, cluster_config
from orchestrator.cli.results_commands import COMPARE_HELP, compare, fetch, list_runs, report
from orchestrator.cli.standard_output import (
    StandardOutputError,
    abandon_standard_output,
    finish_standard_output,
    guard_standard_output,
    reader_left,
)
from orchestrator.cli.store_commands import db_app, history_app
from orchestrator.cli.workload_commands import new_workload, workloads
from orchestrator.errors import MatrixError, MatrixWarning, escaped

app = typer.Typer(
    help="Run deep-learning training benchmarks over a matrix of hardware and software stacks.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)
app.add_typer(db_app, name="db")
app.add_typer(history_app, name="history")
app.command(name="advise")(advise_command)
app.command(name="explain")(explain_command)
app.command(name="dashboard")(dashboard_command)
app.command()(run)
app.command()(plan)
app.command()(build)
app.command()(lock)
app.command(name="cluster-config")(cluster_config)
app.command()(cleanup)
app.command()(validate)
app.command()(workloads)
app.command(name="new-workload")(new_workload)
app.command()(schema)
app.command(name="ls")(list_runs)
app.command()(fetch)
app.command()(report)
app.command(help=COMPARE_HELP)(compare)


def _show_matrix_warnings_in_one_line() -> None:
    """A MatrixWarning (a torn journal line, say) is one yellow line, not a source excerpt."""
    default = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        if issubclass(category, MatrixWarning):
            typer.secho(f"warning: {escaped(str(message))}", fg="yellow", err=True)
        else:
            default(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def main() -> None:
    from orchestrator.redact import guard_logging

    guard_logging()
    _show_matrix_warnings_in_one_line()
    guard_standard_output()
    try:
        # not standalone: a usage error the CLI framework finds itself (a value out of its
        # range, not a choice, an unknown option) is one red line here, as a MatrixError
        # is, not its boxed panel
        code = app(standalone_mode=False)
        finish_standard_output()
    except StandardOutputError as exc:
        abandon_standard_output()
        if not reader_left(exc):
            typer.secho(f"error: cannot write the standard output: {exc.strerror}", fg="red",
                        err=True)
        sys.exit(1)
    except _usage_errors() as exc:
        if type(exc).__name__ != "NoArgsIsHelpError":  # that one has printed the help
            typer.secho(f"error: {escaped(getattr(exc, 'format_message', exc.__str__)())}",
                        fg="red", err=True)
        sys.exit(getattr(exc, "exit_code", 2))
    except typer.Abort:
        typer.secho("error: aborted", fg="red", err=True)
        sys.exit(1)
    except MatrixError as exc:  # what it echoes of the input is escaped, not acted on
        typer.secho(f"error: {escaped(str(exc))}", fg="red", err=True)
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)  # a command's typer.Exit(code)


def _usage_errors() -> tuple[type[Exception], ...]:
    """The CLI framework's own errors of use: typer's (its click is built in since 0.26),
    and click's where typer uses the click package."""
    found: list[type[Exception]] = [typer.TyperException]
    try:
        import click
    except ImportError:
        return tuple(found)
    return (*found, click.ClickException)
