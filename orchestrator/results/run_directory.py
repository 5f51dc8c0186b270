"""A run's directory (`RunDirectory`; docs/ARCHITECTURE.md: run identity, result records):
its journal, lock, logs and derived files. "The store" is the results store (database/),
every run in one database; this is one run's folder, and its journal is the truth.

`results.jsonl` is the truth: append-only, one record per line, fsync'd after each cell.
Each cell attempt is written as one batch, provenance first and the cell record last, so a
reader can tell a finished attempt from one torn by a kill: a batch without its cell record
is dropped when the next batch of that cell starts. Everything else in the directory is
derived from the journal and rewritten atomically.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from orchestrator import failpoints
from orchestrator.errors import (
    DiskFullError,
    MatrixWarning,
    RunDirError,
    RunLockedError,
    RunMismatchError,
    RunNotFoundError,
)
from orchestrator.results.journal import JournalLineError, NewerRecordError, parse_line
from orchestrator.results.own_files import is_own_file, own_file
from orchestrator.results.records import (
    SCHEMA_VERSION,
    CellRecord,
    MeasurementRecord,
    ProvenanceRecord,
    Record,
)

if TYPE_CHECKING:
    import pandas as pd

JOURNAL = "results.jsonl"
PARQUET = "results.parquet"
REPORT = "report.md"
LOCK = "run.lock"
FULL = (errno.ENOSPC, errno.EDQUOT)  # what a full disk or quota raises
_SAID: set[str] = set()  # the unusable lines this process has warned of: each said once


class JournalWarning(MatrixWarning):
    """A journal line that could not be used (torn by a kill, or corrupted)."""


@dataclass
class CellResult:
    """The final attempt of one cell: its cell record, provenance and measurements."""

    cell: CellRecord
    provenance: ProvenanceRecord | None
    measurements: list[MeasurementRecord] = field(default_factory=list)


def atomic_write(path: Path, data: bytes) -> None:
    """Write through a temporary file and a rename, so readers never see half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if exc.errno in FULL:
            raise disk_full(path, exc) from None
        raise unwritable(path, exc) from None


def unwritable(path: Path, exc: OSError) -> RunDirError:
    return RunDirError(f"cannot write {path}: {exc.strerror or exc} (the journal holds every "
                       "cell that ended; fix the path, or give another -o)")


def disk_full(path: Path, exc: OSError) -> DiskFullError:
    return DiskFullError(f"no space left on the device of {path} ({exc.strerror}); the "
                         "journal holds every cell that ended before: free space and run "
                         "the same command again to resume")


