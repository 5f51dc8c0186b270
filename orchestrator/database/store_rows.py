"""The results store read as one run frame, for `matrix advise` and `matrix explain` with
`--db`: every timed epoch of every repeat that ended ok, across all runs, with the columns
those commands read from a run's frame (report/frame.py).

A repeat is an attempt: the same cell in two runs is two repeats of its configuration. Each
configuration-in-a-run is judged as `matrix history` judges it (judging.judged_runs: from its
figures and provenance, never from the flags its journal stored alone), and its verdict is
on each of its rows.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from orchestrator.database.connection import Connection
from orchestrator.database.history import Filters, per_run, repeats
from orchestrator.database.judging import judged_runs
from orchestrator.results.columns import as_param_columns

if TYPE_CHECKING:
    import pandas as pd

MEASURED = ("epoch", "items_per_s", "items", "gpu_energy_j")


def store_rows(db: Connection, filters: Filters) -> pd.DataFrame:
    """The rows (see the module's docstring); an empty frame where nothing ended ok."""
    import pandas as pd

    samples = repeats(db, filters)
    if samples.empty:
        return pd.DataFrame()
    runs = judged_runs(db, per_run(samples))
    # each configuration-in-a-run's verdict, looked up once per attempt as a plain dict: a
    # frame's .loc per attempt cost history best 11 s over 25,000 attempts
    judged = {(c, k): (f, j, v) for c, k, f, j, v in zip(
        runs["config_id"].tolist(), runs["run_key"].tolist(), runs["flags"].tolist(),
        runs["judgement"].tolist(), runs["workload_version"].tolist(), strict=True)}
    parsed: dict[str, dict[str, object]] = {}
    found = db.query_in("SELECT attempt_id, record FROM measurements WHERE attempt_id IN ({})",
                        list(samples["attempt_id"]))
    measured: dict[str, list[dict[str, object]]] = {}
    for attempt_id, text in found:
        record = json.loads(text)
        measured.setdefault(attempt_id, []).append({k: record.get(k) for k in MEASURED})
    rows = []
    for attempt in samples.itertuples(index=False):
        flags, judgement, version = judged[(attempt.config_id, attempt.run_key)]
        if attempt.params not in parsed:  # a configuration's repeats share their text
            parsed[attempt.params] = as_param_columns(json.loads(attempt.params))
        base = {"status": "ok", "workload": attempt.workload, "hardware": attempt.hardware,
                "stack": attempt.stack, "config_id": attempt.config_id,
                "cell_id": attempt.attempt_id, "run": attempt.run,
                "item_unit": attempt.item_unit, "price_per_hour_usd": attempt.price_per_hour_usd,
                "flags": flags, "judgement": judgement,
                # two versions of a workload's code are two configurations, named apart
                "workload_version": version, **parsed[attempt.params]}
        rows += [{**base, **epoch} for epoch in measured.get(attempt.attempt_id, [])
                 if epoch.get("items_per_s") is not None]
    return pd.DataFrame(rows)
