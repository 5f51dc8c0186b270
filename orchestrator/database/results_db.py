"""Writing runs into the store: a sweep's attempts as it journals them, or a whole journal
(`matrix db import`). Insert-only and keyed by identity (rows.py): what is there already is
left as it is, so a second import, or a sweep and an import of the same run, add nothing."""

from __future__ import annotations

import socket
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.database.connection import Connection
from orchestrator.database.rows import (
    CELL_COLUMNS,
    MEASUREMENT_COLUMNS,
    cell_row,
    measurement_rows,
    run_key,
)
from orchestrator.database.schema import open_store
from orchestrator.database.url import StoreURL
from orchestrator.results.run_directory import CellResult, RunDirectory

CHUNK = 2000  # attempts per transaction on import: short locks for writers beside it


def _insert(table: str, columns: tuple[str, ...], key: str) -> str:
    return (f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
            f"({', '.join('?' for _ in columns)}) ON CONFLICT ({key}) DO NOTHING")


INSERT_CELL = _insert("cells", CELL_COLUMNS, "attempt_id")
INSERT_MEASUREMENT = _insert("measurements", MEASUREMENT_COLUMNS, "attempt_id, seq")
# A run is its journal's first attempt: a copy of it (an S3 download) is the same run, and
# importing one adds nothing and changes nothing (the location stays where it was written)
UPSERT_RUN = ("INSERT INTO runs (run_key, run, location, host, written_at) VALUES "
              "(?, ?, ?, ?, ?) ON CONFLICT (run_key) DO NOTHING")


@dataclass(frozen=True)
class Written:
    """What one write added: new cell attempts and measurements (the rest were there)."""

    attempts: int
    new_attempts: int
    new_measurements: int


class ResultsDB:
    """The store, open and at this matrix-bench's schema version."""

    def __init__(self, db: Connection) -> None:
        self.db = db
        self.url = db.url

    @classmethod
    def open(cls, url: StoreURL, create: bool = True) -> ResultsDB:
        """StoreUnreachableError, StoreSchemaError (a newer store) or StoreError if not."""
        return cls(open_store(url, create))

    def write(self, key: str, run_dir: Path, attempts: list[CellResult]) -> Written:
        """Add a run's attempts (with its row in `runs`), in one transaction."""
        if not attempts:
            return Written(0, 0, 0)
        now = datetime.now(UTC).isoformat(timespec="seconds")
        cells = [cell_row(key, attempt) for attempt in attempts]
        measurements = [row for attempt in attempts for row in measurement_rows(attempt)]
        with self.db.transaction() as db:
            db.execute(UPSERT_RUN, (key, attempts[0].cell.run, str(run_dir),
                                    socket.gethostname(), now))
            new_cells = db.insert_many(INSERT_CELL, cells)
            new_measurements = db.insert_many(INSERT_MEASUREMENT, measurements)
        return Written(len(attempts), new_cells, new_measurements)

    def import_run(self, store: RunDirectory, attempts: list[CellResult] | None = None
                   ) -> Written:
        """Every attempt of a run's journal (`attempts`: as read already); nothing twice."""
        attempts = store.attempts() if attempts is None else attempts
        if not attempts:
            return Written(0, 0, 0)
        key = run_key(attempts[0].cell)
        written = [self.write(key, store.root, attempts[i:i + CHUNK])
                   for i in range(0, len(attempts), CHUNK)]
        return Written(sum(w.attempts for w in written), sum(w.new_attempts for w in written),
                       sum(w.new_measurements for w in written))

    def walls(self, config_ids: Iterable[str]) -> dict[str, list[float]]:
        """config_id -> the wall times of its attempts that ended ok, in any run: what a
        plan estimates a configuration this run has not measured yet from."""
        found: dict[str, list[float]] = {}
        for config_id, wall_s in self.db.query_in(
                "SELECT config_id, wall_s FROM cells WHERE status = 'ok' AND config_id IN ({})",
                sorted(set(config_ids))):
            found.setdefault(str(config_id), []).append(float(wall_s))
        return found

    def close(self) -> None:
        self.db.close()
