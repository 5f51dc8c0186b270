"""Each row beside its node's measured ceiling (issue 40): the FLOP/s dense products reached
on the node, hardware, stack, framework and precision the row ran on, in the same run.

A cell that measured the ceiling carries it in its provenance (`ceiling_flops`, one device;
worker/ceiling.py); the node's other cells share it. Where a node measured more than once
(cells that ran at once), the best probe counts, as the probe counts its best block. From
it each row gets:

- `node_ceiling_flops`, `node_ceiling_probe`: the node's ceiling of one device, and how;
- `ceiling_fraction`: the row's FLOP/s over the ceiling of the devices it used (one CPU
  ceiling covers all the cell's cores; a GPU's is per GPU);
- `ceiling_of_peak`: the ceiling over the peak of one device the row is judged against
  (its GPU model's datasheet; on a CPU, the estimated upper bound).

The judge (judge.py) flags `above_ceiling` past CEILING_TOLERANCE and `below_datasheet`
under BELOW_DATASHEET; the datasheet bound stays the implausibility bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.report.markdown import present
from orchestrator.results.columns import param_column
from orchestrator.results.records import Flag

if TYPE_CHECKING:
    import pandas as pd

# A row this far above its node's measured ceiling is flagged: the clocks of two timings of
# one node agree to a few percent, no closer.
CEILING_TOLERANCE = 0.05
# A GPU whose measured ceiling is under this share of its datasheet is not the part it is
# named, or not running as one: a healthy card's dense products reach 65 to 80% of the
# datasheet (about 790 of 989 bf16 TFLOP/s on an H100 SXM in short bursts; 671 to 679,
# 68%, sustained at its 700 W cap by a healthy H200, bench/results/gpu/2026-11-29-h200).
BELOW_DATASHEET = 0.60
CEILING_COLUMNS = ("node_ceiling_flops", "node_ceiling_probe", "node_ceiling_cost_s",
                   "ceiling_fraction", "ceiling_of_peak")
# what identifies a node's ceiling besides the run; with the row's precision
NODE_KEYS = ("node", "hardware", "stack", "framework")
# A measured ceiling: its FLOP/s of one device, the probe, what the probe cost
Probe = tuple[float, str, float | None]


def with_ceilings(df: pd.DataFrame, devices: pd.Series,
                  probes: pd.DataFrame | None = None) -> pd.DataFrame:
    """`df` (its ok rows' achieved_flops and peak_flops already derived) with
    CEILING_COLUMNS; `devices` are the devices each row used (judge.devices_column).
    `probes` are the rows that measured a ceiling (default: those of `df`), with the run,
    NODE_KEYS and the `ceiling_*` fields: the store passes its run's probes, which may be
    cells `df` does not show."""
    import pandas as pd

    df = df.copy()
    for column in CEILING_COLUMNS:
        df[column] = pd.Series(None, index=df.index, dtype=object)
    keys = [_run_column(df), *NODE_KEYS]
    best = best_probes(df if probes is None else probes, keys)
    if not best or not all(k in df for k in keys):
        return df
    found = [best.get((*(row[k] for k in keys), p)) for row, p in
             zip(df[keys].to_dict("records"), _precisions(df), strict=True)]
    df["node_ceiling_flops"] = [f[0] if f else None for f in found]
    df["node_ceiling_probe"] = [f[1] if f else None for f in found]
    df["node_ceiling_cost_s"] = [f[2] if f else None for f in found]
    ceiling = pd.to_numeric(df["node_ceiling_flops"], errors="coerce")
    on_gpu = df["gpu_model"].notna() if "gpu_model" in df else pd.Series(False, index=df.index)
    per_device = devices.clip(lower=1).where(on_gpu, 1)  # one CPU ceiling: all its cores
    achieved = pd.to_numeric(df.get("achieved_flops"), errors="coerce")
    df["ceiling_fraction"] = (achieved / (ceiling * per_device)).astype(object).where(
        achieved.notna() & ceiling.notna(), None)
    # the peak of one device, as the row is judged against it (judge._flop_figures)
    peak = pd.to_numeric(df.get("peak_flops"), errors="coerce") / per_device
    df["ceiling_of_peak"] = (ceiling / peak).astype(object).where(
        ceiling.notna() & peak.notna(), None)
    return df


def best_probes(probes: pd.DataFrame, keys: list[str]) -> dict[tuple[Any, ...], Probe]:
    """(run, node, hardware, stack, framework, precision) -> the best probe measured there."""
    import pandas as pd

    needed = [*keys, "ceiling_flops", "ceiling_precision"]
    if probes.empty or not all(k in probes for k in needed):
        return {}
    measured = probes[pd.to_numeric(probes["ceiling_flops"], errors="coerce").notna()]
    best: dict[tuple[Any, ...], Probe] = {}
    for row in measured.to_dict("records"):
        key = (*(row[k] for k in keys), row["ceiling_precision"])
        flops = float(row["ceiling_flops"])
        if key not in best or flops > best[key][0]:
            cost = row.get("ceiling_cost_s")
            best[key] = (flops, str(row.get("ceiling_probe") or ""),
                         float(cost) if present(cost) else None)
    return best


def ceiling_verdicts(row: dict[str, Any]) -> list[tuple[str, str]]:
    """(flag, reason) for a row above its node's ceiling, and for a node below its
    datasheet."""
    found = []
    fraction = _number(row.get("ceiling_fraction"))
    if fraction is not None and fraction > 1 + CEILING_TOLERANCE:
        found.append((Flag.ABOVE_CEILING.value, (
            f"above_ceiling: {fraction:.2f}x the {row['_precision']} ceiling "
            f"measured on {row.get('node')} ({_tflops(row['node_ceiling_flops'])} TFLOP/s a "
            f"device; {row.get('node_ceiling_probe')}): {_tflops(row['achieved_flops'])} "
            "TFLOP/s achieved (a timing or FLOP-count error, or a disturbed probe)")))
    share = _number(row.get("ceiling_of_peak"))
    if share is not None and share < BELOW_DATASHEET and row.get("peak_source") == "datasheet":
        found.append((Flag.BELOW_DATASHEET.value, (
            f"below_datasheet: its node {row.get('node')} measured "
            f"{_tflops(row['node_ceiling_flops'])} {row['_precision']} TFLOP/s, "
            f"{share:.0%} of the {row.get('gpu_model')} datasheet's "
            f"{_tflops(row['node_ceiling_flops'] / share)} TFLOP/s (throttled, power-capped, or a "
            "lesser part under this name)")))
    return found


def node_ceilings(df: pd.DataFrame) -> pd.DataFrame:
    """One row per measured ceiling the rows were read against, with its share of the peak
    of one device: the report's environment section shows them."""
    import pandas as pd

    if "node_ceiling_flops" not in df or df["node_ceiling_flops"].isna().all():
        return pd.DataFrame()
    has = df["node_ceiling_flops"].notna()
    shown = df[has].assign(precision=pd.Series(_precisions(df), index=df.index)[has])
    keys = [*NODE_KEYS, "precision"]
    columns = [*keys, "node_ceiling_flops", "node_ceiling_probe", "node_ceiling_cost_s",
               "ceiling_of_peak", "peak_source"]
    return shown.drop_duplicates(keys)[columns].sort_values(keys, kind="stable").reset_index(
        drop=True)


def _precisions(df: pd.DataFrame) -> list[str]:
    if param_column("precision") not in df:
        return ["fp32"] * len(df)
    return [str(p) if present(p) else "fp32" for p in df[param_column("precision")]]


def _number(value: Any) -> float | None:
    return float(value) if present(value) else None


def _run_column(df: pd.DataFrame) -> str:
    """Several runs' rows (merged_frame) name their run directory; one run's, its name."""
    return "run_dir" if "run_dir" in df else "run"


def _tflops(flops: float) -> str:
    value = float(flops) / 1e12
    return f"{value:,.1f}" if value >= 10 else f"{value:.3g}"
