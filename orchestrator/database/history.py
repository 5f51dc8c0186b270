"""`matrix history`: questions across every run in the store.

The unit is the repeat, as in `matrix compare` (report/compare.py): each cell attempt that
is its cell's final one in its run and ended ok counts once, by the median items/s of its
timed epochs. A configuration (`config_id`) seen in a run has that run's repeats; its figure
there is their median.

- best: per workload, `matrix advise`'s answer per million items (report/advise.py:
  PER_MILLION) over the store's rows as `advise --db` reads them (store_rows.py): the
  fastest configuration and, where priced, the cheapest, by their repeats pooled across
  runs, with advise's ties and caveats and what it left out. One decision, so history,
  advise, the report's Best choices and the dashboard name the same configuration.
- trend: a configuration's figure in each run, oldest first.
- regressions: each configuration's latest run against its earlier runs (up to
  `baseline_runs` of them, their repeats pooled), judged by compare's rule; a run
  judged implausible is left out of both sides.

trend and regressions follow a configuration across changes of a user's own code, as
compare does (`match_id`, plan/identity.py), and name the code each run measured.

Each configuration-in-a-run is judged as the report judges a row (database/judging.py),
from its figures and provenance, not from the flags its journal stored.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from orchestrator.database.connection import Connection
from orchestrator.errors import MatrixError
from orchestrator.report.compare import (
    MIN_REPEATS,
    Comparison,
    bootstrap_interval,
    verdict,
)
from orchestrator.report.markdown import fmt
from orchestrator.results.columns import SETTING_OWNERS, as_setting_columns

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.report.advise import Advice, Projection

BASELINE_RUNS = 5


class HistoryFilterError(MatrixError):
    """A `matrix history` option that cannot select anything (a date that is not one)."""


@dataclass(frozen=True)
class Filters:
    workloads: tuple[str, ...] = ()
    hardware: tuple[str, ...] = ()
    stacks: tuple[str, ...] = ()
    since: str | None = None  # an ISO date or time; attempts started on or after it

    def where(self) -> tuple[str, list[Any]]:
        clauses, params = [], []
        for column, values in (("workload", self.workloads), ("hardware", self.hardware),
                               ("stack", self.stacks)):
            if values:
                clauses.append(f"c.{column} IN ({', '.join('?' for _ in values)})")
                params += list(values)
        if self.since:
            clauses.append("c.started_at >= ?")
            params.append(since_stamp(self.since))
        return (" AND ".join(clauses) or "1 = 1"), params


def since_stamp(text: str) -> str:
    """`--since` as the stored form of a start time (ISO 8601, UTC)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise HistoryFilterError(f"--since {text!r} is not a date (YYYY-MM-DD) or an ISO "
                                 "time (YYYY-MM-DDTHH:MM)") from None
    if len(text) <= len("YYYY-MM-DD"):
        return moment.date().isoformat()
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat(timespec="seconds")


ATTEMPTS = """SELECT c.attempt_id, c.run_key, c.cell_id, c.attempt, c.status, c.config_id,
       c.flags, c.started_at, c.price_per_hour_usd, c.items_per_s, c.item_unit,
       c.mem_peak_bytes FROM cells c WHERE {where}"""
ATTEMPT_COLUMNS = ["attempt_id", "run_key", "cell_id", "attempt", "status", "config_id",
                   "flags", "started_at", "price_per_hour_usd", "items_per_s", "item_unit",
                   "mem_peak_bytes"]
# each owner's recorded settings (results/columns.py) as the JSON of its own cells column
SETTINGS_COLUMNS = [f"{owner}_settings" for owner in SETTING_OWNERS]
CONFIGS = """SELECT DISTINCT c.config_id, c.workload, c.hardware, c.stack, c.params,
       c.hw_settings, c.stack_settings FROM cells c WHERE {where}"""
CONFIG_COLUMNS = ["config_id", "workload", "hardware", "stack", "params", *SETTINGS_COLUMNS]


def repeats(db: Connection, filters: Filters) -> pd.DataFrame:
    """One row per repeat: the final attempt of each cell in each run the filters select,
    where it ended ok with a throughput (its figures are stored with it: schema.py, v3).
    One narrow scan of the attempts, the rest in pandas: a window function over every cell
    took SQLite three times as long, and a configuration's columns are read once."""
    final = final_attempts(db, filters)
    return described(db, filters, final[(final["status"] == "ok")
                                        & final["items_per_s"].notna()])


