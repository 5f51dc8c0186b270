"""`matrix explain`: the matrix read as the factorial experiment it is. For each factor that
varies (the hardware, the stack, each parameter), its effect on throughput across matched
configurations, the pairs that differ in that factor alone: the median ratio of their
throughputs, with a 95% interval from a bootstrap over both the pairs and each pair's
repeats. One line per change of level, largest effect first; where the effect depends on
another factor (more than EFFECT_SPREAD apart between its levels), it is given per level.

A configuration's throughput is the median of its repeats' (compare's unit). Its repeats
are advise's (candidates.py): a flagged repeat is dropped, its configuration kept with its
clean ones, and what was set aside is listed with why. Where every configuration was
flagged there is nothing to pair: the answer says so, and why, rather than that no factor
varies. Runs of different code versions are different configurations, never pooled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.report.advise import measured_rows
from orchestrator.report.compare import CONFIDENCE, RESAMPLES, resampled_medians
from orchestrator.report.markdown import fmt
from orchestrator.results.columns import param_name, setting_columns

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

EFFECT_SPREAD = 1.10  # per-level effects further apart than this are shown per level
PIN_COLUMNS = (("framework", "framework"), ("framework_version", None), ("cuda", "CUDA"),
               ("cudnn", "cuDNN"), ("python", "Python"))


@dataclass(frozen=True)
class Explained:
    workload: str
    effects: list[Effect]
    left_out: dict[str, str]  # label -> why (candidates.py)
    dropped: dict[str, str]  # label -> the repeats set aside, and why
    nothing: str = ""  # why there is nothing to explain, where there is not


@dataclass(frozen=True)
class Effect:
    factor: str  # "hardware", "stack", or a parameter's name
    base: str
    other: str
    ratio: float  # median throughput ratio other / base over the matched pairs
    low: float | None  # None: no interval (one pair, each side measured once)
    high: float | None
    pairs: int
    detail: str = ""  # what differs in a stack's pins
    by_level: tuple[tuple[str, float], ...] = ()  # (level of another factor, ratio)
    by_factor: str = ""


def explain(rows: pd.DataFrame, workload: str | None = None) -> Explained:
    """The workload, each factor's effects (largest first), and what was set aside."""
    from orchestrator.report.candidates import candidates

    chosen, measured = measured_rows(rows, workload)
    pool = candidates(measured)
    if pool.guess is not None:
        kinds = sorted({why.split(":", 1)[0] for why in pool.flagged_out.values()})
        return Explained(chosen, [], pool.flagged_out, {},
                         f"every configuration was flagged {', '.join(kinds)}: no clean "
                         "repeat to compare; run again on a quiet machine")
    effects = _effects(pool.rows)
    return Explained(chosen, effects, pool.left_out, pool.dropped, "" if effects else
                     "no factor varies between configurations that are otherwise the same")


def _effects(ok: pd.DataFrame) -> list[Effect]:
    """Each factor's effects over the clean repeats `ok`, largest first."""
    from orchestrator.report.analysis import repeat_medians

    configs = ok.drop_duplicates("config_id").set_index("config_id")
    versions = ["workload_version"] if "workload_version" in configs else []
    factors = ["hardware", "stack", *versions, *sorted(
        c for c in setting_columns(configs.columns)
        if configs[c].dropna().astype(str).nunique() > 1)]
    # the code version is a factor where it varies: two versions are never pooled as one
    factors = [f for f in factors if configs[f].astype(str).nunique() > 1]
    repeats = {str(c): m.to_numpy(dtype=float)
               for c, m in repeat_medians(ok).groupby(level="config_id")}
    levels = configs[factors].astype(str) if factors else configs.iloc[:, :0]
    effects = []
    for factor in factors:
        others = [f for f in factors if f != factor]
        base, *rest = sorted(set(levels[factor]), key=_level_order)
        for other in rest:
            pairs = _pairs(levels, factor, base, other, others)
            if not pairs:
                continue
            ratios = [_median_ratio(repeats[a], repeats[b]) for a, b in pairs]
            low, high = _interval([(repeats[a], repeats[b]) for a, b in pairs])
            by_factor, by_level = _per_level(levels, others, pairs, ratios)
            effects.append(Effect(
                factor="version" if factor == "workload_version" else param_name(factor),
                base=base, other=other,
                ratio=float(_median(ratios)), low=low, high=high, pairs=len(pairs),
                detail=_pins(ok, base, other) if factor == "stack" else "",
                by_level=by_level, by_factor=by_factor))
    effects.sort(key=lambda e: -abs(math.log(e.ratio)))
    return effects


