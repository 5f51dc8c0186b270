"""What the report derives from the rows: per-configuration medians and spread, scaling
against one device, and the best choice per workload.

It summarises what the rows carry, after judge.py has judged each row: a configuration's
figure is the median of its rows' figures, its flags the union of theirs. Speedup compares
throughput with the configuration that differs only in its device count and has one device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from orchestrator.report.judge import devices_column
from orchestrator.report.markdown import fmt, present
from orchestrator.results.columns import NODES_COLUMN, param_name, setting_columns
from orchestrator.results.records import Flag
from orchestrator.workload_scope import reported

if TYPE_CHECKING:
    import pandas as pd

NOISY_SPREAD = 0.10  # (max - min) / median of a configuration's throughput samples
SCALING_COLUMNS = ("speedup_ratio", "parallel_efficiency_fraction")


def config_summary(rows: pd.DataFrame, metrics: Sequence[str] = ()) -> pd.DataFrame:
    """One row per config_id: medians and spread over its samples, its flags, and the
    medians of the workload's own `metrics`."""
    import pandas as pd

    repeat_cv = _repeat_cv(rows)
    first_warmup = _first_epoch_warmup_s(rows)
    summaries = []
    for config_id, group in rows.groupby("config_id", sort=False):
        throughput = group["items_per_s"]
        # the configuration's figure: the median of its repeats' medians, the statistic of
        # matrix history and matrix compare (a repeat's epochs share one process)
        median = float(repeat_medians(group).median())
        spread = float((throughput.max() - throughput.min()) / median) if median else 0.0
        flags = set(filter(None, ",".join(group["flags"].fillna("")).split(",")))
        cv, target = repeat_cv.get(config_id), _median(group, "target_cv")
        if is_noisy(spread, len(group), cv, target):
            flags.add(Flag.NOISY.value)
        summary = {
            "config_id": config_id,
            "workload": _first(group, "workload"),
            "hardware": group["hardware"].iloc[0],
            "stack": group["stack"].iloc[0],
            "repeats": group["cell_id"].nunique(),
            "samples": len(group),
            "repeat_cv": cv,
            "target_cv": target,
            "train_s": float(group["train_s"].median()),
            "epoch_s": _median(group, "epoch_s"),
            "epoch_s_lower_bound": bool(group.get("epoch_s_lower_bound",
                                                  pd.Series(dtype=bool)).fillna(False).any()),
            # the range of the samples' whole epochs, which the epoch-time figure draws
            "epoch_s_min": _extreme(group, "epoch_s", min),
            "epoch_s_max": _extreme(group, "epoch_s", max),
            "warmup_s": first_warmup.get(config_id),
            "step_s": _step_s(group, median),
            "items_per_s": median,
            "spread": spread,
            "eval_items_per_s": _median(group, "eval_items_per_s"),
            "mem_bytes": _median(group, "mem_alloc_peak_bytes"),
            "rss_bytes": _median(group, "host_rss_peak_bytes"),
            "joules_per_item": joules_per_item(group),
            "peak_fraction": _median(group, "peak_fraction"),
            "ceiling_fraction": _median(group, "ceiling_fraction"),
            "speedup_ratio": _median(group, "speedup_ratio"),  # as the rows carry them
            "parallel_efficiency_fraction": _median(group, "parallel_efficiency_fraction"),
            "achieved_flops": _median(group, "achieved_flops"),
            "devices": _devices(group),
            # a cell across nodes: its count, and the network between them (report/nodes.py)
            "nodes": _nodes(group),
            "net_busbw_gbs": _median(group, "net_busbw_gbs"),
            "gpu_model": _first(group, "gpu_model"),
            "instance_type": _first(group, "instance_type"),
            "workload_version": _first(group, "workload_version"),
            "price_per_hour_usd": _median(group, "price_per_hour_usd"),
            "epoch_cost_usd": _median(group, "epoch_cost_usd"),
            "usd_per_million_items": _median(group, "usd_per_million_items"),
            "flags": ",".join(sorted(flags)),
            "judgement": _worst_judgement(group),
            "cell_reasons": cell_reasons(group),
            "peak_note": _first(group, "peak_note"),
            "flops_note": _first(group, "flops_note"),
        }
        for column in setting_columns(group.columns):
            summary[column] = group[column].iloc[0]
        for metric in metrics:
            summary[f"metric.{metric}"] = _median(group, metric)
        summaries.append(summary)
    return pd.DataFrame(summaries)


