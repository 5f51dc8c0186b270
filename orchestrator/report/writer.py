"""The merged DataFrame as a markdown report in the style of the seeds' tables.

Per workload, one row per configuration (`config_id`): the medians over its samples (every
timed epoch of every repeat) with their spread; a configuration whose throughput spread
exceeds the threshold is marked noisy. Cells that did not end `ok` are listed with their
status and reason, skipped cells with theirs, and the environment the rows ran in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator import failpoints
from orchestrator.plan.repeats import settled
from orchestrator.report.analysis import NOISY_SPREAD, config_summary
from orchestrator.report.choices import best_choices
from orchestrator.report.environment import environment_section
from orchestrator.report.html import write_report_html
from orchestrator.report.job_section import FIGURE as JOB_FIGURE
from orchestrator.report.job_section import answer_job, job_section
from orchestrator.report.markdown import (
    Figure,
    code_block,
    flag_line,
    fmt,
    fmt_metric,
    fmt_mib,
    fmt_ms,
    fmt_pct,
    fmt_rate,
    fmt_ratio,
    fmt_seconds,
    fmt_tflops,
    fmt_usd,
    plain_text,
    present,
    table,
)
from orchestrator.report.nodes import node_scaling_section
from orchestrator.report.plots import job_figure, labels, save, workload_figures
from orchestrator.report.seed_tables import seed_views
from orchestrator.report.whole_runs import whole_run_sections
from orchestrator.results.columns import NODES_COLUMN, param_name, setting_columns
from orchestrator.results.run_directory import atomic_write
from orchestrator.worker.units import plural
from orchestrator.workload_scope import reported

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.plan.planner import Skipped
    from orchestrator.spec.job import JobSpec


def write_report(out_dir: Path, df: pd.DataFrame, skipped: Sequence[Skipped] = (),
                 title: str | None = None, now: datetime | None = None,
                 log_tails: Mapping[str, str] | None = None, job: JobSpec | None = None
                 ) -> Path:
    """report.md and its figures (plots/*.png) in `out_dir`, and report.html beside it
    (the same, self-contained, for a browser); returns report.md's path. `log_tails`: the
    last lines of each failed cell's log, by cell_id (the journal's); `job`: the matrix's
    training job, answered in its own section (job_section.py)."""
    figures: dict[str, list[tuple[str, str]]] = {}
    for workload, summary, unit in workload_summaries(df):
        for kind, figure in workload_figures(summary, workload, unit).items():
            relative = f"plots/{workload}-{kind}.png"
            save(figure, out_dir / relative)
            figures.setdefault(workload, []).append((figure.axes[0].get_title(), relative))
    job_lines: list[str] = []
    if job is not None:
        answer = answer_job(df, job)
        drawn = job_figure(answer) if not isinstance(answer, str) else None
        if drawn is not None:
            save(drawn, out_dir / JOB_FIGURE)
        job_lines = job_section(answer, job, JOB_FIGURE if drawn is not None else None)
    lines = report_lines(df, title or out_dir.name, skipped, figures, now, log_tails, job_lines)
    failpoints.reached("report")  # the fault tests kill a sweep here, figures written
    path = out_dir / "report.md"
    atomic_write(path, ("\n".join(lines) + "\n").encode())
    write_report_html(out_dir / "report.html", lines, title or out_dir.name)
    return path


def workload_summaries(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame, str]]:
    """(workload, its configuration summary with scaling, its item unit), per workload
    with cells that ended ok."""
    ok = df[(df["status"] == "ok") & df["epoch"].notna()] if "epoch" in df else df.iloc[0:0]
    if "timing" in ok:  # a script timed as a whole has no throughput: whole_runs.py
        ok = ok[ok["timing"] != "whole"]
    found: list[tuple[str, pd.DataFrame, str]] = []
    for workload in sorted(ok["workload"].unique()) if len(ok) else []:
        info = reported().load(workload)
        rows = ok[ok["workload"] == workload].dropna(axis=1, how="all")  # others' parameters
        repeated = {f"train_{info.item_unit}s_per_s", f"eval_{info.item_unit}s_per_s"}
        metrics = [m for m in info.metrics if m in rows and m not in repeated]
        found.append((workload, config_summary(rows, metrics), info.item_unit))
    return found


def render(df: pd.DataFrame, title: str, skipped: Sequence[Skipped] = (),
           figures: dict[str, list[tuple[str, str]]] | None = None,
           now: datetime | None = None, log_tails: Mapping[str, str] | None = None,
           job_lines: Sequence[str] = ()) -> str:
    """report.md's text (`report_lines`, joined)."""
    return "\n".join(report_lines(df, title, skipped, figures, now, log_tails, job_lines)) + "\n"


def report_lines(df: pd.DataFrame, title: str, skipped: Sequence[Skipped] = (),
                 figures: dict[str, list[tuple[str, str]]] | None = None,
                 now: datetime | None = None, log_tails: Mapping[str, str] | None = None,
                 job_lines: Sequence[str] = ()) -> list[str]:
    """The report's lines: its text, and each of its tables as one entry that carries its
    typed rows (markdown.TableLines), from which report.html builds it."""
    runs = df["run_dir"].nunique() if "run_dir" in df and len(df) else 1
    when = (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# {title}", "",
             f"Generated {when} from {df['cell_id'].nunique() if len(df) else 0} cells"
             + (f" of {runs} runs" if runs > 1 else "") + ".", ""]
    summaries = workload_summaries(df)
    lines += job_lines
    lines += _choices_section(df, summaries)
    for workload, summary, unit in summaries:
        lines += _workload_section(summary, workload, unit, (figures or {}).get(workload, []))
        lines += node_scaling_section(summary, unit)
    lines += whole_run_sections(df)
    lines += _implausible_section(df)
    lines += _cost_section(df)
    lines += _problems_section(df, log_tails or {})
    lines += _skipped_section(skipped)
    lines += environment_section(df)
    return lines


def _choices_section(df: pd.DataFrame, summaries: list[tuple[str, pd.DataFrame, str]]
                     ) -> list[str]:
    """Per workload: advise's answer per million items (choices.best_choices)."""
    rows = []
    timed = df[df["timing"] != "whole"] if "timing" in df else df
    for workload, _, unit in summaries:
        of_workload = timed[timed["workload"] == workload]
        rows += [[workload, choice.question, choice.configuration, choice.value]
                 for choice in best_choices(of_workload, workload, unit)]
    if not rows:
        return []
    return ["## Best choices", "", "`matrix advise`'s answer per million items: flagged "
            "repeats are set aside (a configuration stays with its clean ones), implausible "
            "ones always; a tie is within the noise of the pick's repeats; cost questions "
            "need prices (EC2 hardware, or price_per_hour).", "",
            *table(["workload", "question", "configuration", "figure"], rows), ""]


def _implausible_section(df: pd.DataFrame) -> list[str]:
    if "flags" not in df or "items_per_s" not in df or not len(df):
        return []
    rows_flagged = df[df["flags"].fillna("").str.contains("implausible")]
    if not len(rows_flagged):
        return []
    # One line per cell: the reason of its fastest flagged row (the largest factor).
    flagged = rows_flagged.sort_values("items_per_s", ascending=False, na_position="last") \
        .drop_duplicates("cell_id").sort_values(["workload", "hardware", "stack", "repeat"])
    rows = [[row["workload"], f"{row['hardware']}/{row['stack']}", f"#{row['repeat']}",
             str(row.get("judgement") or row.get("error") or "")]
            for _, row in flagged.iterrows()]
    return [f"## Implausible figures ({len(flagged)})", "",
            "Shown in the tables with the flag, never chosen as best: a figure beyond what "
            "the hardware can do (its peak, or physics) is a measurement error until "
            "explained.", "", *table(["workload", "where", "repeat", "why"], rows), ""]


def _cost_section(df: pd.DataFrame) -> list[str]:
    """What the priced cells cost, per hardware and in all, with each price's source."""
    if "cell_cost_usd" not in df.columns:
        return []
    cells = df.drop_duplicates("cell_id")
    cells = cells[cells["cell_cost_usd"].notna()]
    if not len(cells):
        return []
    rows = []
    keys = ["hardware", *[NODES_COLUMN] * (NODES_COLUMN in cells)]  # $/hour: all its nodes'
    for key, group in cells.groupby(keys, sort=True):
        hardware, nodes = (key[0], int(key[1])) if len(keys) == 2 else (key[0], 1)
        first = group.iloc[0]
        instance, source = first.get("instance_type"), first.get("price_source")
        hours = float(group["wall_s"].sum()) / 3600
        rows.append([hardware + (f" ({nodes} nodes)" if nodes > 1 else ""),
                     instance if present(instance) else "-",
                     Figure(f"{first['price_per_hour_usd']:g}", first["price_per_hour_usd"]),
                     source if present(source) else "-", len(group),
                     Figure(f"{hours:.3f}", hours),
                     _money_cell(float(group["cell_cost_usd"].sum()))])
    total = float(cells["cell_cost_usd"].sum())
    lines = ["## Cost", "", *table(["hardware", "instance type", "$/hour", "price", "cells",
                                    "cell hours", "$"], rows)]
    lines += ["", f"Total: ${total:.2f} for the cells' own time. Nodes also bill while they "
                  "boot and idle, and a launched cluster's head for the whole sweep.", ""]
    return lines


def _workload_section(summary: pd.DataFrame, workload: str, unit: str,
                      figures: list[tuple[str, str]]) -> list[str]:
    info = reported().load(workload)
    metrics = [c.removeprefix("metric.") for c in summary.columns if c.startswith("metric.")]
    varying = [c for c in setting_columns(summary.columns)
               if summary[c].astype(str).nunique() > 1]
    summary = summary.sort_values(["hardware", "stack", *varying], kind="stable")
    has_warmup = bool((summary["warmup_s"].fillna(0) > 0).any())
    has_target = bool(summary["target_cv"].notna().any())
    headers = ["hardware", "stack", *(param_name(c) for c in varying),
               "n", "s/epoch", "timed s", *["warm-up s"] * has_warmup, "ms/step",
               f"train {plural(unit)}/s", "spread", *["CV/repeat"] * has_target]
    has_eval = bool(summary["eval_items_per_s"].notna().any())
    has_gpu_mem = bool(summary["mem_bytes"].notna().any())
    has_energy = bool(summary["joules_per_item"].notna().any())
    has_peak = bool(summary["achieved_flops"].notna().any())
    has_ceiling = has_peak and bool(summary["ceiling_fraction"].notna().any())
    has_devices = bool((summary["devices"] > 0).any())
    has_scaling = bool(summary["speedup_ratio"].notna().any())
    has_cost = bool(summary["usd_per_million_items"].notna().any())
    headers[2:2] = ["devices"] * has_devices
    headers += [f"eval {plural(unit)}/s"] * has_eval + [metric_heading(m) for m in metrics]
    headers += ["GPU mem MiB"] * has_gpu_mem + [f"J/{unit}"] * has_energy
    headers += ["host RSS MiB", *(["TFLOP/s", "% of peak"] * has_peak),
                *["% of ceiling"] * has_ceiling]
    headers += ["speedup", "efficiency"] * has_scaling
    headers += ["$/epoch", f"$/M {plural(unit)}"] * has_cost + ["flags"]
    body = []
    for _, row in summary.iterrows():
        cells = [row["hardware"], row["stack"], *([fmt(row["devices"])] * has_devices),
                 *(fmt(row[c]) for c in varying),
                 Figure(f"{row['samples']} ({row['repeats']}x)", row["samples"]),
                 Figure(("≥ " if row.get("epoch_s_lower_bound") else "")
                        + fmt_seconds(row["epoch_s"]), row["epoch_s"]),
                 fmt_seconds(row["train_s"]), *[fmt_seconds(row["warmup_s"])] * has_warmup,
                 fmt_ms(row["step_s"]), fmt_rate(row["items_per_s"]),
                 fmt_pct(row["spread"]), *[fmt_pct(row["repeat_cv"])] * has_target]
        cells += [fmt_rate(row["eval_items_per_s"])] * has_eval
        cells += [fmt_mib(row[f"metric.{m}"]) if m.endswith("_bytes") else
                  fmt_metric(row[f"metric.{m}"]) for m in metrics]
        cells += [fmt_mib(row["mem_bytes"])] * has_gpu_mem
        cells += [fmt_metric(row["joules_per_item"])] * has_energy
        cells += [fmt_mib(row["rss_bytes"])]
        cells += [fmt_tflops(row["achieved_flops"]), _of_peak(row)] * has_peak
        cells += [_of_ceiling(row)] * has_ceiling
        cells += [fmt_ratio(row["speedup_ratio"]), fmt_pct(row["parallel_efficiency_fraction"])
                  ] * has_scaling
        cells += [fmt_usd(row["epoch_cost_usd"]), fmt_usd(row["usd_per_million_items"])
                  ] * has_cost
        cells += [row["flags"] or ""]
        body.append(cells)
        reasons = "; ".join(filter(None, [row.get("judgement"), row.get("cell_reasons")]))
        if reasons:  # the judge's, then the executor's: no flag stands without its why
            body.append(flag_line(reasons, len(headers)))
        note = row.get("flops_note") if has_peak and not row.get("judgement") else None
        if present(note) and note:
            body.append(flag_line(row["flops_note"], len(headers)))  # where its FLOPs came from
    fixed = {param_name(c): summary[c].iloc[0] for c in setting_columns(summary.columns)
             if c not in varying}
    settings = ", ".join(f"{k}={fmt(v)}" for k, v in sorted(fixed.items()))
    plots = [line for title, path in figures for line in (f"![{title}]({path})", "")]
    return [f"## {workload}", "", f"{info.description}", "",
            _caption(unit, has_warmup, has_target, has_cost)
            + (" ≥: recorded before the whole epoch was timed, the sum of its parts (a lower "
               "bound)." if bool(summary["epoch_s_lower_bound"].any()) else "")
            + (" % of peak reads TFLOP/s against the datasheet (a CPU: an estimated upper "
               "bound), % of ceiling against what the node's dense products reached "
               "(Environment: measured ceilings)." if has_ceiling else "")
            + (f" J/{unit}: the GPUs' energy (NVML's counters) per {unit} over the timed "
               "steps." if has_energy else ""), "",
            *([f"Fixed settings: {settings}.", ""] if settings else []),
            *([] if has_peak else _no_flop_count(workload)),
            *table(headers, body), "", *_unsettled(summary), *seed_views(workload, summary, unit),
            *plots]


NO_FLOP_MODEL = ("No FLOP model, so no TFLOP/s or % of peak: add `flops.py` to the "
                 "workload (docs/WORKLOADS.md).")
NO_FLOP_CLAIM = ("No FLOP count, so no TFLOP/s or % of peak: give the command's "
                 "`flops_per_item:` in its matrix entry (docs/WORKLOADS.md).")


def _no_flop_count(workload: str) -> list[str]:
    """Why a user's workload has no FLOP figures, and what adds them; nothing for a
    built-in (whose FLOP model is the project's)."""
    source = reported().source(workload)
    if source == "command":
        return [NO_FLOP_CLAIM, ""]
    return [NO_FLOP_MODEL, ""] if source.startswith(("path", "package")) else []


def metric_heading(metric: str) -> str:
    """A workload metric's column heading: bytes are shown in MiB, as every memory column
    is (rank_mem_peak_max_bytes sat in bytes beside host RSS in MiB)."""
    return f"{metric.removesuffix('_bytes')} MiB" if metric.endswith("_bytes") else metric


def _caption(unit: str, has_warmup: bool, has_target: bool, has_cost: bool) -> str:
    """What the workload table's columns mean, for the columns it has."""
    times = (f"s/epoch is the whole epoch as you wait for it (warm-up, training, "
             f"evaluation); timed s is its training steps after warm-up, from which ms/step "
             f"and {plural(unit)}/s come")
    if has_warmup:
        times += ", and warm-up s the first epoch's warm-up (compilation included)"
    noise = (f"Spread = (max - min) / median of train {plural(unit)}/s, noisy above "
             f"{NOISY_SPREAD:.0%}")
    if has_target:
        noise += "; CV/repeat: the coefficient of variation of the repeats' median throughput"
    if has_cost:
        noise += "; $/epoch prices the whole epoch"
    return f"Medians over each configuration's epochs (n = samples, repeats). {times}. {noise}."


def _unsettled(summary: pd.DataFrame) -> list[str]:
    """The configurations whose repeats never got under `repeats: {until_cv}`."""
    names = dict(zip(summary["config_id"], labels(summary), strict=True))
    lines = [f"- {names[row['config_id']]}: CV {fmt_pct(row['repeat_cv']) or 'unknown'} "
             f"over {row['repeats']} repeats, target {row['target_cv']:.1%}"
             for _, row in summary.iterrows()
             if present(row["target_cv"]) and not settled(row["repeat_cv"], row["target_cv"])]
    if not lines:
        return []
    return ["Never settled: these configurations' repeats stayed above the target CV "
            "(`repeats: {until_cv}`) when the sweep ended; their figures move from run to "
            "run by more than you asked for.", "", *lines, ""]


def _money_cell(usd: float) -> str:
    """Dollars to the cent, as the cost table shows them."""
    return Figure(f"{usd:.2f}", usd)


def _of_peak(row: pd.Series) -> str:
    """The fraction of peak, or "no peak" where the FLOP/s are known and the peak is not."""
    if present(row["peak_fraction"]):
        return fmt_pct(row["peak_fraction"])
    return "no peak" if present(row["achieved_flops"]) else ""


def _of_ceiling(row: pd.Series) -> str:
    """The fraction of the node's measured ceiling, or "no ceiling" where none was measured."""
    if present(row["ceiling_fraction"]):
        return fmt_pct(row["ceiling_fraction"])
    return "no ceiling" if present(row["achieved_flops"]) else ""


TAIL_LINES = 12  # of a failed cell's log, in the report; the whole log is logs/<cell_id>.log


def _problems_section(df: pd.DataFrame, log_tails: Mapping[str, str]) -> list[str]:
    if not len(df):
        return []
    cells = df.drop_duplicates("cell_id")
    bad = cells[cells["status"] != "ok"]
    if not len(bad):
        return []
    rows, tails = [], []
    for _, row in bad.sort_values(["workload", "hardware", "stack"]).iterrows():
        params = " ".join(f"{param_name(c)}={fmt(row[c])}" for c in setting_columns(bad.columns)
                          if present(row[c]))
        reason = str(row.get("error") or "")[:160]
        where = f"{row['hardware']}/{row['stack']}"
        rows.append([row["workload"], where, params, f"#{row['repeat']}", row["status"],
                     reason, f"logs/{row['cell_id']}.log"])
        if tail := log_tails.get(str(row["cell_id"]), "").strip("\n"):
            named = " ".join(x for x in (row["workload"], where, params) if x)
            tails += [plain_text(f"{named} #{row['repeat']} ({row['status']}):"), "",
                      *code_block("\n".join(tail.splitlines()[-TAIL_LINES:])), ""]
    return [f"## Cells that did not finish ok ({len(bad)})", "",
            *table(["workload", "where", "parameters", "repeat", "status", "reason", "log"],
                    rows), "",
            *([f"### The last lines of their logs (at most {TAIL_LINES})", "", *tails]
              if tails else [])]


def _skipped_section(skipped: Iterable[Skipped]) -> list[str]:
    counts: dict[str, int] = {}
    for item in skipped:
        counts[item.reason] = counts.get(item.reason, 0) + 1
    if not counts:
        return []
    rows = [[reason, n] for reason, n in sorted(counts.items())]
    return ["## Skipped in the last sweep", "", *table(["reason", "cells"], rows), ""]
