"""`matrix compare BASE NEW`: did a configuration get slower or faster between two runs?

Configurations are joined on `config_id` (same hardware, stack, workload and settings),
except that a user's workload whose code changed between the runs is the same configuration
(plan/identity.match_id): that is the question "did my change make it faster?", and both
code versions are named. A comparison in which nothing joins is an error, never a pass.
The unit of replication is the repeat, not the epoch: the epochs of one cell share its
process, its data order and its machine state, so they are not independent samples. Each
repeat counts once, by the median of its timed epochs' items/s. For each configuration, the
ratio of NEW's median repeat to BASE's, with a 95% bootstrap interval over repeats (both
sides resampled with replacement, the ratio of medians each time), and one of five
verdicts: regression or improvement (beyond the threshold, the interval wholly on that side
of 1), equivalent (the whole interval within the threshold), inconclusive (anything else:
the interval reaches past the threshold, so the runs cannot tell), or too few repeats
(fewer than MIN_REPEATS on a side: the ratio is shown, nothing is concluded). A wide
interval is never read as "no change".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from orchestrator.errors import MatrixError
from orchestrator.results.columns import param_columns, param_name, setting_columns

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

MIN_REPEATS = 3
DEFAULT_THRESHOLD = 0.05
RESAMPLES = 2000
CONFIDENCE = 0.95
RULE = (f"Per configuration (joined on config_id; your own code's across its changes): "
        f"each repeat counts once, by the median of "
        f"its timed epochs' items/s (epochs of one process are not independent samples); "
        f"ratio = NEW median repeat / BASE median repeat, with a {CONFIDENCE:.0%} bootstrap "
        f"interval over repeats ({RESAMPLES} resamples of both sides). Regression: ratio "
        "below 1 - threshold and the interval wholly below 1; improvement: above 1 + "
        "threshold and wholly above 1; equivalent: the whole interval within 1 +- threshold; "
        f"otherwise inconclusive. Fewer than {MIN_REPEATS} repeats on a side: too few "
        "repeats, nothing concluded.")


class Verdict(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    EQUIVALENT = "equivalent"
    INCONCLUSIVE = "inconclusive"
    THIN = "too few repeats"


@dataclass(frozen=True)
class Comparison:
    config_id: str
    label: str  # workload, hardware/stack and the settings, for people
    base_repeats: int
    new_repeats: int
    base_median: float  # of the repeats' medians, items/s
    new_median: float
    ratio: float
    low: float
    high: float
    verdict: Verdict
    # each side's FLOP/s as a share of its node's measured ceiling (report/ceilings.py)
    base_ceiling: float | None = None
    new_ceiling: float | None = None
    # the workload's version on each side, where its code changed between them
    code_change: tuple[str, str] | None = None


def repeat_throughputs(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """config_id -> one items/s per repeat that ended ok: the median of its timed epochs.
    A configuration with a row judged implausible (judge.py) has none: its figures cannot be
    true, so they are neither a regression nor an improvement (`implausible_configs`)."""
    from orchestrator.report.analysis import repeat_medians

    if not len(df) or "items_per_s" not in df:  # no cell measured anything
        return {}
    rows = df[(df["status"] == "ok") & df["items_per_s"].notna()]
    rows = rows[~rows["config_id"].isin(implausible_configs(df))] if len(rows) else rows
    if not len(rows):
        return {}
    return {str(config): medians.to_numpy(dtype=float)
            for config, medians in repeat_medians(rows).groupby(level="config_id", sort=True)}


def implausible_configs(df: pd.DataFrame) -> dict[str, str]:
    """config_id -> the judge's reason, for each configuration with a row it flagged."""
    if not len(df) or "flags" not in df:
        return {}
    flagged = df[df["flags"].fillna("").astype(str).str.contains("implausible", regex=False)]
    reasons = flagged.get("judgement", flagged["flags"]).fillna("").astype(str)
    return {str(c): str(r) for c, r in zip(flagged["config_id"], reasons, strict=True)}


def bootstrap_interval(base: np.ndarray, new: np.ndarray, seed: int = 0
                       ) -> tuple[float, float]:
    """The central CONFIDENCE interval of median(new*) / median(base*) over resamples of
    the repeats of each side."""
    import numpy as np

    rng = np.random.default_rng(seed)
    base_medians = resampled_medians(base, rng)
    ratios = resampled_medians(new, rng) / base_medians
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(low), float(high)


