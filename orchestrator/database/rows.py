"""Journal records as the store's rows, and the identities that make writing them idempotent.

An attempt's identity is what its cell record says of it that no migration changes: the run,
the cell, the attempt number, when it started and how long it took (`wall_s`, to the
microsecond). The same attempt, written by its sweep or imported from its journal or from a
copy of it, has one `attempt_id`; two attempts do not. A run's identity is its journal's
first attempt: a journal is append-only, so its first attempt never changes, and a copy of
the run directory (an S3 download) is the same run.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Iterable
from typing import Any

from orchestrator.results.columns import SETTING_OWNERS
from orchestrator.results.records import CellRecord, MeasurementRecord, ProvenanceRecord, Record
from orchestrator.results.run_directory import CellResult

CELL_COLUMNS = ("attempt_id", "run_key", "cell_id", "attempt", "config_id", "repeat",
                "workload", "hardware", "stack", "params", "status", "flags", "started_at",
                "wall_s", "record", "provenance", "price_per_hour_usd", "items_per_s",
                "item_unit", "mem_peak_bytes", "hw_settings", "stack_settings")
MEASUREMENT_COLUMNS = ("attempt_id", "seq", "epoch", "items_per_s", "item_unit",
                       "mem_peak_bytes", "record")


def attempt_id(cell: CellRecord) -> str:
    identity = [cell.run, cell.cell_id, cell.attempts, cell.started_at, repr(cell.wall_s)]
    return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:32]


def run_key(first: CellRecord) -> str:
    """A run's key: its journal's first attempt's identity."""
    return "run-" + attempt_id(first)[:24]


def as_result(records: list[Record]) -> CellResult:
    """One attempt's batch, as the recorder journals it (its cell record last)."""
    cell = records[-1]
    assert isinstance(cell, CellRecord)
    return CellResult(cell=cell,
                      provenance=next((r for r in records if isinstance(r, ProvenanceRecord)),
                                      None),
                      measurements=[r for r in records if isinstance(r, MeasurementRecord)])


def cell_row(key: str, result: CellResult) -> tuple[Any, ...]:
    cell, provenance = result.cell, result.provenance
    return (attempt_id(cell), key, cell.cell_id, cell.attempts, cell.config_id, cell.repeat,
            cell.workload, cell.hardware, cell.stack,
            json.dumps(cell.params(), sort_keys=True, default=str), cell.status.value,
            ",".join(cell.flags), cell.started_at, cell.wall_s,
            cell.model_dump_json(exclude_none=True),
            None if provenance is None else provenance.model_dump_json(exclude_none=True),
            None if provenance is None else provenance.price_per_hour_usd,
            *repeat_figures([(m.items_per_s, m.item_unit, memory_peak(m))
                             for m in result.measurements]),
            *(json.dumps(cell.settings(owner), sort_keys=True) for owner in SETTING_OWNERS))


def repeat_figures(measured: list[tuple[float | None, str, int | None]]
                   ) -> tuple[float | None, str | None, int | None]:
    """A repeat's figures from its measurements' (items/s, unit, memory peak): the median
    items/s of its timed epochs (the unit of `matrix compare` and `matrix history`), the
    unit, and the largest memory peak. None where no measurement has one."""
    rates = [rate for rate, _, _ in measured if rate is not None]
    peaks = [peak for _, _, peak in measured if peak is not None]
    return (statistics.median(rates) if rates else None,
            measured[0][1] if measured else None, max(peaks) if peaks else None)


def measurement_rows(result: CellResult) -> Iterable[tuple[Any, ...]]:
    attempt = attempt_id(result.cell)
    for seq, measured in enumerate(result.measurements):
        yield (attempt, seq, measured.epoch, measured.items_per_s, measured.item_unit,
               memory_peak(measured), measured.model_dump_json(exclude_none=True))


def memory_peak(measured: MeasurementRecord) -> int | None:
    """The memory the model used, by the best probe the cell had: the framework's peak, then
    the device's, then the host process's (docs/MEASUREMENT.md)."""
    for probe in (measured.mem_alloc_peak_bytes, measured.nvml_used_peak_bytes,
                  measured.host_rss_peak_bytes):
        if probe is not None:
            return probe
    return None
