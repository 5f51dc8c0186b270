"""The store's tables, its schema version and the migrations between versions.

Every store is built by its migrations in order, from an empty database to SCHEMA_VERSION,
in one transaction that holds the schema lock, so two writers opening a new store at once
create it once. A store of a newer version than this matrix-bench knows is refused: its
rows may mean what this one cannot read.

Tables (docs/ARCHITECTURE.md: the results store):
- `store_schema`: one row, the version.
- `runs`: one per run (its journal), keyed by the identity of its first cell attempt.
- `cells`: one per cell attempt, keyed by `attempt_id` (rows.py); the cell record and the
  provenance as JSON, and the columns queries filter and group on.
- `measurements`: one per measurement of an attempt, in journal order (`seq`).

Version history:
  1: runs, cells, measurements.
  2: cells gain `price_per_hour_usd` (the price the row was costed at), so the cheapest
     configuration is a query; a version 1 store's rows get it from their provenance.
  3: cells gain the repeat's figures (`items_per_s`: the median of its timed epochs,
     `item_unit`, `mem_peak_bytes`: the largest), so `matrix history` reads one row per
     repeat instead of every measurement; a version 2 store's rows get them from their
     measurements.
  4: cells gain `hw_settings` (the hardware kind's recorded settings as JSON: Slurm's
     partition, EC2's spot), beside `params`, so history, advise and explain tell two
     configurations apart by them. A version 3 store's rows hold `{}`: the journals it
     could import (schema version 5 and older) recorded none.
  5: cells gain `stack_settings` (the stack's executor's recorded settings as JSON: a
     plugin executor's niceness), beside `hw_settings`, for the same reason. A version 4
     store's rows hold `{}`: the journals it could import (schema version 6 and older)
     recorded none.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from orchestrator.database.connection import (
    Connection,
    StoreError,
    StoreUnreachableError,
    connect,
)
from orchestrator.database.url import StoreURL

SCHEMA_VERSION = 5


class StoreSchemaError(StoreError):
    """A store whose schema this matrix-bench cannot use (a newer version)."""


def _create_v1(db: Connection) -> None:
    db.execute("CREATE TABLE store_schema (version INTEGER NOT NULL)")
    db.execute("INSERT INTO store_schema (version) VALUES (0)")
    db.execute("""CREATE TABLE runs (
        run_key TEXT PRIMARY KEY,
        run TEXT NOT NULL,
        location TEXT NOT NULL,
        host TEXT NOT NULL,
        written_at TEXT NOT NULL)""")
    db.execute("""CREATE TABLE cells (
        attempt_id TEXT PRIMARY KEY,
        run_key TEXT NOT NULL REFERENCES runs (run_key),
        cell_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        config_id TEXT NOT NULL,
        repeat INTEGER NOT NULL,
        workload TEXT NOT NULL,
        hardware TEXT NOT NULL,
        stack TEXT NOT NULL,
        params TEXT NOT NULL,
        status TEXT NOT NULL,
        flags TEXT NOT NULL,
        started_at TEXT NOT NULL,
        wall_s DOUBLE PRECISION NOT NULL,
        record TEXT NOT NULL,
        provenance TEXT)""")
    db.execute("CREATE INDEX cells_of_run ON cells (run_key, cell_id)")
    db.execute("CREATE INDEX cells_of_config ON cells (config_id, started_at)")
    db.execute("CREATE INDEX cells_of_workload ON cells (workload, started_at)")
    db.execute("""CREATE TABLE measurements (
        attempt_id TEXT NOT NULL REFERENCES cells (attempt_id),
        seq INTEGER NOT NULL,
        epoch INTEGER NOT NULL,
        items_per_s DOUBLE PRECISION,
        item_unit TEXT NOT NULL,
        mem_peak_bytes BIGINT,
        record TEXT NOT NULL,
        PRIMARY KEY (attempt_id, seq))""")


def _v1_to_v2(db: Connection) -> None:
    db.execute("ALTER TABLE cells ADD COLUMN price_per_hour_usd DOUBLE PRECISION")
    priced = []
    for attempt_id, provenance in db.query(
            "SELECT attempt_id, provenance FROM cells WHERE provenance IS NOT NULL"):
        price = json.loads(provenance).get("price_per_hour_usd")
        if price is not None:
            priced.append((price, attempt_id))
    db.insert_many("UPDATE cells SET price_per_hour_usd = ? WHERE attempt_id = ?", priced)


def _v2_to_v3(db: Connection) -> None:
    from orchestrator.database.rows import repeat_figures  # the records' models: only here

    for column, kind in (("items_per_s", "DOUBLE PRECISION"), ("item_unit", "TEXT"),
                         ("mem_peak_bytes", "BIGINT")):
        db.execute(f"ALTER TABLE cells ADD COLUMN {column} {kind}")
    measured: dict[str, list[tuple[float | None, str, int | None]]] = {}
    for attempt_id, rate, unit, peak in db.query(
            "SELECT attempt_id, items_per_s, item_unit, mem_peak_bytes FROM measurements"):
        measured.setdefault(attempt_id, []).append((rate, unit, peak))
    figures = [(*repeat_figures(rows), attempt_id) for attempt_id, rows in measured.items()]
    db.insert_many("UPDATE cells SET items_per_s = ?, item_unit = ?, mem_peak_bytes = ? "
                   "WHERE attempt_id = ?", figures)


def _v3_to_v4(db: Connection) -> None:
    db.execute("ALTER TABLE cells ADD COLUMN hw_settings TEXT NOT NULL DEFAULT '{}'")


def _v4_to_v5(db: Connection) -> None:
    db.execute("ALTER TABLE cells ADD COLUMN stack_settings TEXT NOT NULL DEFAULT '{}'")


# version -> the step that makes a store of that version the next one (0: empty)
MIGRATIONS: dict[int, Callable[[Connection], None]] = {0: _create_v1, 1: _v1_to_v2,
                                                        2: _v2_to_v3, 3: _v3_to_v4,
                                                        4: _v4_to_v5}


def open_store(url: StoreURL, create: bool = True) -> Connection:
    """The store at `url`, open and at SCHEMA_VERSION: StoreUnreachableError,
    StoreSchemaError (a newer store) or StoreError if it cannot be. Queries open it here,
    without the record models a writer needs."""
    db = connect(url, create=create)
    try:
        if not create and stored_version(db) == 0:  # a read creates nothing
            raise StoreUnreachableError(
                f"the results store {url.shown} holds no results yet: a sweep creates its "
                "tables, or `matrix db import RUN`")
        ensure_schema(db)
    except BaseException:
        db.close()
        raise
    return db


def stored_version(db: Connection) -> int:
    """The store's schema version; 0 for a database without the store's tables."""
    # PostgreSQL: the catalog as a table, read at the statement's snapshot. to_regclass
    # looks the name up in the backend's cached catalog, which a writer waiting on the
    # schema lock did not refresh: it missed the tables another had just created, and
    # created them again ("relation store_schema already exists").
    exists = ("SELECT COUNT(*) > 0 FROM pg_catalog.pg_tables WHERE tablename = "
              "'store_schema' AND schemaname = current_schema()" if db.postgres else
              "SELECT COUNT(*) > 0 FROM sqlite_master WHERE name = 'store_schema'")
    if not db.query(exists)[0][0]:
        return 0
    rows = db.query("SELECT version FROM store_schema")
    try:
        return int(rows[0][0]) if rows else 0
    except (TypeError, ValueError):
        raise StoreSchemaError(f"the results store {db.url.shown} has schema version "
                               f"{rows[0][0]!r}, not a number: a damaged store, or not one "
                               "matrix-bench made") from None


def ensure_schema(db: Connection, upto: int = SCHEMA_VERSION) -> int:
    """Create or migrate the store to `upto` (tests stop at an older one); the version it
    had. StoreSchemaError for a store newer than this matrix-bench."""
    found = _checked(db, stored_version(db))
    if found >= upto:
        return found
    with db.transaction(schema=True):
        found = _checked(db, stored_version(db))  # another writer may have done it meanwhile
        for version in range(found, upto):
            MIGRATIONS[version](db)
            db.execute("UPDATE store_schema SET version = ?", (version + 1,))
    return found


def _checked(db: Connection, version: int) -> int:
    if version > SCHEMA_VERSION:
        raise StoreSchemaError(
            f"the results store {db.url.shown} has schema version {version}, newer than "
            f"this matrix-bench knows ({SCHEMA_VERSION}): upgrade matrix-bench to use it")
    return version
