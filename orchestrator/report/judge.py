"""Every row judged against what is physically possible, each time the rows are derived.

A row is judged from what it measured and where it ran (its provenance), never from a
verdict stored with it: the executor's check ran with the peak table of its day, and a
journal written by hand or by another tool may carry none. Four bounds:

- **FLOP/s**: the workload's FLOP model (`workloads/<name>/flops.py`) times the row's
  items/s, against the peak for the row's precision: the datasheet peak of its GPU model
  times its GPUs, or for a CPU row the estimate made on its node (else a ceiling no CPU of
  that core count reaches). A GPU the peak table does not know gets "no peak", not a guess.
- **Scaling**: a speedup above the device count (parallel efficiency above 100% plus
  `SCALING_TOLERANCE`, for cache effects) cannot come from adding devices.
- **Memory** and **network** (bounds.py): a peak above what the device or machine holds,
  a bus bandwidth between a cell's nodes above their link.

A row beyond a bound is flagged `implausible` with the reason and the factor; the report
shows the reason under the row in every table, and never names it a best choice. A stored
`throttled` is judged again from the row's recorded throttle reasons, so a journal written
before the power cap stopped counting as a condition (records.CONDITION_THROTTLES) reads as
a new one would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.errors import MatrixError
from orchestrator.hardware.peaks import Peak, datasheet_peak, peak_gap
from orchestrator.report import bounds
from orchestrator.report.bounds import (
    Verdict,
    memory_suspects,
    memory_verdicts,
    network_suspects,
    network_verdicts,
)
from orchestrator.report.ceilings import (
    BELOW_DATASHEET,
    CEILING_TOLERANCE,
    ceiling_verdicts,
    with_ceilings,
)
from orchestrator.report.markdown import present
from orchestrator.results.columns import from_param_columns, param_column, param_columns
from orchestrator.results.records import JUDGED_FLAGS, Flag, condition_throttles
from orchestrator.worker.context import model_flops_per_item
from orchestrator.workload_scope import Workloads, reported

if TYPE_CHECKING:
    import pandas as pd


SCALING_TOLERANCE = 0.10  # efficiency up to 110% passes: caches can make a little superlinear
# No CPU core runs above these: 6 GHz x 64 fp32 FLOP per cycle (two 512-bit FMA units), and
# 6 GHz x 1024 bf16 FLOP per cycle (AMX). Used only where the row's node left no estimate.
CPU_CORE_CEILING_FLOPS = {"fp32": 6e9 * 64, "bf16": 6e9 * 1024}
JUDGED_COLUMNS = ("achieved_flops", "peak_flops", "peak_source", "peak_fraction",
                  "peak_note", "flops_note", "judgement")
# What a suspect row's verdicts read (_row_verdict).
VERDICT_COLUMNS = ("flags", "error", param_column("precision"), "achieved_flops", "peak_flops",
                   "peak_source", "peak_fraction", "peak_note", "flops_note",
                   "parallel_efficiency_fraction", "speedup_ratio", "gpu_model",
                   "mem_alloc_peak_bytes", "instance_type", "host_rss_peak_bytes", "node",
                   "node_ceiling_flops", "node_ceiling_probe", "ceiling_fraction",
                   "ceiling_of_peak", "net_busbw_gbs", "net_link_gbps", "nodes",
                   bounds.BUSBW_METRIC)
# A recorded FLOP count further than this from the workload's own model contradicts it.
FLOP_TOLERANCE = 0.01


def judged(df: pd.DataFrame, probes: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows with their FLOP figures derived again, their node's measured ceiling beside
    them (ceilings.py), and a `judgement` column (the reasons a row is implausible, above
    its node's ceiling or on a node below its datasheet; "" where none); `flags` carries
    `implausible` exactly where the judgement found one, or where a stored verdict could
    not be checked (no peak), and `above_ceiling` and `below_datasheet` where it found them.
    `probes`: the cells that measured the ceilings, where `df` may not hold them all.

    The FLOP model and the peak depend only on a row's configuration, so they are looked
    up once per configuration; only the rows a bound catches are walked one by one."""
    import pandas as pd

    if not len(df) or "items_per_s" not in df or "status" not in df:
        return df
    df = df.copy()
    for column in JUDGED_COLUMNS:
        if column not in df:
            df[column] = None
        df[column] = df[column].astype(object)
    ok = (df["status"] == "ok") & df["items_per_s"].notna()
    if not ok.any():
        return df
    _flop_figures(df, ok)
    _throttled_again(df)
    df = with_ceilings(df, devices_column(df), probes)
    contradicted = df["flops_note"].fillna("").astype(str).str.startswith("implausible:")
    below = (pd.to_numeric(df["ceiling_of_peak"], errors="coerce") < BELOW_DATASHEET) & (
        df["peak_source"] == "datasheet")
    suspects = ok & (_over(df, "peak_fraction", 1.0) | contradicted | below
                     | _over(df, "ceiling_fraction", 1 + CEILING_TOLERANCE)
                     | _over(df, "parallel_efficiency_fraction", 1 + SCALING_TOLERANCE)
                     | memory_suspects(df) | network_suspects(df)
                     | df["flags"].fillna("").astype(str).str.contains(Flag.IMPLAUSIBLE.value))
    df.loc[ok, "judgement"] = ""
    # the suspects as plain dicts, and their verdicts set at once: a row at a time through
    # df.loc and df.at cost a store of many implausible rows seconds
    read = [c for c in VERDICT_COLUMNS if c in df]
    found = df.loc[suspects, read].to_dict("records")
    # an instance type's memory asked of the providers once, not once per row (they are
    # loaded again on each ask: 0.17 s over 2,000 suspect rows)
    hosts = {name: bounds.host_memory_gib(name)
             for name in {row.get("instance_type") for row in found} if isinstance(name, str)}
    walked = [_row_verdict(row, hosts) for row in found]
    if walked:
        df.loc[suspects, "flags"] = [flags for flags, _ in walked]
        df.loc[suspects, "judgement"] = [judgement for _, judgement in walked]
    return df


