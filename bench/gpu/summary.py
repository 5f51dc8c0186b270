"""The GPU check judges itself: per claim, held or not, with the figures (bench/gpu/check.sh).

Reads the check's run directory through the report's own frame (so every row is judged
exactly as `matrix report` judges it), the timing probe's JSON and nvidia-smi's text, and
writes `summary.json`; the same verdicts, the goals, what the matrix cut from each seed and
the log tail of every cell that did not end ok go to stdout, which check.sh appends to its
log. A claim is `true` (held), `false` (not held) or `null` (not applicable here, e.g. NVML
on the CPU), always with why. Cells the budget did not reach are listed apart, judged by no
claim: the budget's, not the product's. Exit 0 when no claim failed and every cell ran, 3
when no claim failed of what ran but some cells were not reached, 1 when a claim failed.
Goals are benchmarks, not tests: a goal missed says by how much and never fails the check.

    python bench/gpu/summary.py RUN_DIR OUT.json --mode gpu --timing T.json \\
        --nvidia-smi nvidia-smi.txt --elapsed-s 431 [--cells cells.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

BUDGET_S = {"gpu": 300, "cpu": 180}  # the whole check, start-up and report included
TIMING_TOLERANCE = 0.05  # the harness's clock against CUDA events
ENERGY_TOLERANCE = 0.10  # the energy counter against mean power x timed seconds
POWER_TOLERANCE = 0.05  # the power cap is enforced on an average: transients pass it
# shorter timed windows hold too few 10 Hz samples to compare, and the power cap lets a
# burst from idle through for a moment (an H200: 745 W of 700 over a first 0.92 s)
MIN_ENERGY_WINDOW_S = 1.0
# What is not a cut from the seed, but the axis or setting the check chose on purpose.
CHOSEN = {"precision", "backend", "rnn_impl", "compile", "dataset", "preset", "context",
          "workers", "devices"}


@dataclass(frozen=True)
class Claim:
    """One thing the check says of itself; `held` None where it cannot apply here."""

    name: str
    held: bool | None
    detail: str
    figures: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        verdict = {True: "held    ", False: "NOT HELD", None: "n/a     "}[self.held]
        return f"{verdict} {self.name}: {self.detail}"


@dataclass(frozen=True)
class Goal:
    """A performance goal (docs/PERFORMANCE.md): the median fraction of peak of the
    configurations that match `params`, against `at_least`."""

    workload: str
    params: dict[str, Any]
    at_least: float
    why: str


# dense products reach about 80% of the datasheet on a healthy card (790 of 989 bf16
# TFLOP/s on an H100 SXM); below 70% the report flags the node below_datasheet
CEILING_GOAL = 0.75
GOALS = (
    Goal("gpt_lm", {"precision": "bf16", "compile": True}, 0.45,
         "well-tuned GPT training reports 40-47% MFU on H100s"),
    Goal("transformer_ft", {"precision": "bf16"}, 0.30,
         "a DistilBERT fine-tune in bf16 on one GPU"),
)


def ceiling_claim(df: pd.DataFrame, mode: str) -> tuple[Claim, list[dict[str, Any]]]:
    """Every ok row with FLOP/s has its node's measured ceiling beside it; each ceiling as
    a goal against the peak (the datasheet on a GPU: CEILING_GOAL; judged on a GPU only)."""
    from orchestrator.report.ceilings import node_ceilings

    rows = ok_rows(df)
    rows = rows[column(rows, "achieved_flops").notna()] if len(rows) else rows
    without = sorted({r.workload for r in rows.itertuples()
                      if not _number(getattr(r, "node_ceiling_flops", None))})
    found = []
    for row in node_ceilings(df).to_dict("records"):
        share = _float(row["ceiling_of_peak"])
        met = None if mode != "gpu" or share is None else share >= CEILING_GOAL
        found.append({"workload": "ceiling", "of": {"precision": row["precision"],
                      "framework": row["framework"]}, "goal": CEILING_GOAL,
                      "fraction_of_peak": share, "met": met,
                      "ceiling_tflops": row["node_ceiling_flops"] / 1e12,
                      "probe": row["node_ceiling_probe"], "cost_s": row["node_ceiling_cost_s"],
                      "why": "dense products reach about 80% of a healthy card's datasheet"}
                     | ({"short_by": CEILING_GOAL - share} if met is False and share else {}))
    detail = "; ".join(f"{e['of']['framework']} {e['of']['precision']} "
                       f"{e['ceiling_tflops']:.4g} TFLOP/s in {e['cost_s'] or 0:.2g} s"
                       for e in found) or "none measured"
    if without:
        detail += f"; no ceiling beside {', '.join(without)}"
    claim = Claim("each precision's ceiling is measured on the node", bool(found) and not without,
                  detail, {"ceilings": found})
    return claim, found


def cells(df: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: its last measurement row, or its only row where it has none."""
    return df.drop_duplicates("cell_id", keep="last")


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df["status"] == "ok") & df["items_per_s"].notna()] if len(df) else df