def _level_order(level: str) -> tuple[int, float, str]:
    """Numbers in numeric order (5 before 10), then text in its own."""
    try:
        return (0, float(level), "")
    except ValueError:
        return (1, 0.0, level)


def _pairs(levels: pd.DataFrame, factor: str, base: str, other: str,
           others: list[str]) -> list[tuple[str, str]]:
    """(config at `base`, config at `other`) for every setting of the other factors that
    was measured at both levels."""
    at_base = {tuple(row[others]): str(c) for c, row in levels[levels[factor] == base]
               .iterrows()}
    return [(at_base[key], str(c)) for c, row in levels[levels[factor] == other].iterrows()
            if (key := tuple(row[others])) in at_base]


def _median(values: list[float]) -> float:
    import numpy as np

    return float(np.median(values))


def _median_ratio(base: np.ndarray, new: np.ndarray) -> float:
    import numpy as np

    return float(np.median(new) / np.median(base))


def _interval(pairs: list[tuple[np.ndarray, np.ndarray]], seed: int = 0
              ) -> tuple[float | None, float | None]:
    """The 95% interval of the median ratio over the pairs: each resample draws the pairs
    and, within each, both sides' repeats (a two-level bootstrap). (None, None) where
    nothing varies to resample: one pair whose sides were each measured once gave an
    interval of zero width, which claims a certainty no measurement has."""
    import numpy as np

    if len(pairs) < 2 and all(base.size < 2 and new.size < 2 for base, new in pairs):
        return None, None

    rng = np.random.default_rng(seed)
    per_pair = np.stack([
        resampled_medians(new, rng) / resampled_medians(base, rng)
        for base, new in pairs])  # pairs x RESAMPLES
    chosen = rng.integers(0, len(pairs), (RESAMPLES, len(pairs)))
    medians = np.median(per_pair[chosen, np.arange(RESAMPLES)[:, None]], axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(medians, [tail, 100 - tail])
    return float(low), float(high)


def _per_level(levels: pd.DataFrame, others: list[str], pairs: list[tuple[str, str]],
               ratios: list[float]) -> tuple[str, tuple[tuple[str, float], ...]]:
    """The other factor whose levels the effect differs across the most (beyond
    EFFECT_SPREAD), with the effect at each of its levels; ("", ()) where none does."""
    best: tuple[float, str, tuple[tuple[str, float], ...]] = (EFFECT_SPREAD, "", ())
    for other in others:
        grouped: dict[str, list[float]] = {}
        for (base, _), ratio in zip(pairs, ratios, strict=True):
            grouped.setdefault(str(levels.loc[base, other]), []).append(ratio)
        if len(grouped) < 2:
            continue
        each = tuple((level, _median(values)) for level, values in sorted(grouped.items()))
        spread = max(r for _, r in each) / min(r for _, r in each)
        if spread > best[0]:
            best = (spread, param_name(other), each)
    return best[1], best[2]


def _pins(rows: pd.DataFrame, base: str, other: str) -> str:
    """What differs between two stacks, as their cells recorded it ("torch 2.6.0 -> 2.7.1,
    CUDA 12.4 -> 12.6")."""
    def pin(stack: str, column: str) -> str:
        if column not in rows:
            return "-"
        found = rows.loc[rows["stack"] == stack, column].dropna()
        return fmt(found.iloc[0]) if len(found) else "-"

    changes = []
    for column, label in PIN_COLUMNS:
        before, after = pin(base, column), pin(other, column)
        if before != after:
            name = label or pin(other, "framework")
            changes.append(f"{name} {before} -> {after}")
    return ", ".join(changes)