def is_noisy(spread: float, samples: int, cv: float | None, target: float | None) -> bool:
    """A configuration's figure moves from run to run: its samples spread over NOISY_SPREAD,
    or its repeats' CV is over the target the matrix set (adaptive repeats)."""
    # imported here: the planner's modules (pydantic models of a matrix) cost every store
    # answer a third of a second to import, for this one rule
    from orchestrator.plan.repeats import settled

    return (spread > NOISY_SPREAD and samples > 1) or not settled(cv, target)


def noise_caveats(rows: pd.DataFrame) -> dict[str, str]:
    """config_id -> "noisy: spread 8%; CV over repeats 4.0%, target 2.0%" for each noisy
    configuration of `rows` (is_noisy), all at once: what a best choice never hides."""
    import pandas as pd

    by_config = rows.groupby("config_id", sort=False)["items_per_s"]
    medians = repeat_medians(rows).groupby(level="config_id", sort=False).median()
    spread = ((by_config.max() - by_config.min()) / medians).fillna(0.0)
    samples = by_config.count()
    cvs = _repeat_cv(rows)
    targets = (pd.to_numeric(rows["target_cv"], errors="coerce").groupby(
        rows["config_id"], sort=False).median() if "target_cv" in rows
        else pd.Series(dtype=float))
    said = {}
    for config in spread.index:
        cv = cvs.get(str(config))
        target = targets.get(config)
        target = None if target is None or target != target else float(target)
        if not is_noisy(float(spread[config]), int(samples[config]), cv, target):
            continue
        parts = [f"spread {spread[config]:.0%}"]
        if cv is not None:
            parts.append(f"CV over repeats {cv:.1%}"
                         + (f", target {target:.1%}" if target is not None else ""))
        said[str(config)] = "noisy: " + "; ".join(parts)
    return said


def joules_per_item(rows: pd.DataFrame) -> float | None:
    """The GPUs' energy per item over the timed windows (NVML's counters, `gpu_energy_j`,
    over the items counted in them), the median over rows; None where none was measured
    (a CPU): never a guess. `matrix advise` multiplies it by a job's items."""
    if "gpu_energy_j" not in rows or "items" not in rows:
        return None
    measured = rows[rows["gpu_energy_j"].notna() & (rows["items"].fillna(0) > 0)]
    if not len(measured):
        return None
    return float((measured["gpu_energy_j"] / measured["items"]).median())


def _median(group: pd.DataFrame, column: str) -> float | None:
    import pandas as pd

    if column not in group or group[column].isna().all():
        return None
    return float(pd.to_numeric(group[column], errors="coerce").median())


def _extreme(group: pd.DataFrame, column: str, pick: Any) -> float | None:
    if column not in group or group[column].isna().all():
        return None
    return float(pick(group[column].dropna()))


def repeat_medians(rows: pd.DataFrame) -> pd.Series:
    """Each repeat's throughput, the median items/s of its timed epochs, indexed by
    (config_id, cell_id): the unit of replication of compare and of adaptive repeats (a
    cell's epochs share its process, so they are not independent samples)."""
    return rows.groupby(["config_id", "cell_id"], sort=False)["items_per_s"].median()


def _repeat_cv(rows: pd.DataFrame) -> dict[str, float]:
    """config_id -> the coefficient of variation of its per-repeat throughput, for
    configurations of two repeats or more."""
    by_config = repeat_medians(rows).groupby(level="config_id", sort=False)
    cv = (by_config.std(ddof=1) / by_config.mean())[by_config.size() >= 2]
    return {str(k): float(v) for k, v in cv.items()}


def _first_epoch_warmup_s(rows: pd.DataFrame) -> dict[str, float]:
    """config_id -> the median over its repeats of the first epoch's warm-up time: the
    steps that compile, allocate and tune before any step is timed."""
    if "warmup_s" not in rows or rows["warmup_s"].isna().all():
        return {}
    first = rows.sort_values("epoch", kind="stable").drop_duplicates("cell_id")
    medians = first.groupby("config_id", sort=False)["warmup_s"].median().dropna()
    return {str(k): float(v) for k, v in medians.items()}


