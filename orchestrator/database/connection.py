"""One connection to the store, SQLite or PostgreSQL, behind the few calls the store makes.

The two differ here only: how to connect, the parameter marker (`?` or `%s`), how a write
transaction takes its lock, and which exceptions they raise. Everything else (the tables,
`INSERT ... ON CONFLICT DO NOTHING`, window functions) is SQL both speak.

- SQLite runs in WAL mode, and every write transaction starts with `BEGIN IMMEDIATE`, so
  two sweeps on one machine take turns instead of failing. The wait for another's write
  lock is a loop of short busy timeouts, up to `lock_s`: Ctrl-C waits for one, not for all.
- PostgreSQL: a schema change holds an advisory lock. Every operation is bounded
  (`Bounds`: connect, statement and lock, from MATRIX_BENCH_DB_*_S), on the server
  (statement_timeout, lock_timeout) and on this side: a server that stops answering (a
  frozen one enforces nothing) has its socket shut after the statement bound and a grace,
  so the call fails like a store that went away.

Every driver error leaves as StoreError, its message cleaned of the URL's password.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.database.url import StoreURL
from orchestrator.errors import MatrixError

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_LOCK = 0x6D62  # PostgreSQL advisory lock key held while the schema is created or migrated
SQLITE_BUSY_SLICE_S = 0.25  # one busy wait of SQLite's, which no signal interrupts
CUT_GRACE_S = 5.0  # past the statement bound, before this side gives up on the server


IN_CHUNK = 500  # values per IN (...): well under every driver's limit on parameters

@dataclass(frozen=True)
class Bounds:
    """How long one store operation may take, in seconds; each settable by its variable."""

    connect_s: float = 10.0  # MATRIX_BENCH_DB_CONNECT_S
    statement_s: float = 30.0  # MATRIX_BENCH_DB_STATEMENT_S
    lock_s: float = 10.0  # MATRIX_BENCH_DB_LOCK_S: another writer's lock, the schema's

    @classmethod
    def from_environment(cls) -> Bounds:
        given = {}
        for field in ("connect_s", "statement_s", "lock_s"):
            name = f"MATRIX_BENCH_DB_{field.upper()}"
            text = os.environ.get(name)
            if text is None:
                continue
            try:
                value = float(text)
            except ValueError:
                value = -1.0
            if not 0 < value <= 86400:
                raise StoreError(f"{name}={text!r} is not a number of seconds (0 to 86400)")
            given[field] = value
        return cls(**given)


class StoreError(MatrixError):
    """The store could not be reached, read or written."""


class StoreUnreachableError(StoreError):
    """The store cannot be opened at all (a sweep refuses to start)."""


class Connection:
    """A DB-API connection with the store's calls: `?` parameters on both databases."""

    def __init__(self, url: StoreURL, raw: Any, bounds: Bounds | None = None) -> None:
        self.url, self.raw = url, raw
        self.postgres = url.kind == "postgresql"
        self.bounds = bounds or Bounds()

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.postgres else sql

    def frame(self, sql: str, params: Sequence[Any], columns: Sequence[str]) -> pd.DataFrame:
        """The query's rows as a frame whose text columns hold Python strings (object), not
        pandas' Arrow-backed default: the store's answers iterate, join and filter them by
        the thousand, and Arrow's per-value access cost the dashboard seconds at 50,000
        rows."""
        import pandas as pd

        found = pd.DataFrame(self.query(sql, params), columns=list(columns))
        text = [c for c in found.columns if pd.api.types.is_string_dtype(found[c].dtype)
                and not pd.api.types.is_object_dtype(found[c].dtype)]
        return found.astype({c: object for c in text}) if text else found

    def json_number(self, column: str, key: str) -> str:
        """SQL for the number under `key` of the JSON text in `column` (NULL where absent),
        in this store's dialect: the database reads a record's field, not Python per row.
        `key` is the code's own (a field name), never a user's text."""
        text = self.json_text(column, key)
        return f"CAST({text} AS DOUBLE PRECISION)" if self.postgres else text

    def json_text(self, column: str, key: str) -> str:
        """SQL for the text (a number: as json_number) under `key` of the JSON in `column`."""
        if not key.isidentifier():
            raise ValueError(f"not a field name: {key!r}")
        if self.postgres:
            return f"(CAST({column} AS json) ->> '{key}')"
        return f"json_extract({column}, '$.{key}')"

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.errors("read"), self._bounded():
            cursor = self.raw.cursor()
            cursor.execute(self._sql(sql), tuple(params))
            rows: list[tuple[Any, ...]] = cursor.fetchall()
            return rows

    def query_in(self, sql: str, values: Sequence[Any], after: Sequence[Any] = ()
                 ) -> list[tuple[Any, ...]]:
        """`sql`, whose `{}` is the list of an IN (...), over `values` in chunks of IN_CHUNK
        (every driver limits a statement's parameters); `after`: the parameters that follow
        the list. The rows of every chunk."""
        rows: list[tuple[Any, ...]] = []
        for start in range(0, len(values), IN_CHUNK):
            chunk = list(values[start:start + IN_CHUNK])
            rows += self.query(sql.format(", ".join("?" for _ in chunk)), [*chunk, *after])
        return rows

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement inside `transaction()`; the rows it changed."""
        with self._bounded():
            cursor = self.raw.cursor()
            cursor.execute(self._sql(sql), tuple(params))
            return int(cursor.rowcount)

    def insert_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        """Run one statement per row inside `transaction()`; the rows inserted."""
        if not rows:
            return 0
        with self._bounded():
            cursor = self.raw.cursor()
            cursor.executemany(self._sql(sql), rows)
            return int(cursor.rowcount)

    @contextlib.contextmanager
    def _bounded(self) -> Iterator[None]:
        """PostgreSQL: past the statement bound and a grace, shut the connection's socket, so
        a call waiting on a server that no longer answers fails instead of waiting for
        ever. The server's own statement_timeout ends a slow statement before that."""
        if not self.postgres:
            yield
            return
        timer = threading.Timer(self.bounds.statement_s + CUT_GRACE_S, self._cut)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()

    def _cut(self) -> None:
        with contextlib.suppress(Exception):
            sock = socket.socket(fileno=os.dup(self.raw.fileno()))
            try:
                sock.shutdown(socket.SHUT_RDWR)
            finally:
                sock.close()

    @contextlib.contextmanager
    def transaction(self, schema: bool = False) -> Iterator[Connection]:
        """A write transaction: committed whole or not at all. `schema`: also hold the lock
        that makes creating and migrating the tables one writer's job."""
        with self.errors("write"):
            if self.postgres:
                with self._bounded():
                    self.raw.execute("BEGIN")
                try:
                    if schema:
                        self.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))
                    yield self
                except BaseException:
                    with contextlib.suppress(Exception), self._bounded():
                        self.raw.execute("ROLLBACK")
                    raise
                with self._bounded():
                    self.raw.execute("COMMIT")
                return
            self._begin_immediate()
            try:
                yield self
            except BaseException:
                self.raw.execute("ROLLBACK")
                raise
            self.raw.execute("COMMIT")

    def _begin_immediate(self) -> None:
        """SQLite's write lock, waited for in slices up to the lock bound: the busy handler
        sleeps in C, where a signal waits for it to return."""
        deadline = time.monotonic() + self.bounds.lock_s
        while True:
            try:
                self.raw.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise

    @contextlib.contextmanager
    def errors(self, doing: str) -> Iterator[None]:
        """Driver errors as StoreError, one line, no password."""
        try:
            yield
        except Exception as exc:
            if not _is_driver_error(exc):
                raise
            raise StoreError(f"cannot {doing} the results store {self.url.shown}: "
                             f"{_first_line(self.url, exc)}") from None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.raw.close()


