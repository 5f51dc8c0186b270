"""`matrix compare BASE NEW`: did a configuration get slower or faster between two runs?

Configurations are joined on `config_id` (same hardware, stack, workload and settings).
For each, the ratio of NEW's median throughput to BASE's, over their samples (timed epochs
or rounds across repeats), with a 95% bootstrap interval: both sides resampled with
replacement, the ratio of medians each time. A change is marked only when the ratio is
beyond the threshold and the interval excludes 1 (no change); with fewer than five samples
on a side the ratio is shown but the evidence is called too thin, and nothing is marked.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

MIN_SAMPLES = 5
DEFAULT_THRESHOLD = 0.05
RESAMPLES = 2000
CONFIDENCE = 0.95
RULE = (f"Per configuration (joined on config_id): ratio = NEW median / BASE median of the "
        f"throughput samples (timed epochs across repeats), with a {CONFIDENCE:.0%} bootstrap "
        f"interval ({RESAMPLES} resamples of both sides). A regression is a ratio below "
        "1 - threshold whose interval lies wholly below 1; an improvement, above 1 + threshold "
        f"and wholly above 1. Fewer than {MIN_SAMPLES} samples on a side: the ratio is shown, "
        "nothing is marked.")


class Verdict(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNCHANGED = "no change"
    THIN = "too few samples"


@dataclass(frozen=True)
class Comparison:
    config_id: str
    label: str  # workload, hardware/stack and the settings, for people
    base_samples: int
    new_samples: int
    base_median: float
    new_median: float
    ratio: float
    low: float
    high: float
    verdict: Verdict


def throughput_samples(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """config_id -> the items/s of its timed epochs in cells that ended ok."""
    rows = df[(df["status"] == "ok") & df["items_per_s"].notna()] if len(df) else df
    return {str(config): group["items_per_s"].to_numpy(dtype=float)
            for config, group in rows.groupby("config_id")}


def bootstrap_interval(base: np.ndarray, new: np.ndarray, seed: int = 0
                       ) -> tuple[float, float]:
    """The central CONFIDENCE interval of median(new*) / median(base*) over resamples."""
    import numpy as np

    rng = np.random.default_rng(seed)
    base_medians = np.median(rng.choice(base, (RESAMPLES, base.size)), axis=1)
    new_medians = np.median(rng.choice(new, (RESAMPLES, new.size)), axis=1)
    ratios = new_medians / base_medians
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(low), float(high)


def verdict(ratio: float, low: float, high: float, threshold: float, enough: bool) -> Verdict:
    if not enough:
        return Verdict.THIN
    if ratio < 1 - threshold and high < 1:
        return Verdict.REGRESSION
    if ratio > 1 + threshold and low > 1:
        return Verdict.IMPROVEMENT
    return Verdict.UNCHANGED


def compare_runs(base: pd.DataFrame, new: pd.DataFrame,
                 threshold: float = DEFAULT_THRESHOLD) -> list[Comparison]:
    """Every configuration with samples on both sides, in the order of BASE."""
    import numpy as np

    base_samples, new_samples = throughput_samples(base), throughput_samples(new)
    from orchestrator.analysis import config_labels

    labels = config_labels(new)
    found = []
    for config_id, before in base_samples.items():
        after = new_samples.get(config_id)
        if after is None:
            continue
        ratio = float(np.median(after) / np.median(before))
        low, high = bootstrap_interval(before, after)
        enough = min(before.size, after.size) >= MIN_SAMPLES
        found.append(Comparison(
            config_id=config_id, label=labels.get(config_id, config_id),
            base_samples=before.size, new_samples=after.size,
            base_median=float(np.median(before)), new_median=float(np.median(after)),
            ratio=ratio, low=low, high=high,
            verdict=verdict(ratio, low, high, threshold, enough)))
    return found