class RunDirectory:
    """One run directory: journal, derived files, per-cell logs and cell files, and its lock."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).absolute()
        self.journal = self.root / JOURNAL
        self.parquet = self.root / PARQUET
        self.report = self.root / REPORT
        self.logs = self.root / "logs"
        self.cells = self.root / "cells"
        self._lock_fd: int | None = None

    # -- ownership -------------------------------------------------------------------------
    def acquire(self) -> None:
        """Own the run directory for one sweep; RunLockedError if a live sweep owns it.

        The lock is an flock on `run.lock`, which the kernel drops when its owner dies
        (SIGKILL included), so a dead sweep's lock never blocks and two sweeps starting at
        once cannot both win. The file names the owner (pid, host) for the message.
        """
        try:
            for folder in (self.root, self.logs, self.cells):
                folder.mkdir(parents=True, exist_ok=True)
            self._take_lock()
        except OSError as exc:
            if exc.errno in FULL:
                raise disk_full(self.root, exc) from None
            raise RunDirError(f"cannot use {self.root} as a run directory: "
                              f"{exc.strerror or exc}"
                              f"{f' ({exc.filename})' if exc.filename else ''}") from None
        self.repair_torn_tail()

    def _take_lock(self) -> None:
        lock = self.root / LOCK
        while True:
            fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                owner = _read_lock(lock)
                raise RunLockedError(
                    f"{self.root} is in use by pid {owner.get('pid')} on {owner.get('host')}: "
                    "one sweep at a time owns a run directory; wait for it to end or stop "
                    "it") from None
            if not _same_file(fd, lock):  # its owner removed it as we opened it: again
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname()}).encode())
            self._lock_fd = fd
            return

    def release(self) -> None:
        fd = self._lock_fd
        if fd is None:
            return
        (self.root / LOCK).unlink(missing_ok=True)  # while still held: see _same_file
        os.close(fd)
        self._lock_fd = None

    # -- journal ---------------------------------------------------------------------------
    def append(self, records: Iterable[Record]) -> None:
        """Append one cell attempt's records as one batch and fsync it. On a full disk the
        journal is cut back to where it was (no half batch) and DiskFullError raised."""
        data = "".join(r.model_dump_json(exclude_none=True) + "\n" for r in records).encode()
        own_file(self.journal)
        fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW,
                     0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                half = len(data) // 2
                _write_all(fd, data[:half])
                failpoints.reached("journal-append")  # the fault tests tear a batch here
                _write_all(fd, data[half:])
                os.fsync(fd)
            except OSError as exc:
                if exc.errno not in FULL:
                    raise
                os.ftruncate(fd, size)
                raise disk_full(self.journal, exc) from None
        finally:
            os.close(fd)

    def repair_torn_tail(self) -> None:
        """End a last line that a kill left without its newline, so the next batch cannot
        merge into it: a complete record keeps its line, a torn one is cut off with a
        warning (its batch has no cell record, so that cell runs again)."""
        if not own_file(self.journal):
            return
        with open(self.journal, "r+b") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = _last_line_start(handle, size)
            handle.seek(start)
            tail = handle.read()
            if not tail or tail.endswith(b"\n"):
                return
            try:
                parse_line(tail)
                handle.write(b"\n")
            except JournalLineError:
                handle.truncate(start)
                warnings.warn(f"{self.journal}: torn last line ({len(tail)} bytes, a kill "
                              "while writing?) dropped", JournalWarning, stacklevel=2)
            handle.flush()
            os.fsync(handle.fileno())

    def read(self) -> list[Record]:
        """Every usable record in journal order. Each unusable line is a warning that names
        the file and the line, and stays where it is."""
        records: list[Record] = []
        for number, line, torn in self._lines():
            try:
                records.append(parse_line(line))
            except JournalLineError as exc:
                what = "torn last line (a kill while writing?)" if torn else "unreadable line"
                said = f"{self.journal}:{number}: {what} skipped: {exc}"
                if said not in _SAID:  # a command reads a journal up to three times
                    _SAID.add(said)
                    warnings.warn(said, JournalWarning, stacklevel=2)
        return records

    def check_appendable(self, run: str) -> None:
        """Before a sweep of `run` adds to this journal: RunMismatchError if it holds another
        matrix's run (two matrices in one directory would be counted as one) or records of
        a newer matrix-bench (one journal, one schema version); RunDirError if an output
        the sweep ends with cannot be written there."""
        for output, what in ((self.journal, "a run's journal"),
                             (self.parquet, "a run's parquet"), (self.report, "its report")):
            own_file(output, what)
        for number, line, _ in self._lines():
            try:
                record = parse_line(line)
            except NewerRecordError as exc:
                raise RunMismatchError(
                    f"{self.journal}:{number}: written by a newer matrix-bench (schema_version "
                    f"{exc.version}; this one knows {SCHEMA_VERSION}): upgrade matrix-bench "
                    "to add to this run") from None
            except JournalLineError:
                continue  # read() warns
            if record.run != run:
                raise RunMismatchError(
                    f"{self.root} holds the run of matrix {record.run!r}, not {run!r}: one "
                    "matrix name per run directory (give this one another -o)")

    def _lines(self) -> Iterator[tuple[int, bytes, bool]]:
        """(line number, line, whether it is torn: the journal's end, with no newline after
        it) of each non-empty journal line."""
        if not own_file(self.journal):  # a link is not followed; a FIFO would block
            return
        lines = self.journal.read_bytes().split(b"\n")
        for number, line in enumerate(lines, start=1):
            if line.strip():
                yield number, line, number == len(lines)  # the last split: no newline after

    def attempts(self) -> list[CellResult]:
        """Every cell attempt that reached its cell record, in journal order (the results
        store keeps them all; a rerun's earlier attempts included)."""
        pending: dict[str, list[Record]] = {}
        ended: list[CellResult] = []
        for record in self.read():
            batch = pending.setdefault(record.cell_id, [])
            if isinstance(record, ProvenanceRecord):
                batch.clear()  # a new attempt starts; records of a torn one are dropped
            batch.append(record)
            if isinstance(record, CellRecord):
                ended.append(CellResult(
                    cell=record,
                    provenance=next((r for r in batch if isinstance(r, ProvenanceRecord)), None),
                    measurements=[r for r in batch if isinstance(r, MeasurementRecord)],
                ))
                pending.pop(record.cell_id)
        return ended

    def results(self) -> list[CellResult]:
        """The final attempt of every cell that has one, in journal order of those attempts."""
        final: dict[str, CellResult] = {}
        for attempt in self.attempts():
            final.pop(attempt.cell.cell_id, None)
            final[attempt.cell.cell_id] = attempt
        return list(final.values())

    def log_tails(self) -> dict[str, str]:
        """cell_id -> the last lines of the log of each cell whose final attempt did not end
        ok (the journal keeps them; the report shows them)."""
        return {r.cell.cell_id: r.cell.log_tail for r in self.results() if r.cell.log_tail}

    # -- the flat join -----------------------------------------------------------------------
    def joined(self) -> pd.DataFrame:
        """The records as recorded, flat: one row per measurement, plus one row per cell
        without any. What is derived from them (report/frame.py) is not added here."""
        import pandas as pd

        rows = []
        for result in self.results():
            cell = result.cell.model_dump(exclude={"record", "log_tail", "inputs"})
            cell["flags"] = ",".join(result.cell.flags)
            prov = {} if result.provenance is None else result.provenance.model_dump(
                exclude={"record", *_IDENTITY})
            for column in _JSON_COLUMNS:  # dicts of varying keys: JSON text in parquet
                if prov.get(column) is not None:
                    prov[column] = json.dumps(prov[column], sort_keys=True)
            measured = [m.model_dump(exclude={"record", *_IDENTITY}) for m in result.measurements]
            for measurement in measured or [{}]:
                rows.append({**cell, **prov, **measurement})
        return pd.DataFrame(rows)


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    """The DataFrame as parquet, replacing `path` atomically."""
    import io

    buffer = io.BytesIO()
    df.to_parquet(buffer, index=False)
    atomic_write(path, buffer.getvalue())


_IDENTITY = {"schema_version", "run", "cell_id", "config_id", "repeat"}
_JSON_COLUMNS = ("data_sha256", "precision_switches", "thread_settings")  # provenance dicts


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _last_line_start(handle: BinaryIO, size: int, block: int = 65536) -> int:
    """The offset just after the file's last newline before its final byte (0 if none)."""
    end = max(size - 1, 0)
    while end > 0:
        begin = max(end - block, 0)
        handle.seek(begin)
        found = handle.read(end - begin).rfind(b"\n")
        if found >= 0:
            return begin + found + 1
        end = begin
    return 0


def _same_file(fd: int, path: Path) -> bool:
    """Whether `path` still names the file open as `fd`."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


def _read_lock(lock: Path) -> dict[str, Any]:
    try:
        found: dict[str, Any] = json.loads(lock.read_text())
        return found
    except (OSError, ValueError):
        return {}


def alive(pid: object) -> bool:
    """Whether process `pid` runs on this host (another user's counts)."""
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owned_runs(reports: Path) -> set[str]:
    """Names of the runs under `reports` that a live sweep owns (its lock's pid is alive
    here, or the lock is another host's, which this host cannot judge)."""
    owned = set()
    for lock in reports.glob(f"*/{LOCK}"):
        owner = _read_lock(lock)
        if owner.get("host") != socket.gethostname() or alive(owner.get("pid")):
            owned.add(lock.parent.name)
    return owned


def list_runs(reports: Path) -> list[tuple[Path, dict[str, int]]]:
    """Run directories under `reports` with their cell counts per final status."""
    runs = []
    for journal in sorted(reports.glob(f"*/{JOURNAL}")):
        counts: dict[str, int] = {}
        if not is_own_file(journal):  # one odd folder lists as one, and stops no other
            runs.append((journal.parent, {"(no run: its results.jsonl is not a file)": 0}))
            continue
        with warnings.catch_warnings():  # a live sweep's batch may be half written
            warnings.filterwarnings("ignore", ".*torn last line", JournalWarning)
            for result in RunDirectory(journal.parent).results():
                counts[result.cell.status.value] = counts.get(result.cell.status.value, 0) + 1
        runs.append((journal.parent, dict(sorted(counts.items()))))
    return runs


def open_existing(run_dir: Path | str) -> RunDirectory:
    store = RunDirectory(run_dir)
    if not store.journal.exists() and not store.journal.is_symlink():
        raise RunNotFoundError(f"{run_dir} holds no {JOURNAL}: not a run directory")
    return store
