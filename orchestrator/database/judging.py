"""The store's rows judged as `matrix report` judges its rows (report/judge.py), so that no
path shows a figure the report would flag as impossible: `matrix history` and the dashboard
call this on their rows, one per configuration per run (history.per_run).

A row is judged from its own figure (its repeats' median items/s) and memory peak (the
largest of its repeats', by the best probe each had: the GPU's on a GPU, else the host's),
with its first repeat's provenance (GPU model, GPUs, devices used, cores, instance type,
workload version) and that repeat's first measurement (the recorded FLOP count, the node's
own CPU peak estimate): each run by its own records, as its report judges it, never by
another run's (a second run of a configuration is not flagged for a count the first
recorded wrong), and never from the flags stored with it alone: a journal written by hand
or by another tool, or by an older version of this one, carries flags that judged nothing.
The judge looks up its FLOP model and peak once per configuration, as it does for the
report. A stored `implausible` that cannot be checked (no peak) is kept, as
the report keeps it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from orchestrator.database.connection import Connection
from orchestrator.results.columns import PARAM_PREFIX

if TYPE_CHECKING:
    import pandas as pd

PROVENANCE_FIELDS = ("gpu_model", "gpu_count", "devices_used", "cpu_count", "instance_type",
                     "workload_version", "node", "framework",
                     # a cell across nodes: its nodes' peak, its bus bandwidth to the link
                     "nodes", "net_busbw_gbs", "net_link_gbps")
CEILING_FIELDS = ("node", "framework", "ceiling_flops", "ceiling_precision", "ceiling_probe",
                  "ceiling_cost_s")
MEASURED_FIELDS = ("flops_per_item", "peak_flops", "peak_source")
ENVIRONMENT_FIELDS = ("framework", "framework_version", "cuda", "cudnn", "driver", "hostname",
                      "cpu_threads")


def judged_runs(db: Connection, runs: pd.DataFrame) -> pd.DataFrame:
    """per_run's rows with `flags`, `implausible` and `judgement` (the reasons, "" where
    none) as the report's judge gives them, and the `workload_version` they ran."""
    import pandas as pd

    from orchestrator.report.judge import judged

    runs = runs.copy()
    if runs.empty:
        runs["judgement"] = pd.Series(dtype=object)
        return runs
    attempts = list(dict.fromkeys(runs["attempt_id"]))
    provenance = _records(db, "SELECT attempt_id, provenance FROM cells WHERE "
                              "provenance IS NOT NULL AND attempt_id IN ({})", attempts)
    # what a configuration's FLOP count and CPU peak were in each run, by that run's own
    # records: a count one run recorded wrong says nothing of another run's rows
    measured = _first_measurements(db, attempts)
    frame = pd.DataFrame({"status": "ok", "workload": runs["workload"].to_numpy(),
                          "items_per_s": runs["items_per_s"].to_numpy(),
                          "flags": runs["flags"].to_numpy()}, index=runs.index)
    ids = runs["attempt_id"].tolist()  # a plain list: iterating pandas' Arrow-backed
    # strings a value at a time is slow
    for field in PROVENANCE_FIELDS:
        frame[field] = [provenance.get(a, {}).get(field) for a in ids]
    for field in MEASURED_FIELDS:
        frame[field] = [measured.get(a, {}).get(field) for a in ids]
    on_gpu = frame["gpu_model"].notna()
    frame["mem_alloc_peak_bytes"] = runs["mem_peak_bytes"].where(on_gpu)
    frame["host_rss_peak_bytes"] = runs["mem_peak_bytes"].where(~on_gpu)
    # a stored flag the judge cannot check keeps the reason its cell gave (the error field)
    flagged = list(dict.fromkeys(runs.loc[runs["flags"] != "", "attempt_id"]))
    cells = _records(db, "SELECT attempt_id, record FROM cells WHERE attempt_id IN ({})",
                     flagged)
    frame["error"] = [cells.get(a, {}).get("error") for a in ids]
    texts = runs["params"].tolist()
    parsed = {text: json.loads(text) for text in set(texts)}  # one per configuration
    params = pd.DataFrame([parsed[text] for text in texts], index=runs.index)
    frame = frame.join(params.add_prefix(PARAM_PREFIX))
    frame = _with_scaling(frame, runs)
    # whose ceiling a row shares: its run's, node's, hardware's, stack's (report/ceilings.py)
    frame = frame.assign(run=runs["run_key"], hardware=runs["hardware"], stack=runs["stack"])
    verdicts = judged(frame, probes=_probes(db, set(runs["run_key"])))
    runs["flags"] = verdicts["flags"].fillna("")
    runs["workload_version"] = frame["workload_version"]
    for field in ENVIRONMENT_FIELDS:  # what `history regressions` names where it changed
        runs[field] = [provenance.get(a, {}).get(field) for a in ids]
    runs["judgement"] = verdicts["judgement"].fillna("").astype(str)
    runs["implausible"] = runs["flags"].str.contains("implausible", regex=False)
    for column in ("achieved_flops", "peak_fraction", "ceiling_fraction", "node_ceiling_flops"):
        runs[column] = pd.to_numeric(verdicts[column], errors="coerce") \
            if column in verdicts else float("nan")
    return runs