def column(df: pd.DataFrame, name: str) -> pd.Series:
    """A column as numbers (NaN where absent or not a number)."""
    import pandas as pd

    if name not in df:
        return pd.Series(math.nan, index=df.index, dtype=float)
    return pd.to_numeric(df[name], errors="coerce")


def cells_claim(df: pd.DataFrame) -> Claim:
    every = cells(df)
    counts = every["status"].value_counts().to_dict() if len(every) else {}
    unsupported = sorted({f"{row.workload}: {row.error}" for row in every.itertuples()
                          if row.status == "unsupported"})
    bad = [f"{row.workload} {row.cell_id}: {row.status}" for row in every.itertuples()
           if row.status not in ("ok", "unsupported")]
    held = bool(len(every)) and not bad
    detail = (f"{counts.get('ok', 0)} of {len(every)} cells ok, "
              f"{counts.get('unsupported', 0)} unsupported")
    if bad:
        detail += f"; not ok: {', '.join(bad)}"
    if not len(every):
        detail = "the run holds no cell"
    return Claim("every cell ok or unsupported with a reason", held, detail,
                 {"statuses": counts, "unsupported": unsupported, "not_ok": bad})


def device_claim(df: pd.DataFrame, mode: str) -> Claim:
    """Each ok cell's framework held its model where the cell was meant to run."""
    rows = cells(ok_rows(df))
    devices = (rows["compute_device"] if "compute_device" in rows
               else rows["workload"].map(lambda _: None))
    wanted = "GPU" if mode == "gpu" else "CPU"
    on = {f"{row.workload} {row.cell_id}": str(device) for row, device
          in zip(rows.itertuples(), devices, strict=True)}
    wrong = {cell: device for cell, device in on.items() if on_kind(device) != wanted}
    held = bool(on) and not wrong
    detail = (f"{len(on) - len(wrong)} of {len(on)} ok cells held their model on the "
              f"{wanted} ({', '.join(sorted(set(on.values())))})")
    if wrong:
        detail += "; elsewhere: " + ", ".join(f"{c} on {d}" for c, d in wrong.items())
    return Claim(f"every cell ran on the {wanted}, as its framework reports", held, detail,
                 {"devices": on})


def on_kind(device: str | None) -> str | None:
    """GPU for torch's cuda:N, JAX's gpu:N or TensorFlow's .../device:GPU:N; CPU for cpu."""
    text = (device or "").lower()
    if text in ("", "none", "nan"):
        return None
    return "GPU" if "cuda" in text or "gpu" in text else "CPU" if "cpu" in text else None