def resampled_medians(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The median of each of RESAMPLES resamples (with replacement) of `values`: the
    bootstrap over repeats of compare, advise and explain."""
    import numpy as np

    return np.asarray(np.median(rng.choice(values, (RESAMPLES, values.size)), axis=1))


def verdict(ratio: float, low: float, high: float, threshold: float, enough: bool) -> Verdict:
    if not enough:
        return Verdict.THIN
    if ratio < 1 - threshold and high < 1:
        return Verdict.REGRESSION
    if ratio > 1 + threshold and low > 1:
        return Verdict.IMPROVEMENT
    if 1 - threshold <= low and high <= 1 + threshold:
        return Verdict.EQUIVALENT
    return Verdict.INCONCLUSIVE


class NothingToCompare(MatrixError):
    """A run without a single measured cell that ended ok, or two runs without a
    configuration in common."""


def matched(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with each row's `config_id` replaced by its configuration's match_id (the same
    for a workload whose code changed), the recorded id kept as `recorded_config_id`."""
    from orchestrator.plan.identity import match_id

    if not len(df) or "workload_version" not in df:
        return df.assign(recorded_config_id=df.get("config_id"))
    params = param_columns(df.columns)
    settings = [c for c in setting_columns(df.columns) if c not in params]
    firsts = df.drop_duplicates("config_id")
    ids = {row["config_id"]: match_id(
        row["config_id"], row["workload_version"], (row["hardware"], row["stack"],
                                                    row["workload"]),
        {param_name(c): row[c] for c in params}, {c: row[c] for c in settings})
        for row in firsts.to_dict("records")}
    return df.assign(recorded_config_id=df["config_id"], config_id=df["config_id"].map(ids))


def comparable(df: pd.DataFrame, side: str, source: str) -> pd.DataFrame:
    """`df`, its configurations matched across code changes (`matched`), where it holds a
    cell that ended ok with a throughput; NothingToCompare, saying what its cells ended as,
    where not (a run whose every cell failed is no baseline, and no regression either: it
    is a run to look at)."""
    df = matched(df)
    if repeat_throughputs(df):
        return df
    cells = df.drop_duplicates("cell_id") if len(df) and "cell_id" in df else df.iloc[0:0]
    ended = ", ".join(f"{n} {status}" for status, n in
                      cells["status"].value_counts().items()) if len(cells) else "no cell"
    flagged = implausible_configs(df)
    if flagged:  # it measured, but nothing it measured can be true
        reasons = sorted(set(flagged.values()))
        raise NothingToCompare(
            f"{side} {source}: every configuration that ended ok was judged implausible "
            f"({len(flagged)} of them; {reasons[0]}"
            + (f"; and {len(reasons) - 1} other reason(s)" if len(reasons) > 1 else "")
            + f"): nothing to compare; `matrix report {source}` shows each")
    raise NothingToCompare(f"{side} {source} holds no cell that ended ok with a throughput "
                           f"({ended}): nothing to compare; `matrix report {source}` shows why")


def nothing_in_common(base: pd.DataFrame, new: pd.DataFrame) -> str:
    """Why no configuration joins: what each side ran (workload, declared version, hardware
    and stack), or that those agree and the parameters or epochs differ."""
    from orchestrator.plan.identity import code_free_version

    def ran(df: pd.DataFrame) -> list[str]:
        rows = df[df["config_id"].isin(repeat_throughputs(df))]
        return sorted({f"{w} {code_free_version(str(v))} on {h}/{s}" for w, v, h, s in zip(
            rows["workload"], rows.get("workload_version", rows["workload"].map(lambda _: "?")),
            rows["hardware"], rows["stack"], strict=True)})

    def listed(items: list[str]) -> str:
        return ", ".join(items[:4]) + (f" and {len(items) - 4} more" if len(items) > 4 else "")

    before, after = ran(base), ran(new)
    if before == after:
        return (f"no configuration in common: both ran {listed(before)}, with other "
                "parameters or epochs")
    return f"no configuration in common: BASE ran {listed(before)}; NEW ran {listed(after)}"


def compare_runs(base: pd.DataFrame, new: pd.DataFrame,
                 threshold: float = DEFAULT_THRESHOLD) -> list[Comparison]:
    """Every configuration with samples on both sides, in the order of BASE."""
    import numpy as np

    base_samples, new_samples = repeat_throughputs(base), repeat_throughputs(new)
    from orchestrator.report.analysis import config_labels

    labels = config_labels(new)
    base_ceiling, new_ceiling = ceiling_fractions(base), ceiling_fractions(new)
    found = []
    for config_id, before in base_samples.items():
        after = new_samples.get(config_id)
        if after is None:
            continue
        ratio = float(np.median(after) / np.median(before))
        low, high = bootstrap_interval(before, after)
        enough = min(before.size, after.size) >= MIN_REPEATS
        found.append(Comparison(
            config_id=config_id, label=labels.get(config_id, config_id),
            base_repeats=before.size, new_repeats=after.size,
            base_median=float(np.median(before)), new_median=float(np.median(after)),
            ratio=ratio, low=low, high=high,
            verdict=verdict(ratio, low, high, threshold, enough),
            base_ceiling=base_ceiling.get(config_id), new_ceiling=new_ceiling.get(config_id),
            code_change=code_change(base, new, config_id)))
    if not found:
        raise NothingToCompare(nothing_in_common(base, new))
    return found


def code_change(base: pd.DataFrame, new: pd.DataFrame, config_id: str
                ) -> tuple[str, str] | None:
    """(BASE's version, NEW's) of the configuration's workload where its code changed."""
    if "workload_version" not in base or "workload_version" not in new:
        return None
    versions = [", ".join(sorted(_code_versions(df[df["config_id"] == config_id])))
                for df in (base, new)]
    return (versions[0], versions[1]) if versions[0] != versions[1] else None


def _code_versions(rows: pd.DataFrame) -> set[str]:
    """Each workload version of `rows`, with the hash of its code where its version leaves
    it out (code_hash: false) and its git revision where one was recorded."""
    from orchestrator.plan.identity import code_free_version

    def column(name: str) -> list[object]:
        return list(rows[name]) if name in rows else [None] * len(rows)

    found = set()
    for version, code, revision in zip(column("workload_version"), column("workload_code"),
                                       column("workload_revision"), strict=True):
        if not isinstance(version, str):
            continue
        if isinstance(code, str) and code_free_version(version) == version:  # opted out
            version += f" (code {code})"
        if isinstance(revision, str):
            version += f" (git {revision[:12]}{'+dirty' if revision.endswith('+dirty') else ''})"
        found.add(version)
    return found


def ceiling_fractions(df: pd.DataFrame) -> dict[str, float]:
    """config_id -> the median share of its node's measured ceiling of its ok rows."""
    import pandas as pd

    if not len(df) or "ceiling_fraction" not in df:
        return {}
    rows = df[df["status"] == "ok"]
    fractions = pd.to_numeric(rows["ceiling_fraction"], errors="coerce")
    medians = fractions.groupby(rows["config_id"]).median().dropna()
    return {str(config): float(value) for config, value in medians.items()}