def connect(url: StoreURL, create: bool = True) -> Connection:
    """Open the store; StoreUnreachableError if it cannot be. A SQLite file (and its folder)
    is created only where `create` says so: a query of a store that is not there says so."""
    bounds = Bounds.from_environment()
    try:
        if url.kind == "sqlite":
            return Connection(url, _sqlite(url, create), bounds)
        return Connection(url, _postgres(url, bounds), bounds)
    except StoreError:
        raise
    except Exception as exc:
        if not _is_driver_error(exc) and not isinstance(exc, OSError):
            raise
        raise StoreUnreachableError(f"cannot reach the results store {url.shown}: "
                                    f"{_first_line(url, exc)}") from None


def _sqlite(url: StoreURL, create: bool) -> sqlite3.Connection:
    assert url.path is not None
    if not create and not url.path.is_file():
        raise StoreUnreachableError(f"no results store at {url.path}: a sweep creates it, "
                                    "or `matrix db import RUN` (or give --db)")
    if create:
        url.path.parent.mkdir(parents=True, exist_ok=True)
    raw = sqlite3.connect(url.path, timeout=SQLITE_BUSY_SLICE_S, isolation_level=None,
                          check_same_thread=False)
    try:
        raw.execute("PRAGMA journal_mode=WAL")  # readers never wait for a writer
        raw.execute("PRAGMA synchronous=NORMAL")  # WAL: durable at each checkpoint
        raw.execute("PRAGMA foreign_keys=ON")
    except sqlite3.Error:
        raw.close()
        raise
    return raw


def _postgres(url: StoreURL, bounds: Bounds) -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreUnreachableError(
            f"the results store {url.shown} is PostgreSQL, and psycopg is not installed: "
            "pip install 'matrix-bench[postgres]'") from None
    timeouts = (f"-c statement_timeout={int(bounds.statement_s * 1000)} "
                f"-c lock_timeout={int(bounds.lock_s * 1000)}")
    return psycopg.connect(url.secret.replace("postgres://", "postgresql://", 1),
                           connect_timeout=max(1, round(bounds.connect_s)), autocommit=True,
                           options=timeouts)


def _is_driver_error(exc: Exception) -> bool:
    if isinstance(exc, sqlite3.Error):
        return True
    module = type(exc).__module__
    return module.startswith("psycopg")


def _first_line(url: StoreURL, exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return url.mask(text[0] if text else type(exc).__name__)