def peak_claim(df: pd.DataFrame, mode: str) -> Claim:
    """Every ok row with a FLOP model found its peak; on a GPU, by the driver's name."""
    from orchestrator.hardware.peaks import gpu_model_key

    every = ok_rows(df)
    names = {str(m): gpu_model_key(str(m)) for m in
             every.get("gpu_model", every["workload"].map(lambda _: None)).dropna().unique()}
    rows = every[column(every, "achieved_flops").notna()] if len(every) else every
    missing = sorted({row.workload for row in rows.itertuples()
                      if not _number(getattr(row, "peak_flops", None))})
    unknown = [name for name, key in names.items() if key is None]
    if mode == "gpu":
        held = bool(names) and not unknown and not missing
        detail = (", ".join(f"{name!r} is the {key}" for name, key in names.items() if key)
                  or "no GPU name reported")
    else:
        sources = sorted({str(s) for s in rows.get("peak_source", []) if isinstance(s, str)})
        held = bool(len(rows)) and not missing
        detail = f"every row's peak from: {', '.join(sources) or 'nowhere'}"
    if unknown:
        detail += f"; unknown to the peak table: {', '.join(map(repr, unknown))}"
    if missing:
        detail += f"; no peak for {', '.join(missing)}"
    return Claim("the peak is found from what the node reports", held, detail,
                 {"gpu_models": names, "without_peak": missing})


def memory_claim(df: pd.DataFrame, mode: str) -> Claim:
    """The framework's own peak on the GPU, above zero and below the card's memory."""
    rows = ok_rows(df)
    if mode != "gpu":
        host = column(rows, "host_rss_peak_bytes")
        held = bool(len(rows)) and bool(host.notna().all())
        return Claim("memory is the framework's peak, below the card's", None if held else False,
                     f"no GPU here; host peak reported on {int(host.notna().sum())} of "
                     f"{len(rows)} ok rows")
    peak, card = column(rows, "mem_alloc_peak_bytes"), column(rows, "gpu_memory_bytes")
    bad = sorted({row.workload for row, p, c in zip(rows.itertuples(), peak, card, strict=True)
                  if not (p > 0) or not (c > 0) or p >= c})
    held = bool(len(rows)) and not bad
    detail = (f"largest {peak.max() / 2**30:,.1f} GiB of {card.max() / 2**30:,.1f} GiB"
              if peak.notna().any() and card.notna().any() else "no peak or no card memory")
    if bad:
        detail += f"; missing, zero or too large in {', '.join(bad)}"
    per_workload = {name: float(group.max()) for name, group in peak.groupby(rows["workload"])}
    return Claim("memory is the framework's peak, below the card's", held, detail,
                 {"peak_bytes": per_workload, "card_bytes": _float(card.max())})


def nvml_claim(df: pd.DataFrame, mode: str) -> Claim:
    """Power within the limit, energy = mean power x timed seconds, clocks and throttling."""
    name = "NVML: power, energy, clocks and throttle reasons"
    if mode != "gpu":
        return Claim(name, None, "no GPU here")
    rows = ok_rows(df)
    power, limit = column(rows, "gpu_power_mean_w"), column(rows, "gpu_power_limit_w")
    count = column(rows, "gpu_count").fillna(1)
    energy, train_s = column(rows, "gpu_energy_j"), column(rows, "train_s")
    clock = column(rows, "gpu_sm_clock_mean_mhz")
    problems = []
    if not len(rows) or power.isna().any() or clock.isna().any():
        problems.append(f"power or clock missing on {int((power.isna() | clock.isna()).sum())}"
                        f" of {len(rows)} ok rows")
    judged = train_s >= MIN_ENERGY_WINDOW_S
    over = (power > limit * count * (1 + POWER_TOLERANCE)) & judged
    if over.any() or limit.isna().all():
        problems.append(f"mean power above the limit on {int(over.sum())} rows"
                        if over.any() else "no power limit recorded")
    deviation = ((energy - power * train_s).abs() / (power * train_s))[judged]
    if deviation.isna().any() or (deviation > ENERGY_TOLERANCE).any():
        problems.append(f"energy off mean power x timed seconds by up to "
                        f"{deviation.max():.1%} (tolerance {ENERGY_TOLERANCE:.0%})")
    reasons = sorted({r for text in rows.get("throttle_reasons", []) if isinstance(text, str)
                      for r in text.split(",") if r})
    detail = (f"power {power.min():,.0f} to {power.max():,.0f} W of a {limit.max():,.0f} W "
              f"limit; energy within {deviation.max():.1%} over {int(judged.sum())} rows of "
              f"{MIN_ENERGY_WINDOW_S:g} s or more; SM clock {clock.min():,.0f} to "
              f"{clock.max():,.0f} MHz; throttle reasons: {', '.join(reasons) or 'none'}")
    if problems:
        detail += "; " + "; ".join(problems)
    return Claim(name, not problems, detail,
                 {"power_w": [_float(power.min()), _float(power.max())],
                  "power_limit_w": _float(limit.max()),
                  "energy_deviation_max": _float(deviation.max()),
                  "sm_clock_mhz": [_float(clock.min()), _float(clock.max())],
                  "throttle_reasons": reasons})