def _step_s(group: pd.DataFrame, items_per_s: float) -> float | None:
    """Seconds per timed step as the configuration's items/s inverted: its items per step
    (total items / total timed steps) over that rate, so ms/step x items/s is the items of
    a step exactly (a median of step times beside a median of rates disagreed: 647.6 ms a
    step beside 867 tokens/s for 512 tokens a step). The median step (`step_s_median`) is
    a statistic of the steps' spread, not of the rate."""
    if "steps" not in group or group["steps"].isna().all() or not items_per_s:
        return None
    counted = group.dropna(subset=["steps", "items"])
    steps = float(counted["steps"].sum())
    return float(counted["items"].sum()) / steps / items_per_s if steps else None


def _worst_judgement(group: pd.DataFrame) -> str:
    """Why the configuration is implausible: the reason given for its fastest flagged row
    (the largest factor), or "" where no row is flagged."""
    if "judgement" not in group:
        return ""
    flagged = group[group["judgement"].fillna("").astype(str) != ""]
    if flagged.empty:
        return ""
    return str(flagged.loc[flagged["items_per_s"].idxmax(), "judgement"])


def cell_reasons(group: pd.DataFrame) -> str:
    """Why the executor flagged the configuration's ok cells (`contended`, `oversubscribed`,
    `left_processes`, `fewer_epochs`, `throttled`, a field left out), each kind of reason
    once, from the first cell that gave it: the why beside the flags in a table, as the
    judge's is. Not `implausible`: the judge gives that anew from the figures."""
    if "error" not in group:
        return ""
    cells = group.drop_duplicates("cell_id")
    if "status" in cells:
        cells = cells[cells["status"] == "ok"]
    found: dict[str, str] = {}
    for error in cells["error"].dropna().astype(str):
        for reason in filter(None, error.split("; ")):
            kind = reason.split(":", 1)[0]
            if kind != Flag.IMPLAUSIBLE.value:
                found.setdefault(kind, reason)
    return "; ".join(found.values())


def _devices(group: pd.DataFrame) -> int:
    """The devices a configuration trains on (`devices_column`, its median)."""
    return int(devices_column(group).median())


def _nodes(group: pd.DataFrame) -> int:
    """The nodes a configuration's cells spanned: `hw.nodes` where above 1, else one."""
    recorded = _median(group, NODES_COLUMN)
    return int(recorded) if recorded else 1


def _first(group: pd.DataFrame, column: str) -> str | None:
    if column not in group:
        return None
    values = group[column].dropna()
    return str(values.iloc[0]) if len(values) else None


def twin_keys(summary: pd.DataFrame) -> list[str]:
    """What configurations that differ only in their device count share: the workload and
    its code version, the stack, the machine (`with_machine`), the GPU model and every
    setting but the device count. Two machines are never twins: the faster one's speedup
    over the slower is no scaling (it read as "implausible, 278% efficiency")."""
    devices = reported().device_param_columns(summary["workload"].dropna().unique())
    return ["workload", *(["workload_version"] if "workload_version" in summary else []),
            "stack", "gpu_model", MACHINE,
            *(c for c in setting_columns(summary.columns) if c not in devices)]


MACHINE = "machine"


