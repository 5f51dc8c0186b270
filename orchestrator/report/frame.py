"""A run's rows as the report and the parquet show them: the journal's flat join
(`RunDirectory.joined`) with every derived column: the whole epoch, costs, scaling, and
every row judged (analysis.py, judge.py). Several runs are derived together, so a
one-GPU twin may come from another run.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import MatrixError, MatrixWarning
from orchestrator.report.analysis import add_cost_columns, derived, with_whole_epoch
from orchestrator.results.columns import with_node_counts
from orchestrator.results.run_directory import RunDirectory, write_parquet
from orchestrator.spec.command_workloads import declares_command
from orchestrator.workload_declarations import load_declarations
from orchestrator.workload_registry import WorkloadFolderError, WorkloadInfo
from orchestrator.workload_scope import Workloads, report_on, reported

if TYPE_CHECKING:
    import pandas as pd


def recorded(store: RunDirectory) -> pd.DataFrame:
    """The run's rows with the columns computed from each row alone: the whole epoch of
    rows recorded before `epoch_s`, and the cost columns. The user workloads the rows came
    from join the workloads this process reports on (workload_scope.reported), for their
    declarations: folders (`path:`) from where they are, commands from what the run
    directory keeps of them, and a folder since moved or a package no longer installed from
    its recorded declaration, with a warning."""
    declared = {info.name: info for info in load_declarations(store.root)}
    joined = store.joined()
    folders: dict[str, Path] = {}
    if "workload_dir" in joined.columns:
        pairs = joined[["workload", "workload_dir"]].dropna().drop_duplicates()
        folders = {str(name): Path(folder) for name, folder in pairs.itertuples(index=False)}
    workloads = reported()
    for name, folder in folders.items():
        if workloads.folder(name) is None:
            workloads = recorded_folder(workloads, name, folder, declared.get(name))
    for name, info in declared.items():
        if name in folders or workloads.is_command(name):
            continue
        if declares_command(info):
            workloads = workloads.with_command(info)
        elif not _loads(workloads, name):  # a package workload whose package is not here
            warnings.warn(f"the run's workload {name} ({info.version}) is not installed here: "
                          "reported from its recorded declaration, without its FLOP model "
                          "and views", MatrixWarning, stacklevel=2)
            workloads = workloads.with_recorded(info)
    report_on(workloads)
    return add_cost_columns(with_whole_epoch(with_node_counts(joined)))


def recorded_folder(workloads: Workloads, name: str, folder: Path,
                    declared: WorkloadInfo | None = None) -> Workloads:
    """`workloads` and the folder a run's workload came from; where it is gone, the run's
    recorded declaration (with a warning), else WorkloadFolderError."""
    if (folder / "defaults.yaml").is_file():
        return workloads.with_folder(name, folder)
    if declared is not None:
        warnings.warn(f"the run's workload {name} came from {folder}, which holds no workload "
                      "any more: reported from its recorded declaration, without its FLOP "
                      "model and views", MatrixWarning, stacklevel=2)
        return workloads.with_recorded(declared)
    raise WorkloadFolderError(f"the run's workload {name} came from {folder}, which holds "
                              "no workload any more: put it back to report the run")


def _loads(workloads: Workloads, name: str) -> bool:
    try:
        workloads.load(name)
    except MatrixError:
        return False
    return True


def ceiling_probes(store: RunDirectory) -> pd.DataFrame:
    """Every attempt of the run that measured its node's ceiling (worker/ceiling.py), a
    rerun's earlier ones included: a node measures once per run, so the attempt that did may
    not be its cell's final one. Columns: run, hardware, stack and the provenance's node,
    framework and ceiling_* fields (report/ceilings.py reads them)."""
    import pandas as pd

    fields = ("node", "framework", "ceiling_flops", "ceiling_precision", "ceiling_probe",
              "ceiling_cost_s")
    rows = [{"run": a.cell.run, "hardware": a.cell.hardware, "stack": a.cell.stack,
             **{f: getattr(a.provenance, f) for f in fields}}
            for a in store.attempts()
            if a.provenance is not None and a.provenance.ceiling_flops is not None]
    return pd.DataFrame(rows, columns=["run", "hardware", "stack", *fields])


def run_frame(store: RunDirectory) -> pd.DataFrame:
    """One run's rows with everything derived: what the report and the parquet hold."""
    return derived(recorded(store), ceiling_probes(store))


# what tells one attempt of a cell from another, and a copy's from its original: the same
# fields as the results store's attempt_id (database/rows.py)
ATTEMPT_IDENTITY = ("run", "cell_id", "attempts", "started_at", "wall_s")


def merged_frame(stores: list[RunDirectory]) -> pd.DataFrame:
    """One DataFrame of every run's rows; `run_dir` says which run directory each came from
    (two runs of one matrix share their `run` name). Scaling is derived again over all of
    them: a one-GPU twin may come from another run."""
    import pandas as pd

    frames, probes = [], []
    seen: set[tuple[object, ...]] = set()
    for store in stores:
        frame = recorded(store)
        # an attempt a run and its copy elsewhere both hold is read once (as `db import`
        # of a copy adds nothing): its identity is what no copy changes (database/rows.py)
        keys = list(frame[[c for c in ATTEMPT_IDENTITY if c in frame]]
                    .itertuples(index=False, name=None)) if len(frame) else []
        frame = frame[[key not in seen for key in keys]] if seen else frame
        seen.update(keys)
        frame.insert(0, "run_dir", store.root.name)
        frames.append(frame)
        probes.append(ceiling_probes(store).assign(run_dir=store.root.name))
    if not frames:
        return pd.DataFrame()
    return derived(pd.concat(frames, ignore_index=True), pd.concat(probes, ignore_index=True))


def write_results(store: RunDirectory) -> pd.DataFrame:
    """Write the run's results.parquet from its journal and return what it holds."""
    df = run_frame(store)
    write_parquet(df, store.parquet)
    return df
