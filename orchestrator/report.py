"""The merged DataFrame as a markdown report in the style of the seeds' tables.

Per workload, one row per configuration (`config_id`): the medians over its samples (every
timed epoch of every repeat) with their spread; a configuration whose throughput spread
exceeds the threshold is marked noisy. Cells that did not end `ok` are listed with their
status and reason, skipped cells with theirs, and the environment the rows ran in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from orchestrator.records import Flag
from orchestrator.registry import load_workload
from orchestrator.results import ResultStore, atomic_write

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.plan import Skipped

NOISY_SPREAD = 0.10  # (max - min) / median of a configuration's throughput samples
MIB = 1024 * 1024


def write_report(store: ResultStore, df: pd.DataFrame, skipped: Sequence[Skipped] = ()) -> str:
    text = render(df, store.root.name, skipped)
    atomic_write(store.report, text.encode())
    return text


def render(df: pd.DataFrame, title: str, skipped: Sequence[Skipped] = ()) -> str:
    lines = [f"# {title}", "",
             f"Generated {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} from "
             f"{df['cell_id'].nunique() if len(df) else 0} cells.", ""]
    ok = df[(df["status"] == "ok") & df["epoch"].notna()] if "epoch" in df else df.iloc[0:0]
    for workload in sorted(ok["workload"].unique()) if len(ok) else []:
        lines += _workload_section(ok[ok["workload"] == workload], workload)
    lines += _cost_section(df)
    lines += _problems_section(df)
    lines += _skipped_section(skipped)
    lines += _environment_section(df)
    return "\n".join(lines) + "\n"


def _cost_section(df: pd.DataFrame) -> list[str]:
    """What the priced cells cost, per hardware and in all, with each price's source."""
    if "cell_cost_usd" not in df.columns:
        return []
    cells = df.drop_duplicates("cell_id")
    cells = cells[cells["cell_cost_usd"].notna()]
    if not len(cells):
        return []
    lines = ["## Cost", "",
             "| hardware | instance type | $/hour | price | cells | cell hours | $ |",
             "|---|---|---:|---|---:|---:|---:|"]
    for hardware, group in cells.groupby("hardware", sort=True):
        first = group.iloc[0]
        lines.append(f"| {hardware} | {first.get('instance_type', '')} | "
                     f"{first['price_per_hour_usd']:g} | {first.get('price_source', '')} | "
                     f"{len(group)} | {group['wall_s'].sum() / 3600:.3f} | "
                     f"{group['cell_cost_usd'].sum():.2f} |")
    total = float(cells["cell_cost_usd"].sum())
    lines += ["", f"Total: ${total:.2f} for the cells' own time. Nodes also bill while they "
                  "boot and idle, and a launched cluster's head for the whole sweep.", ""]
    return lines


def config_summary(rows: pd.DataFrame, metrics: Sequence[str] = ()) -> pd.DataFrame:
    """One row per config_id: medians and spread over its samples, its flags, and the
    medians of the workload's own `metrics`."""
    import pandas as pd

    summaries = []
    for config_id, group in rows.groupby("config_id", sort=False):
        throughput = group["items_per_s"]
        median = float(throughput.median())
        spread = float((throughput.max() - throughput.min()) / median) if median else 0.0
        flags = set(filter(None, ",".join(group["flags"].fillna("")).split(",")))
        if spread > NOISY_SPREAD and len(group) > 1:
            flags.add(Flag.NOISY.value)
        summary = {
            "config_id": config_id,
            "hardware": group["hardware"].iloc[0],
            "stack": group["stack"].iloc[0],
            "repeats": group["cell_id"].nunique(),
            "samples": len(group),
            "train_s": float(group["train_s"].median()),
            "step_s": _median(group, "step_s_median"),
            "items_per_s": median,
            "spread": spread,
            "eval_items_per_s": _median(group, "eval_items_per_s"),
            "mem_bytes": _median(group, "mem_alloc_peak_bytes"),
            "rss_bytes": _median(group, "host_rss_peak_bytes"),
            "peak_fraction": _median(group, "peak_fraction"),
            "flags": ",".join(sorted(flags)),
        }
        for column in (c for c in group.columns if c.startswith("param.")):
            summary[column] = group[column].iloc[0]
        for metric in metrics:
            summary[f"metric.{metric}"] = _median(group, metric)
        summaries.append(summary)
    return pd.DataFrame(summaries)


def _median(group: pd.DataFrame, column: str) -> float | None:
    if column not in group or group[column].isna().all():
        return None
    return float(group[column].median())


