"""The standard output as a command writes it: a write that fails (a full disk, /dev/full,
a reader that left) is told apart from every other OSError, so `main` can say it in one
line instead of a traceback from whichever print happened to hit it.

Every printer of the CLI (typer's echo, rich's console, a json dump) writes through
`sys.stdout`, so the guard sits under it: the same text stream, over a raw file whose
failures are StandardOutputError.
"""

from __future__ import annotations

import errno
import io
import os
import sys


class StandardOutputError(OSError):
    """A write to the standard output failed; an OSError still, for code that expects one."""


class _GuardedOutput(io.RawIOBase):
    """The standard output's file descriptor, its write failures named."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        try:
            return os.write(self._fd, data)
        except OSError as exc:
            raise StandardOutputError(exc.errno, exc.strerror) from None


def guard_standard_output() -> None:
    """Put the guard under `sys.stdout`, keeping its encoding and line buffering; left as
    it is when stdout is not a file descriptor (a test's captured stream)."""
    stream = sys.stdout
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    stream.flush()
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(_GuardedOutput(fd)), encoding=stream.encoding,
        errors=stream.errors, line_buffering=bool(stream.line_buffering), write_through=False)


def finish_standard_output() -> None:
    """Write what is still buffered, so a failure is raised here, not at the interpreter's
    exit where it can only be printed as 'Exception ignored'."""
    sys.stdout.flush()


def abandon_standard_output() -> None:
    """After a failed write: what is left in the buffer goes nowhere, so the interpreter's
    own flush at exit does not fail a second time."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)


def reader_left(exc: StandardOutputError) -> bool:
    """The reader closed the pipe (`matrix plan | head`): nothing to tell anyone."""
    return exc.errno == errno.EPIPE