def _throttled_again(df: pd.DataFrame) -> None:
    """Drop a stored `throttled` from the rows whose recorded throttle reasons hold none of
    the machine's conditions (the power cap alone), in place; rows without recorded reasons
    (a journal written by hand) keep what they say."""
    if "throttle_reasons" not in df or "flags" not in df:
        return
    flags = df["flags"].fillna("").astype(str)
    stored = flags.str.contains(rf"(?:^|,){Flag.THROTTLED.value}(?:,|$)")
    reasons = df["throttle_reasons"]
    drop = stored & reasons.notna() & ~reasons.map(
        lambda text: bool(condition_throttles(text if isinstance(text, str) else None)))
    if drop.any():
        df.loc[drop, "flags"] = flags[drop].map(
            lambda text: ",".join(f for f in text.split(",") if f != Flag.THROTTLED.value))


def _row_verdict(row: dict[str, Any], hosts: dict[str, float | None]) -> tuple[str, str]:
    """A suspect row's flags and judgement (the reasons; "" where no bound caught it);
    `hosts`: each instance type's memory in GiB (host_memory_gib)."""
    memory = memory_verdicts(row, hosts.get(str(row.get("instance_type"))))
    verdicts = _flop_verdicts(row) + scaling_verdicts(row) + memory + network_verdicts(row)
    ceiling = ceiling_verdicts({**row, "_precision": precision_of(row)})
    flags = [f for f in str(row.get("flags") or "").split(",") if f]
    stored_unchecked = Flag.IMPLAUSIBLE.value in flags and not present(row.get("peak_flops"))
    flags = [f for f in flags if f not in JUDGED_FLAGS]
    if verdicts or stored_unchecked:
        flags.append(Flag.IMPLAUSIBLE.value)
    flags += [flag for flag, _ in ceiling]
    reasons = [v.reason for v in verdicts] or (
        [str(row.get("error") or "implausible (as recorded)")] if stored_unchecked else [])
    return ",".join(flags), "; ".join(reasons + [reason for _, reason in ceiling])