def timing_claim(timing: dict[str, Any], mode: str) -> Claim:
    """The harness's synchronised clock against CUDA events over the same steps."""
    name = "timing: the harness's clock against CUDA events"
    if "blocks" not in timing:
        why = str(timing.get("skipped", "the probe did not run"))
        return Claim(name, None if mode == "cpu" else False, why)
    deviations = [abs(b["meter_s"] - b["events_s"]) / b["events_s"] for b in timing["blocks"]]
    worst = max(deviations)
    detail = "; ".join(f"blocks of {b['block_steps']}: {b['meter_s'] * 1e3:.2f} ms against "
                       f"{b['events_s'] * 1e3:.2f} ms ({d:.2%})"
                       for b, d in zip(timing["blocks"], deviations, strict=True))
    return Claim(name, worst <= TIMING_TOLERANCE, detail, timing)


def elapsed_claim(elapsed_s: float | None, mode: str, budget_s: float | None = None) -> Claim:
    """The check against its budget (`budget_s`: as check.sh ran it). MATRIX_BENCH_CHECK_
    BUDGET_S sets another for a machine the check shares (a test run beside another test
    worker on two cores), said in the detail; the GPU node's is always its own."""
    budget = BUDGET_S[mode]
    shared = os.environ.get("MATRIX_BENCH_CHECK_BUDGET_S")
    if shared and mode == "cpu":
        budget = int(shared)
    if budget_s is not None and mode == "cpu":
        budget = int(budget_s)
    if elapsed_s is None:
        return Claim("the check ends within its budget", None, "not timed")
    return Claim("the check ends within its budget", elapsed_s <= budget,
                 f"{elapsed_s:,.0f} s of {budget} s" + (" (a shared machine's)" if shared else ""),
                 {"elapsed_s": elapsed_s, "budget_s": budget})


def not_reached(planned: Sequence[dict[str, Any]], recorded: Iterable[str]) -> list[str]:
    """The planned cells (estimate.py --cells) the journal holds no record of: in a phase
    the budget left no time to start, or stopped before they began (an interrupted sweep
    records no cell it had not finished). The budget's, not the product's: in no claim."""
    ran = set(recorded)
    return [f"{c['cell']} (phase {c['phase']}, estimate {c['estimate_s']} s)"
            for c in planned if c["cell_id"] not in ran]


def goals(df: pd.DataFrame, mode: str) -> list[dict[str, Any]]:
    """Each workload's median fraction of peak, with its goal where it has one (GPU only)."""
    rows = ok_rows(df)
    fraction = column(rows, "peak_fraction")
    found = []
    for workload in sorted(rows["workload"].unique()) if len(rows) else []:
        mine = rows["workload"] == workload
        entry: dict[str, Any] = {"workload": workload,
                                 "fraction_of_peak": _float(fraction[mine].median()),
                                 "fraction_of_ceiling": _float(column(rows, "ceiling_fraction")
                                                               [mine].median())}
        for goal in (g for g in GOALS if g.workload == workload):
            match = mine & _matches(rows, goal.params)
            got = _float(fraction[match].median())
            entry |= {"goal": goal.at_least, "of": goal.params, "why": goal.why,
                      "fraction_of_peak": got}
            entry["met"] = None if mode != "gpu" or got is None else got >= goal.at_least
            if entry["met"] is False and got is not None:
                entry["short_by"] = goal.at_least - got
        found.append(entry)
    found.append({"workload": "lstm_lm", "goal": "its peer's throughput", "met": None,
                  "why": "pytorch/examples' word_language_model is not on the node; "
                         "bench/lstm_lm_vs_examples.py runs it where its code is at hand"})
    return found