def _probes(db: Connection, run_keys: set[str]) -> pd.DataFrame:
    """The cells of these runs that measured their node's ceiling, whichever rows the
    question shows: a configuration's row shares the ceiling another cell measured."""
    import pandas as pd

    found = db.query_in("SELECT run_key, hardware, stack, provenance FROM cells WHERE "
                        "run_key IN ({}) AND provenance LIKE ?", sorted(run_keys),
                        after=['%"ceiling_flops"%'])
    rows = []
    for run_key, hardware, stack, text in found:
        record = json.loads(text)
        rows.append({"run": run_key, "hardware": hardware, "stack": stack,
                     **{field: record.get(field) for field in CEILING_FIELDS}})
    return pd.DataFrame(rows, columns=["run", "hardware", "stack", *CEILING_FIELDS])


def _with_scaling(frame: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Each row's speedup over its one-device twin in the same run, and its parallel
    efficiency, as the report derives them (analysis.with_scaling), so the judge's scaling
    bound applies: a speedup above the device count cannot come from adding devices."""
    from orchestrator.report.analysis import SCALING_COLUMNS, with_scaling
    from orchestrator.report.judge import devices_column

    scaled = with_scaling(frame.assign(devices=devices_column(frame), stack=runs["stack"],
                                       run_key=runs["run_key"]), within=("run_key",))
    return frame.join(scaled[list(SCALING_COLUMNS)])


def _first_measurements(db: Connection, attempts: list[str]) -> dict[str, dict[str, Any]]:
    """attempt_id -> its first measurement's MEASURED_FIELDS, read by the database: a
    record holds every figure of its epoch, and 5,000 of them parsed here cost a tenth of
    a second for three fields."""
    columns = ", ".join([db.json_number("record", "flops_per_item"),
                         db.json_number("record", "peak_flops"),
                         db.json_text("record", "peak_source")])
    rows = db.query_in(f"SELECT attempt_id, {columns} FROM measurements WHERE seq = 0 AND "
                       "attempt_id IN ({})", attempts)
    return {attempt: dict(zip(MEASURED_FIELDS, figures, strict=True))
            for attempt, *figures in rows}


def _records(db: Connection, sql: str, attempts: Iterable[str]) -> dict[str, dict[str, Any]]:
    """attempt_id -> its JSON record, for the attempts asked (in chunks). A text seen
    before is parsed once: the repeats of a configuration on one node share their
    provenance word for word."""
    found: dict[str, dict[str, Any]] = {}
    parsed: dict[str, dict[str, Any]] = {}
    for attempt, text in db.query_in(sql, list(attempts)):
        if text not in parsed:
            parsed[text] = json.loads(text)
        found[attempt] = parsed[text]
    return found