def with_machine(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with `machine`: the hardware its rows ran on, as twins must share it. An
    instance type names the machine bought (p4d.24xlarge with 1 GPU or with 8 is one
    machine, used more or less); without one, the hardware entry is the machine."""
    import pandas as pd

    missing = pd.Series("?", index=frame.index, dtype=object)
    hardware = frame.get("hardware", missing).astype(object)
    kind = frame.get("instance_type", pd.Series(None, index=frame.index, dtype=object)
                     ).astype(object)
    machine = kind.where(kind.notna(), hardware)
    return frame.assign(**{MACHINE: machine})


def with_scaling(summary: pd.DataFrame, within: Sequence[str] = ()) -> pd.DataFrame:
    """`speedup_ratio` and `parallel_efficiency_fraction` for configurations whose one-device
    twin (same workload, stack, GPU model, instance type and settings but the device
    count) is in the summary; `within` names columns a twin must share too (`matrix
    history` scales each run's rows against that run's twin: `run_key`)."""
    summary = with_machine(summary)
    for column in SCALING_COLUMNS:
        summary[column] = float("nan")
    if "workload" not in summary or not len(summary):
        return summary
    keys = [*within, *twin_keys(summary)]
    # only the groups whose device counts differ can scale, walked on their narrow columns:
    # a whole-frame take per group cost matrix history 12 s over 5,000 groups
    narrow = summary[[*keys, "devices", "items_per_s"]]
    varied = narrow.groupby(keys, sort=False, dropna=False)["devices"].transform("nunique")
    for _, members in narrow[varied >= 2].groupby(keys, sort=False, dropna=False):
        single = members[members["devices"] == 1]
        if single.empty or members["devices"].nunique() < 2:
            continue
        base = float(single["items_per_s"].iloc[0])
        speedup = members["items_per_s"] / base
        summary.loc[members.index, "speedup_ratio"] = speedup
        summary.loc[members.index, "parallel_efficiency_fraction"] = \
            speedup / members["devices"].clip(lower=1)
    return summary


def with_whole_epoch(df: pd.DataFrame) -> pd.DataFrame:
    """`epoch_s` on every measured row: the epoch as the user waits for it. Records from
    before the meter measured it carry the sum of what they timed (warm-up, timed steps,
    evaluation): a lower bound, short of what the loop did between them."""
    if "train_s" not in df.columns:
        return df
    parts = df["train_s"] + sum(df[c].fillna(0.0) for c in ("warmup_s", "eval_s") if c in df)
    measured = df["epoch_s"].notna() if "epoch_s" in df else False
    # the sum of the parts is a lower bound: marked, so a table can say "at least"
    df["epoch_s_lower_bound"] = ~measured & df["train_s"].notna()
    df["epoch_s"] = df["epoch_s"].fillna(parts) if "epoch_s" in df else parts
    return df


def derived(df: pd.DataFrame, probes: pd.DataFrame | None = None) -> pd.DataFrame:
    """The joined rows with what is derived from all of them: scaling against one device,
    then every row judged against what is physically possible (judge.py), beside its
    node's measured ceiling from `probes` (frame.ceiling_probes)."""
    from orchestrator.report.judge import judged

    return judged(add_scaling_columns(df), probes)


def add_scaling_columns(df: pd.DataFrame) -> pd.DataFrame:
    """The rows with their configuration's speedup and parallel efficiency (NaN where no
    one-device twin ran)."""
    df = df.drop(columns=[c for c in SCALING_COLUMNS if c in df.columns])
    ok = (df[(df["status"] == "ok") & df["items_per_s"].notna()] if "items_per_s" in df
          else df.iloc[0:0])
    if not len(ok):
        for column in SCALING_COLUMNS:
            df[column] = float("nan")
        return df
    summary = with_scaling(config_summary(ok))
    mapping = summary.set_index("config_id")[list(SCALING_COLUMNS)]
    return df.join(mapping, on="config_id")


def config_labels(rows: pd.DataFrame) -> dict[str, str]:
    """config_id -> a short name for people: the workload when there are several, the
    hardware, the stack when there are several, and the settings that vary (where set)."""
    configs = rows.drop_duplicates("config_id")
    varying = [c for c in setting_columns(configs.columns)
               if configs[c].dropna().astype(str).nunique() > 1]
    several = {key: configs[key].nunique() > 1 for key in ("workload", "stack")
               if key in configs}
    labels = {}
    for _, row in configs.iterrows():
        parts = [str(row["workload"])] if several.get("workload") else []
        parts.append(str(row["hardware"]) + (f"/{row['stack']}" if several["stack"] else ""))
        parts += [f"{param_name(c)}={fmt(row[c])}" for c in varying
                  if present(row[c])]
        labels[str(row["config_id"])] = " ".join(parts)
    return labels


COST_COLUMNS = ("cell_cost_usd", "epoch_cost_usd", "usd_per_million_items")


def add_cost_columns(df: pd.DataFrame) -> pd.DataFrame:
    """cell_cost_usd (the cell's wall time), epoch_cost_usd (the whole epoch, `epoch_s`:
    warm-up and evaluation included, as the user pays for it) and usd_per_million_items
    (at the steady-state training rate), where rows carry a price."""
    if "price_per_hour_usd" not in df.columns:
        return df
    per_s = df["price_per_hour_usd"] / 3600
    df["cell_cost_usd"] = df["wall_s"] * per_s
    if "train_s" in df.columns:
        df["epoch_cost_usd"] = df.get("epoch_s", df["train_s"]) * per_s
        df["usd_per_million_items"] = per_s / df["items_per_s"] * 1e6
    return df