def final_attempts(db: Connection, filters: Filters) -> pd.DataFrame:
    """Each cell's final attempt in each run the filters select (ATTEMPT_COLUMNS)."""

    where, params = filters.where()
    attempts = db.frame(ATTEMPTS.format(where=where), params, ATTEMPT_COLUMNS)
    return attempts.sort_values(["started_at", "attempt"], kind="stable").drop_duplicates(
        ["run_key", "cell_id"], keep="last")


def described(db: Connection, filters: Filters, found: pd.DataFrame) -> pd.DataFrame:
    """`found` attempts with their run (name, location) and configuration (workload,
    hardware, stack, params, each owner's settings, label); an empty frame for none."""
    import pandas as pd

    if found.empty:
        return pd.DataFrame()
    where, params = filters.where()
    runs = db.frame("SELECT run_key, run, location FROM runs", (),
                    ["run_key", "run", "location"]).set_index("run_key")
    configs = db.frame(CONFIGS.format(where=where), params, CONFIG_COLUMNS)
    configs["label"] = [label(hardware, stack, params, settings) for hardware, stack, params,
                        *settings in configs[["hardware", "stack", "params",
                                              *SETTINGS_COLUMNS]].itertuples(index=False)]
    return found.join(runs, on="run_key").join(
        configs.drop_duplicates("config_id").set_index("config_id"), on="config_id")


def label(hardware: str, stack: str, params: str, settings: Sequence[str]) -> str:
    """A configuration for people, its parameters then its hardware kind's and executor's
    settings (`hw.partition=debug`), from their stored JSON (`settings` as
    SETTINGS_COLUMNS); every value as text (report.markdown.fmt: a control character its
    code), as the report writes it."""
    named = [*sorted(json.loads(params).items()), *sorted(stored_settings(settings).items())]
    shown = " ".join(f"{k}={fmt(v)}" for k, v in named)
    return f"{hardware}/{stack}" + (f" {shown}" if shown else "")


def stored_settings(settings: Sequence[str]) -> dict[str, Any]:
    """The setting columns (`hw.partition`, `stack.niceness`) of a configuration's stored
    settings JSON, one per owner in SETTINGS_COLUMNS' order."""
    return {column: value for owner, text in zip(SETTING_OWNERS, settings, strict=True)
            for column, value in as_setting_columns(owner, json.loads(text)).items()}


def per_run(samples: pd.DataFrame) -> pd.DataFrame:
    """A configuration's figures in each run: repeats, median and range of items/s, the
    largest memory peak, $ per million items, its repeats' flags, when the run measured
    it, and its first repeat's attempt (for its provenance)."""
    grouped = samples.groupby(["config_id", "run_key"], sort=False)
    runs = grouped[["workload", "label", "hardware", "stack", "params", *SETTINGS_COLUMNS,
                    "run", "location", "item_unit", "price_per_hour_usd",
                    "attempt_id"]].first()
    # the earliest start as Arrow text: min over Python strings falls back to a loop per
    # group (0.3 s over 5,000 configurations-in-runs)
    runs["date"] = samples["started_at"].astype("str").groupby(
        [samples["config_id"], samples["run_key"]], sort=False).min()
    runs["repeats"] = grouped.size()
    runs["items_per_s"] = grouped["items_per_s"].median()
    runs["lowest"] = grouped["items_per_s"].min()
    runs["highest"] = grouped["items_per_s"].max()
    runs["spread"] = (runs["highest"] - runs["lowest"]) / runs["items_per_s"]
    runs["mem_peak_bytes"] = grouped["mem_peak_bytes"].max()
    marked = samples[samples["flags"] != ""]  # few: a Python join per flagged group is cheap
    flags = marked.groupby(["config_id", "run_key"])["flags"].agg(
        lambda found: ",".join(sorted({f for text in found for f in text.split(",")})))
    runs["flags"] = flags.reindex(runs.index).fillna("")
    runs["implausible"] = runs["flags"].str.contains("implausible", regex=False)
    runs["usd_per_million_items"] = runs["price_per_hour_usd"] / 3600 / runs["items_per_s"] * 1e6
    return runs.reset_index().sort_values(["workload", "label", "date"], kind="stable")


def with_match_ids(runs: pd.DataFrame) -> pd.DataFrame:
    """Judged runs (judging.judged_runs) with `match_id`, their configuration across changes
    of a user's code, and `code`: the workload version where it carries a code hash."""
    from orchestrator.plan.identity import code_free_version, match_id

    parsed = {text: json.loads(text) for text in set(runs["params"])}
    rows = zip(runs["config_id"], runs["workload_version"], runs["hardware"], runs["stack"],
               runs["workload"], runs["params"], *(runs[c] for c in SETTINGS_COLUMNS),
               strict=True)
    runs = runs.assign(match_id=[match_id(c, v, (h, s, w), parsed[p], stored_settings(rest))
                                 for c, v, h, s, w, p, *rest in rows])
    runs["code"] = [v if isinstance(v, str) and code_free_version(v) != v else None
                    for v in runs["workload_version"]]
    return runs