def _flop_figures(df: pd.DataFrame, ok: pd.Series) -> None:
    """achieved_flops, peak_flops, peak_source, peak_fraction and peak_note of the ok rows,
    in place: FLOPs per item and the peak found once per configuration."""
    keys = [c for c in ("workload", "flops_per_item", "gpu_model", "gpu_count", "devices_used",
                        "cpu_count", "nodes", "peak_flops", "peak_source") if c in df]
    keys += param_columns(df.columns)
    keys += [c for c in ("workload_version",) if c in df]
    import numpy as np

    stored = df[ok]  # as recorded: a node's own CPU estimate is kept (peak_of)
    # each column filled by position and set once: six df.loc per configuration cost a
    # store judged per run (a group per configuration and node) a second at 5,000 groups
    found = {column: np.full(len(stored), None, dtype=object) for column in (
        "achieved_flops", "peak_flops", "peak_source", "peak_fraction", "peak_note",
        "flops_note")}
    rates = stored["items_per_s"].astype(float).to_numpy()
    for at in stored.groupby(keys, dropna=False, sort=False).indices.values():
        first = stored.iloc[at[0]]
        per_item, note = flop_count(first)
        if per_item is None:
            continue
        found["flops_note"][at] = note or None
        achieved = per_item * rates[at]
        found["achieved_flops"][at] = achieved
        peak, where = peak_of(first, precision_of(first))
        found["peak_note"][at] = where
        if peak is None:
            continue
        found["peak_flops"][at] = peak.flops
        found["peak_source"][at] = peak.source
        found["peak_fraction"][at] = achieved / peak.flops
    for column, values in found.items():
        df.loc[ok, column] = values


def _flop_verdicts(row: Any) -> list[Verdict]:
    """The verdicts on a row whose recorded FLOP count contradicts its workload's model, and
    on one whose FLOP/s (_flop_figures) exceed its peak, with the factor."""
    verdicts = []
    note = row.get("flops_note")
    if isinstance(note, str) and note.startswith("implausible:"):
        verdicts.append(Verdict(note, 1.0))
    fraction = row.get("peak_fraction")
    if not present(fraction) or fraction <= 1:
        return verdicts
    return [*verdicts, Verdict(
        f"implausible: {fraction:.1f}x the {precision_of(row)} peak of {row['peak_note']} "
        f"({row['peak_flops'] / 1e12:,.1f} TFLOP/s, {row['peak_source']}): "
        f"{row['achieved_flops'] / 1e12:,.1f} TFLOP/s achieved", float(fraction))]


def _over(df: pd.DataFrame, column: str, bound: float) -> pd.Series:
    import pandas as pd

    if column not in df:
        return pd.Series(False, index=df.index)
    return pd.to_numeric(df[column], errors="coerce").fillna(0) > bound


def precision_of(row: Any) -> str:
    """The row's precision from the glossary: its `precision` parameter, else fp32."""
    precision = row.get(param_column("precision"))
    return str(precision) if present(precision) else "fp32"


def flop_count(row: Any) -> tuple[float | None, str]:
    """The training FLOPs per item a row is judged with, and a note on them ("" where the
    record and the model agree). The workload's FLOP model wins over a recorded count: a
    count written by hand or by another tool cannot hide an impossible FLOP rate. A recorded
    count more than FLOP_TOLERANCE from the model is a verdict ("implausible: ...") when the
    row names the workload version the model is of; a row of another version, or of none
    (recorded before rows named it), was counted by a model since revised, and is noted.
    Without a model, the recorded count is the workload's own claim, and says so."""
    recorded = float(row["flops_per_item"]) if present(row.get("flops_per_item")) else None
    model = model_count(row)
    if model is None:
        return recorded, "" if recorded is None else "the workload's own FLOP count (no model)"
    if recorded is None or abs(recorded - model) <= FLOP_TOLERANCE * model:
        return model, ""
    said = f"recorded {recorded:.3g} FLOP per item, the model says {model:.3g}"
    version = str(row["workload_version"]) if present(row.get("workload_version")) else None
    current = declared_version(row)
    if version is not None and version.split("+")[0] == current:
        return model, f"implausible: {said}"
    return model, (f"FLOP model revised: {said} (recorded under workload version "
                   f"{version or 'unnamed'}; the model is version {current})")


def model_count(row: Any) -> float | None:
    """FLOPs per item from the row's workload's FLOP model and its parameters; None for a
    workload without one, or a row that lacks a parameter the model reads."""
    workload = str(row.get("workload"))
    try:
        package = row_workloads(row).importable(workload)
        return None if package is None else model_flops_per_item(package, _workload_params(row))
    except (KeyError, TypeError, ValueError):
        return None