def goal_line(entry: dict[str, Any]) -> str:
    got = entry.get("fraction_of_peak")
    figure = f"{got:.1%} of peak" if got is not None else "no fraction of peak"
    if entry.get("fraction_of_ceiling") is not None:
        figure += f" ({entry['fraction_of_ceiling']:.1%} of its node's ceiling)"
    if "goal" not in entry:
        return f"peak     {entry['workload']}: {figure} (median of its ok rows; no goal)"
    if not isinstance(entry["goal"], float):
        return f"goal     {entry['workload']}: {entry['goal']}: not judged ({entry['why']})"
    verdict = {True: "met", False: f"short by {entry.get('short_by', 0):.1%} points",
               None: "not judged on the CPU" if got is not None else "not judged"
               }[entry["met"]]
    return (f"goal     {entry['workload']} {entry['of']}: {figure}, goal {entry['goal']:.0%}:"
            f" {verdict}")


def cuts(df: pd.DataFrame) -> list[str]:
    """What the matrix changed from each workload's seed defaults, and its epochs."""
    from orchestrator.workload_registry import load_workload

    lines = []
    for workload, group in df.groupby("workload", sort=True):
        info = load_workload(str(workload))
        seed = info.resolve({})
        changed = []
        for name, default in seed.items():
            values = sorted({_shown(v) for v in group.get(f"param.{name}", []) if _present(v)})
            if name not in CHOSEN and values and values != [_shown(default)]:
                changed.append(f"{name} {'/'.join(values)} (seed {_shown(default)})")
        epochs = int(column(group, "epoch").max()) if column(group, "epoch").notna().any() else 0
        repeats = int(column(group, "repeat").max())
        lines.append(f"cut      {workload}: {epochs} of {info.epochs} epochs, {repeats} repeat(s)"
                     + (f"; {'; '.join(changed)}" if changed else ""))
    return lines


def log_tails(df: pd.DataFrame, run_dir: Path, lines_per_cell: int = 20) -> list[str]:
    """The end of the log of every cell that did not end ok: the journal's tail, or the
    last lines of the cell's log file in the run directory where the journal kept none."""
    lines = []
    for row in cells(df).itertuples():
        if row.status == "ok":
            continue
        tail = str(row.log_tail) if _present(row.log_tail) and row.log_tail else ""
        log = run_dir / "logs" / f"{row.cell_id}.log"
        if not tail and log.is_file():
            tail = "\n".join(log.read_text(encoding="utf-8", errors="replace")
                             .splitlines()[-lines_per_cell:])
        lines.append(f"--- {row.workload} {row.cell_id} ended {row.status}: {row.error}")
        lines.extend(f"    {line}" for line in (tail or "(no log)").splitlines())
    return lines


def node(df: pd.DataFrame) -> dict[str, Any]:
    """Where the check ran, from the first cell's provenance."""
    keys = ("gpu_model", "gpu_count", "gpu_memory_bytes", "gpu_power_limit_w", "driver",
            "cuda", "cudnn", "cpu_model", "cpu_count", "python", "hostname", "tool_version",
            "git_revision")
    first = df.iloc[0] if len(df) else {}
    found = {key: _plain(first.get(key)) for key in keys if _present(first.get(key))}
    versions = {}
    for row in cells(df).itertuples():
        framework, version = getattr(row, "framework", None), getattr(row, "framework_version",
                                                                      None)
        if _present(framework) and _present(version):
            versions[str(framework)] = str(version)
    return found | {"frameworks": versions}


