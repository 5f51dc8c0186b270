"""A run's files are its own: the journal, the parquet and the report a sweep reads and
writes are regular files inside the run directory, or absent.

A symbolic link there is followed by every open: a journal linked to a file elsewhere would
have its last line cut as "torn" and the run appended to it, and one linked to /dev/zero is
read until the kernel kills the reader. A folder or a FIFO fails to read, or blocks. So each
is refused in one line before it is opened, on every path that opens it (run_directory.py),
and never followed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from orchestrator.errors import RunDirError


def own_file(path: Path, what: str = "a run's journal") -> bool:
    """Whether `path` exists as a regular file (False where it is absent); RunDirError,
    in one line, for a symbolic link or anything that is not a regular file. `what`: the
    file, for the message."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(mode):
        raise RunDirError(f"{path} is a symbolic link: {what} is a file of the run itself, "
                          "and matrix-bench does not follow links out of it (move the link "
                          "away, or give another -o)")
    if not stat.S_ISREG(mode):
        raise RunDirError(f"{path} is not a file: {what} is a file, so this is no run "
                          "directory matrix-bench wrote (move it away, or give another -o)")
    return True


def is_own_file(path: Path) -> bool:
    """Whether `path` is a regular file of its own (not a link, folder or FIFO): own_file's
    answer, for a listing that shows an odd entry rather than stopping at it."""
    try:
        return own_file(path)
    except RunDirError:
        return False
