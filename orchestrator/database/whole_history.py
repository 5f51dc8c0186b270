"""`matrix history` and the dashboard for scripts timed as a whole: a command workload run
without the `matrix_bench` client has no throughput (report/whole_runs.py), so its rows
never join the items/s tables. They get their own, as the report gives them: per
configuration and run, its repeats, the median wall time of the script and its spread, the
memory peak, and the cost of one run (its wall time x its hardware's price).

A script's wall time includes whatever it does besides training, so it compares only with
the same script's other configurations: "quickest" and "cheapest" are picked per workload.
Its figures carry the flags their cells recorded, and `noisy` where its repeats' wall times
spread as a throughput's would be flagged (report/whole_runs.py: `noisy`); there is no
throughput to judge.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from orchestrator.database.connection import Connection
from orchestrator.database.history import (
    SETTINGS_COLUMNS,
    Filters,
    described,
    final_attempts,
    picks,
    with_match_ids,
)
from orchestrator.report.whole_runs import noisy
from orchestrator.results.records import Flag

if TYPE_CHECKING:
    import pandas as pd

# whether any attempt the filters select ended ok without a throughput: the one question a
# store of throughputs alone needs answered, where reading each cell's final attempt again
# took a third of a second at 25,000 cells
ANY_WHOLE = """SELECT 1 FROM cells c WHERE c.status = 'ok' AND c.items_per_s IS NULL
AND {where} LIMIT 1"""


def whole_repeats(db: Connection, filters: Filters) -> pd.DataFrame:
    """One row per repeat timed as a whole (its final attempt ended ok, measured once with
    `timing: whole`), with `wall_s`, the script's own run from start to exit."""
    import pandas as pd

    where, params = filters.where()
    if not db.query(ANY_WHOLE.format(where=where), params):
        return pd.DataFrame()  # none to find: the store's attempts are not read again
    final = final_attempts(db, filters)
    candidates = final[(final["status"] == "ok") & final["items_per_s"].isna()]
    if candidates.empty:
        return pd.DataFrame()
    walls: dict[str, float] = {}
    for attempt_id, text in db.query_in("SELECT attempt_id, record FROM measurements "
                                        "WHERE seq = 0 AND attempt_id IN ({})",
                                        list(candidates["attempt_id"])):
        record = json.loads(text)
        if record.get("timing") == "whole" and record.get("epoch_s") is not None:
            walls[attempt_id] = float(record["epoch_s"])
    found = candidates[candidates["attempt_id"].isin(walls)]
    found = found.assign(wall_s=[walls[a] for a in found["attempt_id"]])
    return described(db, filters, found)


def whole_per_run(db: Connection, samples: pd.DataFrame) -> pd.DataFrame:
    """A configuration's figures in each run: repeats, median wall time and its spread,
    the largest memory peak, the cost of one run where priced, its repeats' flags (and
    `noisy` for a spread the report would call so), and `match_id` and `code`
    (history.with_match_ids: across changes of the user's code)."""
    import pandas as pd

    if samples.empty:
        return pd.DataFrame()
    grouped = samples.groupby(["config_id", "run_key"], sort=False)
    runs = grouped[["workload", "label", "hardware", "stack", "params", *SETTINGS_COLUMNS,
                    "run", "location", "price_per_hour_usd", "attempt_id"]].first()
    runs["date"] = grouped["started_at"].min()
    runs["repeats"] = grouped.size()
    runs["wall_s"] = grouped["wall_s"].median()
    runs["spread"] = (grouped["wall_s"].max() - grouped["wall_s"].min()) / runs["wall_s"]
    runs["mem_peak_bytes"] = grouped["mem_peak_bytes"].max()
    runs["flags"] = [",".join(sorted(set(filter(None, text.split(",")))
                                     | ({Flag.NOISY.value} if noisy(spread, repeats) else set())))
                     for text, spread, repeats in zip(
                         grouped["flags"].agg(",".join), runs["spread"], runs["repeats"],
                         strict=True)]
    runs["usd_per_run"] = runs["price_per_hour_usd"] / 3600 * runs["wall_s"]
    runs = runs.reset_index()
    versions = dict(db.query_in("SELECT attempt_id, provenance FROM cells WHERE "
                                "provenance IS NOT NULL AND attempt_id IN ({})",
                                list(runs["attempt_id"])))
    runs["workload_version"] = [json.loads(versions[a]).get("workload_version")
                                if a in versions else None for a in runs["attempt_id"]]
    return with_match_ids(runs).sort_values(["workload", "label", "date"], kind="stable")


def whole_best(runs: pd.DataFrame) -> pd.DataFrame:
    """Per workload: the quickest configuration-in-a-run and, where priced, the cheapest
    run (history.picks)."""
    return picks(runs, ("quickest", "wall_s", "min"), "usd_per_run")
