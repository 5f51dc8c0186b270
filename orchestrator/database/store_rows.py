"""The results store read as one run frame, for `matrix advise` and `matrix explain` with
`--db`: every timed epoch of every repeat that ended ok, across all runs, with the columns
those commands read from a run's frame (report/frame.py).

A repeat is an attempt: the same cell in two runs is two repeats of its configuration. Each
configuration-in-a-run is judged as `matrix history` judges it (judging.judged_runs: from its
figures and provenance, never from the flags its journal stored alone), and its verdict is
on each of its rows. Every other flag stays the repeat's own, with its cell's reason, as a
run's frame has it: a repeat the machine's load set aside drops that repeat alone, not its
siblings of the same run (report/candidates.py), so `advise RUN` and `advise --db` agree.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from orchestrator.database.connection import Connection
from orchestrator.database.history import (
    SETTINGS_COLUMNS,
    Filters,
    per_run,
    repeats,
    stored_settings,
)
from orchestrator.database.judging import judged_runs
from orchestrator.results.columns import as_param_columns, with_node_counts
from orchestrator.results.records import JUDGED_FLAGS

if TYPE_CHECKING:
    import pandas as pd

# every timed epoch, its own figures read by the database; only the attempts the filters
# select where they select some (the join with the samples keeps the ok ones): a join with
# every cell and an ORDER BY took a third of the query's time at 50,000 rows
EPOCHS = """SELECT m.attempt_id, m.seq, m.epoch, m.items_per_s, {items}, {energy}
FROM measurements m WHERE m.items_per_s IS NOT NULL{within}"""
WITHIN = " AND m.attempt_id IN (SELECT c.attempt_id FROM cells c WHERE {where})"
EPOCH_COLUMNS = ["attempt_id", "seq", "epoch", "items_per_s", "items", "gpu_energy_j"]
SAMPLE_COLUMNS = ["attempt_id", "workload", "hardware", "stack", "config_id", "run",
                  "run_key", "item_unit", "price_per_hour_usd", "params", *SETTINGS_COLUMNS,
                  "flags"]


def store_rows(db: Connection, filters: Filters, samples: pd.DataFrame | None = None,
               runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows (see the module's docstring); an empty frame where nothing ended ok.
    `samples` (repeats(db, filters)) and `runs` (judged_runs of their per_run), where the
    caller read them already. Joined in pandas, never a Python loop per attempt: 50,000
    rows took 3.5 s that way."""
    import pandas as pd

    samples = repeats(db, filters) if samples is None else samples
    if samples.empty:
        return pd.DataFrame()
    runs = judged_runs(db, per_run(samples)) if runs is None else runs
    where, params = filters.where()
    within = WITHIN.format(where=where) if params else ""
    epochs = db.frame(EPOCHS.format(items=db.json_number("m.record", "items"),
                                    energy=db.json_number("m.record", "gpu_energy_j"),
                                    within=within), params if within else (), EPOCH_COLUMNS)
    epochs = epochs.sort_values("seq", kind="stable")  # each attempt's epochs in order
    verdicts = runs[["config_id", "run_key", "flags", "judgement", "workload_version"]]
    rows = samples[SAMPLE_COLUMNS].merge(
        verdicts.rename(columns={"flags": "judged"}), on=["config_id", "run_key"],
        how="left", validate="many_to_one")
    rows["error"] = _reasons(db, rows)
    rows["flags"] = _own_flags(rows["flags"], rows.pop("judged"))
    stored = ["params", *SETTINGS_COLUMNS]
    configs = rows[stored].drop_duplicates()  # one per configuration
    columns = pd.DataFrame([{**as_param_columns(json.loads(params)), **stored_settings(rest)}
                            for params, *rest in configs.itertuples(index=False)],
                           index=configs.index)
    rows = rows.merge(configs.join(columns), on=stored, how="left").merge(
        epochs, on="attempt_id", how="inner", sort=False)  # the samples' order, epochs
    # a configuration's measured rows, named as a run's frame names them (report/frame.py)
    return with_node_counts(rows.drop(columns=["run_key", *stored, "seq"]).rename(
        columns={"attempt_id": "cell_id"}).assign(status="ok").reset_index(drop=True))


def _own_flags(stored: pd.Series, judged: pd.Series) -> pd.Series:
    """Each repeat's flags: its own as stored, but for those the judge decides, which are
    its configuration-in-run's verdict. Worked out once per distinct pair."""
    pairs = stored.fillna("").astype(str) + "|" + judged.fillna("").astype(str)
    found = {}
    for pair in set(pairs.tolist()):
        own, verdict = pair.split("|")
        found[pair] = ",".join(sorted({f for f in own.split(",") if f and f not in JUDGED_FLAGS}
                                      | {f for f in verdict.split(",") if f in JUDGED_FLAGS}))
    return pairs.map(found)


def _reasons(db: Connection, rows: pd.DataFrame) -> list[str | None]:
    """The reason each repeat's cell gave for the flags it stored (its `error`), as a run's
    frame carries it; read for those attempts alone (few). The judge's flags have theirs
    in `judgement`."""
    texts = rows["flags"].fillna("").astype(str)
    own = {text for text in set(texts.tolist())
           if any(f and f not in JUDGED_FLAGS for f in text.split(","))}
    flagged = list(dict.fromkeys(rows.loc[texts.isin(own), "attempt_id"].tolist()))
    said = dict(db.query_in(f"SELECT attempt_id, {db.json_text('record', 'error')} FROM "
                            "cells WHERE attempt_id IN ({})", flagged)) if flagged else {}
    return [said.get(a) for a in rows["attempt_id"].tolist()] if said else \
        [None] * len(rows)
