"""What the dashboard shows, read from the store: one row per configuration per run (the
repeat is the unit, as in `matrix history`), each with its flags and their reasons and its
provenance; the runs themselves; and each workload's best choices, `matrix advise`'s answer
per million items over every run in the store (as `matrix advise --db` reads it), so the
site names the pick advise, the report and `matrix history best` name."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.database.connection import Connection
from orchestrator.database.history import (
    SETTINGS_COLUMNS,
    Filters,
    per_run,
    repeats,
    stored_settings,
)
from orchestrator.database.judging import judged_runs
from orchestrator.database.store_rows import store_rows
from orchestrator.database.whole_history import whole_per_run, whole_repeats
from orchestrator.results.columns import NODES_COLUMN

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.report.advise import Advice

# provenance fields a point's tooltip shows, in this order, with their labels
PROVENANCE = (("hostname", "host"), ("instance_type", "instance"), ("gpu_model", "GPU"),
              ("gpu_count", "GPUs"), ("cpu_model", "CPU"), ("framework", "framework"),
              ("framework_version", "version"), ("cuda", "CUDA"), ("python", "Python"),
              ("image_tag", "image"), ("price_source", "price"), ("tool_version", "tool"),
              ("git_revision", "revision"))


@dataclass(frozen=True)
class Run:
    key: str
    run: str  # the matrix's name
    location: str  # its run directory, where it was written or imported from
    date: str  # its first cell's start
    cells: int
    page: str  # runs/<key>.html in the site


@dataclass(frozen=True)
class SiteData:
    store: str  # the store's URL as shown (no password)
    rows: pd.DataFrame  # per_run's, plus devices, device, reason, provenance, latest
    runs: list[Run]
    # scripts timed as a whole (database/whole_history.py): no throughput, a table apart
    whole: pd.DataFrame
    # workload -> advise's answer per million items over the store's rows (best_choices)
    choices: dict[str, Advice] = field(default_factory=dict)

    @property
    def workloads(self) -> list[str]:
        """Every workload with a row, of either kind."""
        return sorted({*(self.rows["workload"] if not self.rows.empty else ()),
                       *(self.whole["workload"] if not self.whole.empty else ())})


def site_data(db: Connection, shown: str, advised: pd.DataFrame | None = None,
              read: tuple[pd.DataFrame, pd.DataFrame] | None = None) -> SiteData:
    """Everything the site shows; rows of every run, each configuration's latest marked.
    `advised`: the store's rows as advise reads them (store_rows), and `read`: the repeats
    and their judged runs they were made from, where already read (build.py)."""
    samples = repeats(db, Filters()) if read is None else read[0]
    runs = _runs(db)
    whole = whole_per_run(db, whole_repeats(db, Filters()))
    if samples.empty:
        import pandas as pd

        return SiteData(store=shown, rows=pd.DataFrame(), runs=runs, whole=whole)
    # as the report judges: never a stored verdict
    rows = judged_runs(db, per_run(samples)) if read is None else read[1].copy()
    provenance = _provenance(db, set(rows["attempt_id"]))
    reasons = _reasons(db)
    rows["provenance"] = [_shown(provenance.get(a)) for a in rows["attempt_id"]]
    devices = [_devices(provenance.get(a)) for a in rows["attempt_id"]]
    rows["devices"] = [count for count, _ in devices]
    rows["device"] = [kind for _, kind in devices]
    # the machine a row ran on, as scaling twins share it (report/analysis.with_machine)
    rows["machine"] = [(provenance.get(a) or {}).get("instance_type") or hardware
                       for a, hardware in zip(rows["attempt_id"], rows["hardware"], strict=True)]
    firsts = samples[samples["flags"] != ""].drop_duplicates(["config_id", "run_key"])
    by_row = {(c, r): reasons.get(a, "") for c, r, a in
              firsts[["config_id", "run_key", "attempt_id"]].itertuples(index=False)}
    stored = [by_row.get((c, r), "") for c, r in zip(rows["config_id"], rows["run_key"],
                                                     strict=True)]
    # the judge's reasons for an implausible figure; the journal's for other flags
    rows["reason"] = [judgement or (text if flags else "") for judgement, text, flags
                      in zip(rows["judgement"], stored, rows["flags"], strict=True)]
    rows["params"] = _with_settings(rows)
    newest = rows.groupby("config_id")["date"].transform("max")
    rows["latest"] = rows["date"] == newest
    choices, left_out = best_choices(store_rows(db, Filters()) if advised is None
                                     else advised)
    # a configuration the best choices leave out says so wherever a row of it is shown
    rows["left_out"] = [left_out.get(c, "") for c in rows["config_id"]]
    return SiteData(store=shown, rows=rows, runs=runs, whole=whole, choices=choices)


def _with_settings(rows: pd.DataFrame) -> list[str]:
    """Each row's parameters with its recorded settings (`hw.partition`, `stack.niceness`,
    `hw.nodes`) as one JSON text: what names a configuration on the site, as the report's
    labels name it, so two that differ only in a setting never read the same. `hw.nodes`
    is 1 where another configuration spans nodes, as in every frame (results/columns.py:
    with_node_counts)."""
    keys = list(rows[["params", *SETTINGS_COLUMNS]].itertuples(index=False, name=None))
    merged = {key: {**json.loads(key[0]), **stored_settings(key[1:])} for key in set(keys)}
    if any(NODES_COLUMN in named for named in merged.values()):
        for named in merged.values():
            named.setdefault(NODES_COLUMN, 1)
    texts = {key: json.dumps(named, sort_keys=True) for key, named in merged.items()}
    return [texts[key] for key in keys]


def best_choices(stored: pd.DataFrame) -> tuple[dict[str, Advice], dict[str, str]]:
    """(workload -> advise's answer per million items (report/advise.py: PER_MILLION) over
    `stored`, the store's rows as `matrix advise --db` reads them; config_id -> why the
    answer left it out, for each configuration it left out)."""
    from orchestrator.report.advise import PER_MILLION, AdviseError, advise, measured_rows
    from orchestrator.report.candidates import versioned_labels

    choices: dict[str, Advice] = {}
    left_out: dict[str, str] = {}
    for workload in sorted(set(stored["workload"])) if not stored.empty else []:
        try:
            answer = advise(stored, PER_MILLION, workload)
        except AdviseError:  # none of its rows ended ok with a throughput
            continue
        choices[workload] = answer
        labels = versioned_labels(measured_rows(stored, workload)[1])  # advise's names
        left_out |= {config: answer.left_out[label] for config, label in labels.items()
                     if label in answer.left_out}
    return choices, left_out


def _runs(db: Connection) -> list[Run]:
    found = db.query("SELECT r.run_key, r.run, r.location, MIN(c.started_at), COUNT(*) "
                     "FROM runs r JOIN cells c ON c.run_key = r.run_key "
                     "GROUP BY r.run_key, r.run, r.location ORDER BY MIN(c.started_at)")
    return [Run(key=key, run=run, location=location, date=date, cells=int(cells),
                page=f"runs/{key}.html") for key, run, location, date, cells in found]


def _provenance(db: Connection, attempts: set[str]) -> dict[str, dict[str, Any]]:
    """attempt_id -> its provenance record, for the attempts asked."""
    return {attempt_id: json.loads(text) for attempt_id, text in db.query(
        "SELECT attempt_id, provenance FROM cells WHERE provenance IS NOT NULL")
        if attempt_id in attempts}


def _shown(record: dict[str, Any] | None) -> list[list[str]]:
    """[label, value] pairs of a provenance record, as a point's tooltip shows them."""
    return [[label, str(record[key])] for key, label in PROVENANCE
            if record and record.get(key) not in (None, "")]