def best(rows: pd.DataFrame, samples: pd.DataFrame) -> pd.DataFrame:
    """Per workload, advise's answer per million items over `rows` (store_rows.py): its
    fastest pick and, where priced, its cheapest, each with its label as advise names it,
    median items/s and $ per million items over its repeats pooled across runs, the
    repeats and runs it stands on, when and where it was last measured (from `samples`,
    repeats()), its ties and its caveats (`said`: the lines a person reads under it); then
    each configuration advise left out, with why (`best` "left out")."""
    import pandas as pd

    from orchestrator.report.advise import PER_MILLION, AdviseError, advise, measured_rows
    from orchestrator.report.candidates import candidates, versioned_labels

    found: list[dict[str, Any]] = []
    for workload in sorted(set(rows["workload"])) if not rows.empty else []:
        try:
            answer = advise(rows, PER_MILLION, workload)
        except AdviseError:  # nothing of it ended ok with a throughput
            continue
        ok = measured_rows(rows, workload)[1]
        configs = {label: c for c, label in versioned_labels(ok).items()}  # advise's names
        for question in ("fastest", "cheapest"):
            pick = answer.pick(question)
            if pick is None or (question == "cheapest" and pick.cost_usd is None):
                continue  # the cheapest only where a price exists
            # the repeats it stands on, as advise took them (a pick keeps the same ones
            # among its own rows as among all: its clean ones, or all where none is clean)
            mine = ok[ok["config_id"] == pick.config_id]
            cells = set(candidates(mine, PER_MILLION.include_flagged).rows["cell_id"])
            found.append(_answered(answer, question, pick,
                                   samples[samples["attempt_id"].isin(cells)]))
        found += [{"workload": workload, "best": "left out", "label": label,
                   "config_id": configs.get(label), "item_unit": answer.unit, "why": why,
                   "said": [why]} for label, why in answer.left_out.items()]
    found_frame = pd.DataFrame(found, columns=BEST_COLUMNS)  # every column, picks or none
    for column in ("repeats", "runs"):  # counts, empty for a configuration left out
        if column in found_frame:
            found_frame[column] = found_frame[column].astype("Int64")
    return found_frame


# best's columns: a pick's (_answered) and a left-out configuration's `why`
BEST_COLUMNS = ["workload", "best", "label", "config_id", "hardware", "stack", "items_per_s",
                "item_unit", "usd_per_million_items", "repeats", "runs", "date", "run",
                "location", "flags", "ties", "notes", "dropped", "best_guess", "said", "why"]


def _answered(answer: Advice, question: str, pick: Projection, measured: pd.DataFrame
              ) -> dict[str, Any]:
    """One pick's row of `best`: advise's figures, and its latest measurement's run."""
    latest = measured.sort_values("started_at", kind="stable").iloc[-1]
    ties, notes = answer.ties.get(question, []), answer.notes.get(question, [])
    dropped = answer.dropped.get(pick.label)
    return {"workload": answer.workload, "best": question, "label": pick.label,
            "config_id": pick.config_id, "hardware": latest["hardware"],
            "stack": latest["stack"], "items_per_s": pick.items_per_s,
            "item_unit": answer.unit, "usd_per_million_items": pick.cost_usd,
            "repeats": pick.repeats, "runs": measured["run_key"].nunique(),
            "date": latest["started_at"], "run": latest["run"],
            "location": latest["location"], "flags": pick.flags, "ties": ties,
            "notes": notes, "dropped": dropped, "best_guess": answer.guess,
            "said": said(answer, question)}


def said(answer: Advice, question: str) -> list[str]:
    """What a person must read beside a pick, in advise's words (advise_text.py): its ties,
    its caveats, the repeats its configuration lost and why, and why the answer is only a
    best guess; [] for none. history best's lines under a pick, the dashboard's column."""
    pick = answer.pick(question)
    ties = answer.ties.get(question, [])
    dropped = answer.dropped.get(pick.label) if pick is not None else None
    return ([f"a tie with {', '.join(ties)} (within the noise of their repeats)"]
            if ties else []) + answer.notes.get(question, []) + (
        [f"kept with fewer repeats: {dropped}"] if dropped else []) + (
        [f"best guess: {answer.guess}"] if answer.guess else [])


