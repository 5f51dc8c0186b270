"""A cell's log as the driver reads it: its tail in bounded memory, and a cap on its size.

A workload may print without end (1 GB once raised the driver to 2.1 GB: the tail was found
by reading the whole log). The tail is read from the end, at most TAIL_READ_BYTES; a log
past LOG_CAP_BYTES keeps its first and last LOG_KEEP_BYTES and says, where the cut is, how
much was cut. Both run in bounded memory, in blocks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

LOG_TAIL_LINES = 40
LOG_TAIL_CHARS = 4000
TAIL_READ_BYTES = 64 * 1024  # LOG_TAIL_CHARS of 4-byte characters, many times over
LOG_CAP_BYTES = 64 * 2**20
LOG_KEEP_BYTES = 8 * 2**20
BLOCK = 2**20


def tail_of(log_file: Path) -> str:
    """The last lines of a log, as cell records and build failures carry them."""
    try:
        with open(log_file, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - TAIL_READ_BYTES))
            data = handle.read(TAIL_READ_BYTES)
    except (FileNotFoundError, IsADirectoryError):
        return ""
    lines = data.decode("utf-8", errors="replace").splitlines()
    if size > TAIL_READ_BYTES:
        lines = lines[1:]  # the first line read is cut at its start
    return "\n".join(lines[-LOG_TAIL_LINES:])[-LOG_TAIL_CHARS:]


def cap_log(log_file: Path, cap: int = LOG_CAP_BYTES, keep: int = LOG_KEEP_BYTES) -> int:
    """Cut a log longer than `cap` to its first and last `keep` bytes, with a line where
    the cut is that says how much went; the bytes cut (0 where it was short enough)."""
    try:
        size = log_file.stat().st_size
    except FileNotFoundError:
        return 0
    if size <= cap or not log_file.is_file():
        return 0
    cut = size - 2 * keep
    kept = log_file.with_name(log_file.name + ".cut")
    with open(log_file, "rb") as source, open(kept, "wb") as target:
        _copy(source, target, keep)
        target.write(f"\n[matrix-bench: {cut:,} bytes of this log cut here: it held "
                     f"{size:,} bytes; its first and last {keep:,} are kept]\n".encode())
        source.seek(size - keep)
        _copy(source, target, keep)
    os.replace(kept, log_file)
    return cut


def _copy(source: BinaryIO, target: BinaryIO, count: int) -> None:
    while count > 0:
        block = source.read(min(BLOCK, count))
        if not block:
            return
        target.write(block)
        count -= len(block)
