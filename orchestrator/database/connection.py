"""One connection to the store, SQLite or PostgreSQL, behind the few calls the store makes.

The two differ here only: how to connect, the parameter marker (`?` or `%s`), how a write
transaction takes its lock, and which exceptions they raise. Everything else (the tables,
`INSERT ... ON CONFLICT DO NOTHING`, window functions) is SQL both speak.

- SQLite runs in WAL mode with a busy timeout, and every write transaction starts with
  `BEGIN IMMEDIATE`, so two sweeps on one machine take turns instead of failing.
- PostgreSQL connects with a timeout; a schema change holds an advisory lock.

Every driver error leaves as StoreError, its message cleaned of the URL's password.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from orchestrator.database.url import StoreURL
from orchestrator.errors import MatrixError

CONNECT_TIMEOUT_S = 5
BUSY_TIMEOUT_S = 60  # SQLite: how long a writer waits for another one's transaction
SCHEMA_LOCK = 0x6D62  # PostgreSQL advisory lock key held while the schema is created or migrated


class StoreError(MatrixError):
    """The store could not be reached, read or written."""


class StoreUnreachableError(StoreError):
    """The store cannot be opened at all (a sweep refuses to start)."""


class Connection:
    """A DB-API connection with the store's calls: `?` parameters on both databases."""

    def __init__(self, url: StoreURL, raw: Any) -> None:
        self.url, self.raw = url, raw
        self.postgres = url.kind == "postgresql"

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.postgres else sql

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.errors("read"):
            cursor = self.raw.cursor()
            cursor.execute(self._sql(sql), tuple(params))
            rows: list[tuple[Any, ...]] = cursor.fetchall()
            return rows

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement inside `transaction()`; the rows it changed."""
        cursor = self.raw.cursor()
        cursor.execute(self._sql(sql), tuple(params))
        return int(cursor.rowcount)

    def insert_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        """Run one statement per row inside `transaction()`; the rows inserted."""
        if not rows:
            return 0
        cursor = self.raw.cursor()
        cursor.executemany(self._sql(sql), rows)
        return int(cursor.rowcount)

    @contextlib.contextmanager
    def transaction(self, schema: bool = False) -> Iterator[Connection]:
        """A write transaction: committed whole or not at all. `schema`: also hold the lock
        that makes creating and migrating the tables one writer's job."""
        with self.errors("write"):
            if self.postgres:
                with self.raw.transaction():
                    if schema:
                        self.raw.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
                    yield self
                return
            self.raw.execute("BEGIN IMMEDIATE")
            try:
                yield self
            except BaseException:
                self.raw.execute("ROLLBACK")
                raise
            self.raw.execute("COMMIT")

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
    try:
        if url.kind == "sqlite":
            return Connection(url, _sqlite(url, create))
        return Connection(url, _postgres(url))
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
    raw = sqlite3.connect(url.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                          check_same_thread=False)
    try:
        raw.execute("PRAGMA journal_mode=WAL")  # readers never wait for a writer
        raw.execute("PRAGMA synchronous=NORMAL")  # WAL: durable at each checkpoint
        raw.execute("PRAGMA foreign_keys=ON")
    except sqlite3.Error:
        raw.close()
        raise
    return raw


def _postgres(url: StoreURL) -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreUnreachableError(
            f"the results store {url.shown} is PostgreSQL, and psycopg is not installed: "
            "pip install 'matrix-bench[postgres]'") from None
    return psycopg.connect(url.secret.replace("postgres://", "postgresql://", 1),
                           connect_timeout=CONNECT_TIMEOUT_S, autocommit=True)


def _is_driver_error(exc: Exception) -> bool:
    if isinstance(exc, sqlite3.Error):
        return True
    module = type(exc).__module__
    return module.startswith("psycopg")


def _first_line(url: StoreURL, exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return url.mask(text[0] if text else type(exc).__name__)