def _workload_section(rows: pd.DataFrame, workload: str) -> list[str]:
    info = load_workload(workload)
    unit = info.item_unit
    rows = rows.dropna(axis=1, how="all")  # other workloads' parameters
    repeated = {f"train_{unit}s_per_s", f"eval_{unit}s_per_s"}  # the items_per_s columns
    metrics = [m for m in info.metrics if m in rows and m not in repeated]
    summary = config_summary(rows, metrics)
    varying = [c for c in summary.columns if c.startswith("param.")
               and summary[c].astype(str).nunique() > 1]
    summary = summary.sort_values(["hardware", "stack", *varying], kind="stable")
    headers = ["hardware", "stack", *(c.removeprefix("param.") for c in varying),
               "n", "s/epoch", "ms/step", f"train {unit}s/s", "spread"]
    has_eval = bool(summary["eval_items_per_s"].notna().any())
    has_gpu_mem = bool(summary["mem_bytes"].notna().any())
    has_peak = bool(summary["peak_fraction"].notna().any())
    headers += [f"eval {unit}s/s"] * has_eval + metrics + ["GPU mem MiB"] * has_gpu_mem
    headers += ["host RSS MiB", *(["% of peak"] * has_peak), "flags"]
    table = []
    for _, row in summary.iterrows():
        cells = [row["hardware"], row["stack"], *(_fmt(row[c]) for c in varying),
                 f"{row['samples']} ({row['repeats']}x)", f"{row['train_s']:.3f}",
                 _fmt_seconds(row["step_s"]), f"{row['items_per_s']:,.0f}",
                 f"{row['spread']:.1%}"]
        cells += [_fmt_rate(row["eval_items_per_s"])] * has_eval
        cells += [_fmt_metric(row[f"metric.{m}"]) for m in metrics]
        cells += [_fmt_mib(row["mem_bytes"])] * has_gpu_mem
        cells += [_fmt_mib(row["rss_bytes"])]
        cells += [_fmt_pct(row["peak_fraction"])] * has_peak
        cells += [row["flags"] or ""]
        table.append(cells)
    fixed = {c.removeprefix("param."): rows[c].iloc[0] for c in rows.columns
             if c.startswith("param.") and c not in varying}
    settings = ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(fixed.items()))
    return [f"## {workload}", "", f"{info.description}", "",
            f"Medians over each configuration's timed epochs (n = samples, repeats); spread = "
            f"(max - min) / median of train {unit}s/s, noisy above {NOISY_SPREAD:.0%}. "
            f"Warm-up steps excluded.", "", f"Fixed settings: {settings}.", "",
            *_table(headers, table), ""]


def _problems_section(df: pd.DataFrame) -> list[str]:
    if not len(df):
        return []
    cells = df.drop_duplicates("cell_id")
    bad = cells[cells["status"] != "ok"]
    if not len(bad):
        return []
    rows = []
    for _, row in bad.sort_values(["workload", "hardware", "stack"]).iterrows():
        params = " ".join(f"{c.removeprefix('param.')}={_fmt(row[c])}" for c in bad.columns
                          if c.startswith("param.") and _present(row[c]))
        reason = str(row.get("error") or "").replace("|", "\\|").replace("\n", " ")[:160]
        rows.append([row["workload"], f"{row['hardware']}/{row['stack']}", params,
                     f"#{row['repeat']}", row["status"], reason, f"logs/{row['cell_id']}.log"])
    return [f"## Cells that did not finish ok ({len(bad)})", "",
            *_table(["workload", "where", "parameters", "repeat", "status", "reason", "log"],
                    rows), ""]


def _skipped_section(skipped: Iterable[Skipped]) -> list[str]:
    counts: dict[str, int] = {}
    for item in skipped:
        counts[item.reason] = counts.get(item.reason, 0) + 1
    if not counts:
        return []
    rows = [[reason, str(n)] for reason, n in sorted(counts.items())]
    return ["## Skipped in the last sweep", "", *_table(["reason", "cells"], rows), ""]


def _environment_section(df: pd.DataFrame) -> list[str]:
    columns = ["hardware", "hostname", "cpu_model", "cpu_count", "gpu_model", "gpu_count",
               "driver", "python", "framework", "framework_version", "cuda", "cudnn",
               "tool_version", "git_revision"]
    present = [c for c in columns if c in df]
    if "hardware" not in present:
        return []
    env = df[present].drop_duplicates().fillna("")
    rows = [[_fmt(v) for v in row] for row in env.itertuples(index=False)]
    return ["## Environment", "", *_table(present, rows), ""]


def _table(headers: list[str], rows: list[list[object]]) -> list[str]:
    def line(values: Iterable[object]) -> str:
        return "| " + " | ".join(str(v) for v in values) + " |"

    return [line(headers), line("---" for _ in headers), *(line(r) for r in rows)]


def _present(value: object) -> bool:
    return value is not None and value == value  # NaN is not equal to itself


def _fmt(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _fmt_metric(value: float | None) -> str:
    if value is None or value != value:
        return ""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _fmt_rate(value: float | None) -> str:
    return "" if value is None or value != value else f"{value:,.0f}"


def _fmt_mib(value: float | None) -> str:
    return "" if value is None or value != value else f"{value / MIB:,.0f}"


def _fmt_pct(value: float | None) -> str:
    return "" if value is None or value != value else f"{value:.1%}"


def _fmt_seconds(value: float | None) -> str:
    return "" if value is None or value != value else f"{value * 1000:.1f}"