def declared_version(row: Any) -> str | None:
    """The version the row's workload declares now (its FLOP model's), or None."""
    try:
        return row_workloads(row).load(str(row.get("workload"))).version
    except MatrixError:
        return None


def row_workloads(row: Any) -> Workloads:
    """The workloads as the row reads them: its own folder for its workload, where it came
    from a `path:` folder (workload_scope.Workloads.as_recorded)."""
    return reported().as_recorded(str(row.get("workload")), row.get("workload_dir"))


def peak_of(row: Any, precision: str) -> tuple[Peak | None, str]:
    """The peak the row is judged against and what it is the peak of (or why none)."""
    gpus = int(row.get("gpu_count") or 0) if present(row.get("gpu_count")) else 0
    model = row.get("gpu_model") if present(row.get("gpu_model")) else None
    if model:
        devices = devices_of(row)
        peak = datasheet_peak(str(model), precision, devices)
        where = f"{devices} x {model}" if devices > 1 else str(model)
        if devices < gpus:
            where += f" ({devices} of the node's {gpus} GPUs used)"
        return (peak, where) if peak is not None else (
            None, peak_gap(str(model), precision, devices) or f"no {precision} peak")
    if present(row.get("peak_flops")) and row.get("peak_source") == "estimate":
        return Peak(float(row["peak_flops"]), "estimate"), "this CPU"
    ceiling = CPU_CORE_CEILING_FLOPS.get(precision)
    cores = row.get("cpu_count")
    if ceiling is None or not present(cores):
        return None, f"no {precision} peak known for this CPU"
    nodes = int(row["nodes"]) if present(row.get("nodes")) else 1  # a cell across nodes
    where = f"any CPU of {int(cores)} cores" + (f", on each of {nodes} nodes" if nodes > 1
                                                  else "")
    return Peak(ceiling * int(cores) * nodes, "estimate"), where


def devices_column(rows: pd.DataFrame) -> pd.Series:
    """The devices each row trained on: as its worker recorded them (`devices_used`), else
    its workload's own count where it declares one (`sets_devices`: nmt_dp's and gpt_lm's
    `workers`, keras_lstm's `devices`; CPU workers count too; 0 means one per GPU, or 1 on a
    CPU), else the GPUs its worker saw (0 on a CPU). The report's and history's scaling
    both read it (matrix history: database/judging.py)."""
    import pandas as pd

    def numbers(column: str) -> pd.Series:
        if column not in rows:
            return pd.Series(float("nan"), index=rows.index)
        return pd.to_numeric(rows[column], errors="coerce")

    gpus = numbers("gpu_count").fillna(0)
    devices = gpus.copy()
    try:
        declaring = reported().device_param_columns(rows["workload"].dropna().unique())
    except MatrixError:  # a workload this installation does not know: its GPUs, then
        declaring = ()
    for column in declaring:
        declared = numbers(column)
        devices = devices.where(declared.isna(), declared.where(declared > 0,
                                                                 gpus.clip(lower=1)))
    used = numbers("devices_used")
    return used.where(used > 0, devices)


def devices_of(row: Any) -> int:
    """The devices a row trained on (devices_column, the report's and history's rule), at
    least 1: a GPU row's peak is that many GPUs'."""
    import pandas as pd

    return max(int(devices_column(pd.DataFrame([dict(row)])).iloc[0]), 1)


def scaling_verdicts(row: Any) -> list[Verdict]:
    """A speedup above the device count, beyond the tolerance."""
    efficiency = row.get("parallel_efficiency_fraction")
    speedup = row.get("speedup_ratio")
    if not present(efficiency) or not present(speedup) or \
            efficiency <= 1 + SCALING_TOLERANCE:
        return []
    devices = round(float(speedup) / float(efficiency))
    return [Verdict(f"implausible: speedup {speedup:.2f}x on {devices} devices (efficiency "
                    f"{efficiency:.0%}, above 100% + {SCALING_TOLERANCE:.0%})",
                    float(efficiency))]


def _workload_params(row: Any) -> dict[str, Any]:
    return {name: (v.item() if hasattr(v, "item") else v)
            for name, v in from_param_columns(row).items() if present(v)}