def _reasons(db: Connection) -> dict[str, str]:
    """attempt_id -> why its flags were raised (the cell's error field), for flagged cells."""
    return {attempt_id: json.loads(text).get("error") or ""
            for attempt_id, text in db.query("SELECT attempt_id, record FROM cells "
                                             "WHERE flags <> ''")}


def _devices(record: dict[str, Any] | None) -> tuple[int, str]:
    """What a row ran on: how many devices (the scaling chart's x: the devices its worker
    recorded using, else its GPUs, else 1 on a CPU) and of
    which kind (its GPU model, "GPU", or "CPU"), so a CPU is never on a GPU's line."""
    gpus = (record or {}).get("gpu_count") or 0
    used = (record or {}).get("devices_used") or 0  # what the workload trained on: its
    # CPU workers or the GPUs it used, as the report's scaling reads it (judge.devices_column)
    if not gpus:
        return int(used) or 1, "CPU"
    return int(used) or int(gpus), str((record or {}).get("gpu_model") or "GPU")


def page_name(workload: str) -> str:
    """The workload's page: its name where that is a plain file name (what a matrix and a
    journal allow, records.Name), else a hash of it, so a name a store took in before
    names were checked can never write outside the site or stop the other pages."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}", workload):
        return f"workload-{workload}.html"
    return f"workload-{hashlib.sha256(workload.encode()).hexdigest()[:16]}.html"
