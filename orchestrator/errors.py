"""Narrow exception types for user errors; the CLI turns each into one red line and exit code 2.

Anything that is not a MatrixError is a bug and keeps its traceback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# C0 and C1 controls, DEL, and the bidirectional overrides and isolates (U+202E reverses
# what follows it on screen): each is shown as its code, never acted on
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def escaped(text: str) -> str:
    """`text` with every control character as its code (`\\x1b`, `\\u202e`): what a
    message echoes of the user's input (a name, a path) can neither drive the terminal
    nor reorder the line."""
    return _CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}" if ord(m.group()) > 0xff
                         else f"\\x{ord(m.group()):02x}", text)


class MatrixWarning(UserWarning):
    """Something the user should know that does not stop the command; shown as one line."""


class SpecWarning(MatrixWarning):
    """A matrix file that loads but holds something likely unintended (a rule that changes
    nothing); located like a SpecError."""


class MatrixError(Exception):
    """Bad input or a bad environment: the user can fix it, no traceback needed."""


@dataclass
class SpecError(MatrixError):
    """A matrix file that cannot be used, located as precisely as the file allows."""

    path: Path | str  # the matrix file
    line: int | None  # 1-based line of the offending node, when known
    field: str  # dotted path of the field, e.g. "workloads[0].params.batch_size"
    problem: str  # what is wrong and what was expected

    def __post_init__(self) -> None:
        self.problem = " ".join(self.problem.split())  # always one line at the CLI
        if not self.field.isprintable():  # a key with a newline, say: shown escaped
            self.field = repr(self.field)
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else f"{self.path}"
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{field} {self.problem}"


class UnknownWorkloadError(MatrixError):
    """A workload name with no folder under workloads/."""


class RunLockedError(MatrixError):
    """Another live sweep owns the run directory."""


class RunMismatchError(MatrixError):
    """A sweep that would add to a run directory another matrix (or matrix-bench) wrote."""


class RunDirError(MatrixError):
    """A run directory, or a file in it, that cannot be created or written."""


class RunNotFoundError(MatrixError):
    """A run directory that does not exist or holds no journal."""


class DiskFullError(MatrixError):
    """The run directory's file system filled up while results were written."""


class DispatchError(MatrixError):
    """The dispatcher cannot start: Ray missing, unreachable cluster address, and the like."""


class DriverNodeLost(DispatchError):
    """The Ray node this driver runs on died and no live node on this machine can take the
    driver over: the cells not yet started cannot run from here. The sweep stops, keeps
    what finished, and says to run the same command again."""


class BudgetError(MatrixError):
    """A plan whose estimated cost is over the matrix's budget_usd."""


def first_line(exc: BaseException) -> str:
    """An error's first line, at most 200 characters, or its type where it says nothing: how
    a failure from a tool or an SDK is shown in one line."""
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]
