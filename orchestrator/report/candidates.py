"""Which measurements an answer of `matrix advise` may stand on: every surface that names a
best configuration (advise, the report's "Your job" and "Best choices", `history best`, the
dashboard) takes its candidates from `candidates`, so they agree on what was left out.

A flag belongs to the repeat that earned it, not to the configuration: a repeat flagged
(contended, throttled, oversubscribed, fewer epochs...) is dropped, and its configuration
stays with its clean repeats, their count said. A configuration is left out only when no
clean repeat stays. Where that leaves nothing, the answer is a best guess from the flagged
repeats, said so with how to get a clean one; `include_flagged` answers from every repeat
with its flags beside it. An implausible repeat (a figure past what the hardware can do) is
a measurement error, never a guess: it is dropped in every case.

Runs of different code versions of a workload are different configurations (their config
ids differ); their labels name the version where they would otherwise read alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from orchestrator.results.records import Flag

if TYPE_CHECKING:
    import pandas as pd

# flags of the machine's conditions while timing, not of the configuration
CONDITION_FLAGS = (Flag.CONTENDED.value, Flag.THROTTLED.value)


@dataclass(frozen=True)
class Candidates:
    """The rows an answer stands on, and what was set aside, each with why."""

    rows: pd.DataFrame  # the repeats advised from
    labels: dict[str, str]  # config_id -> its name for people
    left_out: dict[str, str]  # label -> why it is never advised
    dropped: dict[str, str]  # label -> which repeats were dropped and why (it stays)
    guess: str | None = None  # why the answer is only a best guess (every one flagged)
    flags: dict[str, str] = field(default_factory=dict)  # config_id -> flags kept beside
    # condition flags (contended, throttled) that set repeats aside, by run: what a pick
    # measured in the same run was timed under
    conditions: dict[str, set[str]] = field(default_factory=dict)
    # label -> why, of what a clean answer leaves out (with a guess: every configuration)
    flagged_out: dict[str, str] = field(default_factory=dict)


def candidates(ok: pd.DataFrame, include_flagged: bool = False) -> Candidates:
    """The candidates among judged rows that ended ok with a throughput (module
    docstring)."""
    labels = versioned_labels(ok)
    by_cell = _flags_by_cell(ok)
    impossible = set(by_cell[by_cell.str.contains(Flag.IMPLAUSIBLE.value)].index)
    flagged = set(by_cell[by_cell != ""].index)
    usable = ok[~ok["cell_id"].isin(impossible)]
    clean = usable[~usable["cell_id"].isin(flagged)]
    kept, guess = clean, None
    set_aside = _set_aside(ok, clean, labels)
    flagged_out = set_aside[0]
    if include_flagged or (clean.empty and not usable.empty):
        kept = usable
        if not include_flagged:
            guess = _guess(flagged_out)
    left_out, dropped = set_aside if kept is clean else _set_aside(ok, kept, labels)
    beside = {} if kept is clean else {
        str(c): _union(by_cell[list(dict.fromkeys(g["cell_id"]))])
        for c, g in kept.groupby("config_id", sort=False)}
    return Candidates(kept, labels, left_out, dropped, guess,
                      {c: f for c, f in beside.items() if f}, _conditions(ok), flagged_out)


def _flags_by_cell(ok: pd.DataFrame) -> pd.Series:
    """cell_id -> the union of its rows' flags, "," joined ("" for none). A cell's epochs
    share their flags: each distinct (cell, flags) pair is read once, not every row."""
    import pandas as pd

    pairs = pd.DataFrame({"cell_id": ok["cell_id"].to_numpy(dtype=object),
                          "flags": ok["flags"].fillna("").astype(str).to_numpy(dtype=object)}
                         ).drop_duplicates()
    # a text's flags sorted once; only a cell whose rows differ is joined in Python
    tidy = {text: _union([text]) for text in set(pairs["flags"].tolist())}
    several = pairs["cell_id"].duplicated(keep=False)
    found = pd.Series(pairs["flags"].map(tidy).to_numpy(), index=pairs["cell_id"].to_numpy(),
                      dtype=object)[~several.to_numpy()]
    if several.any():
        mixed = pairs[several]
        found = pd.concat([found, mixed["flags"].groupby(mixed["cell_id"].to_numpy(),
                                                         sort=False).agg(_union)])
    return found.reindex(pairs["cell_id"].drop_duplicates().to_numpy())  # first rows' order


def _union(flags: Iterable[object]) -> str:
    return ",".join(sorted({f for text in flags for f in str(text).split(",") if f}))


def _set_aside(ok: pd.DataFrame, kept: pd.DataFrame, labels: dict[str, str]
               ) -> tuple[dict[str, str], dict[str, str]]:
    """(label -> why, for configurations with no repeat in `kept`; label -> the repeats
    dropped and why, for those that stay with fewer). Counted over each configuration's
    distinct repeats at once, not a group of rows at a time."""
    left_out: dict[str, str] = {}
    dropped: dict[str, str] = {}
    staying = set(kept["cell_id"].tolist())
    cells = ok[["config_id", "cell_id"]].drop_duplicates()
    gone = ~cells["cell_id"].isin(staying)
    if not gone.any():
        return left_out, dropped
    counts = gone.groupby(cells["config_id"], sort=True).agg(["size", "sum"])
    whys = _why_by_config(ok[~ok["cell_id"].isin(staying)])
    for config, repeats, lost in counts.itertuples():
        if not lost:
            continue
        label, why = labels[str(config)], whys[config]
        if lost == repeats:
            left_out[label] = why
        else:
            dropped[label] = (f"{lost} of {repeats} repeats dropped, "
                              f"{repeats - lost} clean kept: {why}")
    return left_out, dropped


def _why_by_config(rows: pd.DataFrame) -> dict[str, str]:
    """config_id -> why_flagged of its rows in `rows`, for every configuration at once."""
    import pandas as pd

    configs = rows["config_id"].to_numpy()
    found: dict[str, str] = {}
    for column in ("judgement", "error"):
        if column in rows:
            present = rows[column].notna().to_numpy()
            texts = rows[column][present].astype(str).to_numpy()
            said = texts != ""
            firsts = pd.Series(texts[said]).groupby(configs[present][said], sort=False).first()
            found = {**firsts.to_dict(), **found}  # judgement's before error's
    flags = rows["flags"].fillna("").groupby(configs, sort=False).unique()
    return {**{config: "flagged " + ",".join(sorted(set(texts)))
               for config, texts in flags.items()}, **found}


def _conditions(ok: pd.DataFrame) -> dict[str, set[str]]:
    """run -> the condition flags of the repeats it had set aside."""
    found: dict[str, set[str]] = {}
    if "run" not in ok:
        return found
    pairs = ok[["run", "flags"]].drop_duplicates()  # a run's rows share a few flag texts
    for run, flags in zip(pairs["run"].tolist(), pairs["flags"].fillna("").astype(str).tolist(),
                          strict=True):
        for flag in flags.split(","):
            if flag in CONDITION_FLAGS:
                found.setdefault(str(run), set()).add(flag)
    return found


def _guess(left_out: dict[str, str]) -> str:
    """Why the answer is a best guess, and how to get a clean one."""
    kinds = sorted({why.split(":", 1)[0] for why in left_out.values()})
    return (f"every configuration was flagged ({', '.join(kinds)}): the picks are a best "
            "guess from flagged repeats, not a clean answer; run again on a quiet machine "
            "(nothing else busy on its CPUs) for one, or pass --include-flagged to see the "
            "flags beside each figure")


def why_flagged(rows: pd.DataFrame) -> str:
    """The judge's reason for a configuration's flag, else its cell's, else the flags."""
    for column in ("judgement", "error"):
        if column in rows:
            said = [str(v) for v in rows[column].dropna() if str(v)]
            if said:
                return said[0]
    return "flagged " + ",".join(sorted(set(rows["flags"].fillna(""))))


def versioned_labels(rows: pd.DataFrame) -> dict[str, str]:
    """analysis.config_labels, with the workload's version named where two configurations
    of different code would read alike (two runs of edited code are two configurations,
    never one pooled)."""
    from orchestrator.report.analysis import config_labels

    labels = config_labels(rows)
    if "workload_version" not in rows:
        return labels
    versions = rows.drop_duplicates("config_id").set_index("config_id")["workload_version"]
    seen: dict[str, list[str]] = {}
    for config, label in labels.items():
        seen.setdefault(label, []).append(config)
    for label, configs in seen.items():
        if len(configs) > 1:
            for config in configs:
                labels[config] = f"{label} (version {_short(versions.get(config))})"
    return labels


def _short(version: object) -> str:
    """'1+3fa2c9d0e1...' -> '1+3fa2c9d0': enough of a code hash to tell versions apart."""
    text = str(version) if version is not None else "?"
    declared, plus, code = text.partition("+")
    return declared + plus + code[:8] if plus else text
