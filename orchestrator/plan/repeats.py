"""Repeats until the noise is bounded: `repeats: {min, max, until_cv}`.

The unit of this rule is the repeat, not the epoch: the epochs of one cell share its
process, its data order and its machine state, so they are not independent samples. A
repeat's throughput is the median items/s of its timed epochs; a configuration's noise is
the coefficient of variation (sample standard deviation / mean) of those over its repeats.

Every configuration gets `min` repeats. While all its repeats so far ended `ok`, their CV is
above `until_cv` and it has fewer than `max`, it gets one more. The rule reads only the
policy and the journal, so a plan made now, after a wave of cells or after an interruption
asks for the same repeats: resuming continues where the sweep stopped. A repeat that did not
end `ok` holds its configuration at that count until a later run redoes it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

from orchestrator.plan.cells import as_repeat
from orchestrator.registry.cell_run import Cell
from orchestrator.results.records import MeasurementRecord
from orchestrator.results.run_directory import CellResult
from orchestrator.spec.model import RepeatPolicy


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Sample standard deviation over the mean; None under two values or a zero mean."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean else None


def repeat_throughputs(history: Iterable[CellResult]) -> dict[str, dict[int, float]]:
    """config_id -> {repeat: median items/s of its timed epochs}, for repeats that ended ok."""
    found: dict[str, dict[int, float]] = {}
    for result in history:
        rates = [rate_of(m) for m in result.measurements]
        if result.cell.status.is_done() and rates:
            found.setdefault(result.cell.config_id, {})[result.cell.repeat] = \
                statistics.median(rates)
    return found


def rate_of(measurement: MeasurementRecord) -> float:
    """Items per second; for a script timed as a whole (timing "whole"), runs per second,
    whose spread over repeats is its wall time's."""
    if measurement.items_per_s is not None:
        return measurement.items_per_s
    return 1 / (measurement.epoch_s or math.inf)


def repeats_wanted(policy: RepeatPolicy, throughputs: dict[int, float]) -> int:
    """How many repeats a configuration with these per-repeat throughputs should have now."""
    wanted = policy.min
    while wanted < policy.max:
        done = [throughputs.get(repeat) for repeat in range(1, wanted + 1)]
        if None in done:
            break  # repeats still to run, or to redo
        cv = coefficient_of_variation([value for value in done if value is not None])
        if cv is not None and cv <= policy.until_cv:
            break
        wanted += 1
    return wanted


def settled(cv: float | None, target: float | None) -> bool:
    """Whether a configuration's repeats got under its target (always, without a target)."""
    return target is None or (cv is not None and not math.isnan(cv) and cv <= target)


def extra_repeats(policy: RepeatPolicy, cells: Iterable[Cell], history: Iterable[CellResult]
                  ) -> tuple[list[Cell], list[Cell]]:
    """For the configurations of `cells` (their first `min` repeats): the cells of the
    repeats past `min` that the journal asks for now, and those it may still ask for."""
    throughputs = repeat_throughputs(history)
    now: list[Cell] = []
    later: list[Cell] = []
    for cell in cells:
        if cell.repeat != 1:
            continue
        done = throughputs.get(cell.config_id, {})
        wanted = repeats_wanted(policy, done)
        now += [as_repeat(cell, r) for r in range(policy.min + 1, wanted + 1)]
        ran = [done[r] for r in range(1, wanted + 1) if r in done]
        if len(ran) < wanted or not settled(coefficient_of_variation(ran), policy.until_cv):
            later += [as_repeat(cell, r) for r in range(wanted + 1, policy.max + 1)]
    return now, later
