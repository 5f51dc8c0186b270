"""A sweep's side of the store: opened before the sweep starts (a store that cannot be
reached refuses the sweep), brought up to date with the run's journal, then given each
attempt as it is journalled. If the store goes away mid-sweep, the sweep warns once and
journals on; `matrix db import RUN` adds the run later (so does the next sweep of it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from orchestrator.database.connection import StoreError
from orchestrator.database.results_db import ResultsDB
from orchestrator.database.rows import as_result, run_key
from orchestrator.database.url import StoreURL, resolve
from orchestrator.results.records import Record
from orchestrator.results.run_directory import RunDirectory


class SweepIndex:
    """The store one sweep writes to; every call after the store went away does nothing."""

    def __init__(self, results: ResultsDB, warn: Callable[[str], None]) -> None:
        self.results, self.warn = results, warn
        self.key: str | None = None
        self.store: RunDirectory | None = None
        self.lost = False

    @classmethod
    def open(cls, option: str | None, warn: Callable[[str], None]) -> SweepIndex | None:
        """The store `--db`/MATRIX_BENCH_DB/the default names (None for `none`)."""
        url: StoreURL | None = resolve(option)
        return None if url is None else cls(ResultsDB.open(url), warn)

    def catch_up(self, store: RunDirectory) -> None:
        """Index what the run's journal holds already (earlier sweeps of it, or attempts
        journalled while the store was away): nothing twice."""
        self.store = store
        attempts = store.attempts()
        if attempts:
            self.key = run_key(attempts[0].cell)
            self._guarded(lambda: self.results.import_run(store, attempts))

    def add(self, records: list[Record]) -> None:
        """One journalled attempt (its cell record last)."""
        if self.lost or self.store is None:
            return
        attempt = as_result(records)
        if self.key is None:
            self.key = run_key(attempt.cell)
        key, root = self.key, self.store.root
        self._guarded(lambda: self.results.write(key, root, [attempt]))

    def walls(self, config_ids: Iterable[str]) -> dict[str, list[float]]:
        """The store's wall times of these configurations' ok attempts in earlier runs, for
        the plan's estimates; none once the store went away, or where it cannot answer."""
        if self.lost:
            return {}
        try:
            return self.results.walls(config_ids)
        except StoreError:
            return {}  # an estimate is not worth a warning; a write that fails says so

    def _guarded(self, write: Callable[[], object]) -> None:
        try:
            write()
        except StoreError as exc:
            self.lost = True
            where = self.store.root if self.store else "RUN"
            self.warn(f"{exc}; the sweep goes on and its journal keeps every cell: "
                      f"`matrix db import {where}` adds this run to the store later")

    def close(self) -> None:
        self.results.close()