def picks(runs: pd.DataFrame, fastest: tuple[str, str, str], cost: str) -> pd.DataFrame:
    """Per workload, the row of `runs` best by `fastest` (its name in the `best` column,
    the column, and "max" or "min" of it) and, among the rows with a `cost`, the cheapest:
    for scripts timed as a whole (whole_history.py), which have no throughput for advise
    to answer from."""
    import pandas as pd

    name, column, way = fastest
    found = []
    for _, of_workload in runs.groupby("workload", sort=True):
        best_at = of_workload[column].idxmax() if way == "max" else of_workload[column].idxmin()
        found.append(of_workload.loc[best_at].to_dict() | {"best": name})
        priced = of_workload.dropna(subset=[cost])
        if not priced.empty:
            found.append(priced.loc[priced[cost].idxmin()].to_dict() | {"best": "cheapest"})
    return pd.DataFrame(found)


@dataclass(frozen=True, kw_only=True)
class Regression(Comparison):
    """A configuration's latest run against its earlier ones, judged by compare's rule: a
    comparison (its code_change: the earlier runs' code, the latest's), with which run and
    when, and how many earlier runs it pooled."""

    workload: str
    latest_run: str
    latest_date: str
    baseline_runs: int
    # what else changed between the earlier runs and the latest: "driver 570.86 -> 580.65"
    changes: tuple[str, ...] = ()


def regressions(samples: pd.DataFrame, runs: pd.DataFrame, threshold: float,
                baseline_runs: int = BASELINE_RUNS) -> tuple[list[Regression], int]:
    """Each configuration seen in two runs or more, judged; and how many were seen once.
    `runs` are per_run's rows judged (judging.judged_runs): implausible ones are left out."""
    import numpy as np

    found, alone = [], 0
    runs = runs if "match_id" in runs else with_match_ids(runs)
    runs = runs[~runs["implausible"]]
    speeds = {key: group.to_numpy(dtype=float) for key, group in
              samples.groupby(["config_id", "run_key"], sort=False)["items_per_s"]}
    for _, history in runs.groupby("match_id", sort=False):
        history = history.sort_values("date", kind="stable")
        if len(history) < 2:
            alone += 1
            continue
        latest = history.iloc[-1]
        earlier = history.iloc[-1 - baseline_runs:-1]
        new = speeds[(latest["config_id"], latest["run_key"])]
        base = np.concatenate([speeds[(config, key)] for config, key in
                               zip(earlier["config_id"], earlier["run_key"], strict=True)])
        codes = [", ".join(sorted({str(c) for c in side.dropna()}))
                 for side in (earlier["code"], history["code"].iloc[-1:])]
        ratio = float(np.median(new) / np.median(base))
        low, high = bootstrap_interval(base, new)
        found.append(Regression(
            config_id=str(latest["config_id"]), workload=str(latest["workload"]),
            label=str(latest["label"]), latest_run=str(latest["location"]),
            latest_date=str(latest["date"]), baseline_runs=len(earlier),
            base_repeats=base.size, new_repeats=new.size, base_median=float(np.median(base)),
            new_median=float(np.median(new)), ratio=ratio, low=low, high=high,
            verdict=verdict(ratio, low, high, threshold,
                            min(base.size, new.size) >= MIN_REPEATS),
            code_change=(codes[0], codes[1]) if codes[0] != codes[1] else None,
            changes=environment_changes(earlier, latest)))
    return found, alone


def environment_changes(earlier: pd.DataFrame, latest: pd.Series) -> tuple[str, ...]:
    """What the latest run measured on that the earlier ones did not (stack pins, driver,
    host, the framework's CPU threads), as their first repeats' provenance recorded it."""
    framework = str(latest.get("framework") or "framework")
    changes = []
    for field, name in (("framework_version", framework), ("cuda", "CUDA"),
                        ("cudnn", "cuDNN"), ("driver", "driver"), ("hostname", "host"),
                        ("cpu_threads", "CPU threads")):
        if field not in earlier:
            continue
        before = sorted({fmt(v) for v in earlier[field].dropna()})
        after = fmt(latest[field]) if latest.get(field) is not None else None
        if after is not None and before and before != [after]:
            changes.append(f"{name} {', '.join(before)} -> {after}")
    return tuple(changes)


def as_sequence(values: Sequence[str] | None) -> tuple[str, ...]:
    """Repeated options, each also comma-separated (`--hardware a,b --hardware c`)."""
    return tuple(v.strip() for value in values or () for v in value.split(",") if v.strip())