def judge(run_dir: Path, mode: str, timing: dict[str, Any], elapsed_s: float | None,
          planned: Sequence[dict[str, Any]] = (), budget_s: float | None = None
          ) -> dict[str, Any]:
    """Everything summary.json holds. `planned`: the cells estimate.py planned, in the order
    they run; those with no record are listed as not reached, apart from the claims, and
    the check is then `complete: false` whatever the claims of what ran say."""
    from orchestrator.report.frame import run_frame
    from orchestrator.results.run_directory import RunDirectory

    ran = (run_dir / "results.jsonl").is_file()
    df = run_frame(RunDirectory(run_dir)) if ran else None
    recorded = [] if df is None or "cell_id" not in df else df["cell_id"].dropna().astype(str)
    missed = not_reached(planned, recorded)
    reach = {"complete": not missed, "not_reached": missed}
    reach_lines = [f"not reached within the budget (not judged): {cell}" for cell in missed]
    if df is None or not len(df) or "status" not in df:
        claims = [Claim("every cell ok or unsupported with a reason", None if missed else False,
                        "no cell ran within the budget" if missed else "the run holds no cell")]
        return {"mode": mode, "claims": [asdict(c) for c in claims],
                "held": all(c.held is not False for c in claims), **reach,
                "lines": [c.line() for c in claims] + reach_lines}
    for name in ("items_per_s", "error", "log_tail"):
        if name not in df:
            df[name] = None
    ceilings, ceiling_goals = ceiling_claim(df, mode)
    claims = [cells_claim(df), device_claim(df, mode), peak_claim(df, mode), ceilings,
              memory_claim(df, mode), nvml_claim(df, mode), timing_claim(timing, mode),
              elapsed_claim(elapsed_s, mode, budget_s)]
    found_goals = goals(df, mode) + ceiling_goals
    lines = ([c.line() for c in claims] + reach_lines + [goal_line(g) for g in found_goals]
             + cuts(df) + log_tails(df, run_dir))
    return {"mode": mode, "node": node(df), "held": all(c.held is not False for c in claims),
            **reach, "claims": [asdict(c) for c in claims], "goals": found_goals,
            "lines": lines}


def _matches(rows: pd.DataFrame, params: dict[str, Any]) -> pd.Series:
    import pandas as pd

    match = pd.Series(True, index=rows.index)
    for name, value in params.items():
        values = rows.get(f"param.{name}", pd.Series(None, index=rows.index))
        match &= values.map(lambda v, want=value: _present(v) and v == want).astype(bool)
    return match


def _present(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _number(value: object) -> bool:
    return _present(value) and isinstance(value, int | float) and value > 0


def _float(value: object) -> float | None:
    return float(value) if _present(value) else None  # type: ignore[arg-type]


def _shown(value: object) -> str:
    """A parameter as the matrix wrote it: the frame's float columns give 128.0 for 128."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _plain(value: object) -> object:
    """numpy scalars as Python's, for JSON."""
    return value.item() if hasattr(value, "item") else value


def main(argv: Iterable[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--mode", choices=sorted(BUDGET_S), default="gpu")
    parser.add_argument("--timing", type=Path)
    parser.add_argument("--nvidia-smi", type=Path, help="kept beside summary.json; named here")
    parser.add_argument("--elapsed-s", type=float)
    parser.add_argument("--budget-s", type=float, help="the budget check.sh ran under")
    parser.add_argument("--cells", type=Path,
                        help="the planned cells (estimate.py --cells): those not reached")
    args = parser.parse_args(list(argv))
    timing: dict[str, Any] = {"skipped": "the probe did not run"}
    if args.timing and args.timing.is_file():
        timing = json.loads(args.timing.read_text(encoding="utf-8"))
    planned = json.loads(args.cells.read_text(encoding="utf-8")) if args.cells else []
    summary = judge(args.run_dir, args.mode, timing, args.elapsed_s, planned, args.budget_s)
    if args.nvidia_smi:
        summary["nvidia_smi"] = args.nvidia_smi.name
    args.out.write_text(json.dumps(summary, indent=1, default=str) + "\n", encoding="utf-8")
    print("summary: " + ("every claim held" if summary["held"] else "a claim did NOT hold")
          + ("" if summary["complete"] else f" of what ran; {len(summary['not_reached'])} "
             "cells not reached within the budget"))
    for line in summary["lines"]:
        print(line)
    return 1 if not summary["held"] else 0 if summary["complete"] else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
