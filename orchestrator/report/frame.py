"""A run's rows as the report and the parquet show them: the journal's flat join
(`ResultStore.joined`) with every derived column: the whole epoch, costs, scaling, and
every row judged (analysis.py, judge.py). Several runs are derived together, so a
one-GPU twin may come from another run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.report.analysis import add_cost_columns, derived, with_whole_epoch
from orchestrator.results.declarations import load_declarations
from orchestrator.results.store import ResultStore, write_parquet
from orchestrator.workload_registry import (
    WorkloadFolderError,
    is_command,
    register_command_workload,
    register_workload_folder,
    workload_folder,
)

if TYPE_CHECKING:
    import pandas as pd


def recorded(store: ResultStore) -> pd.DataFrame:
    """The run's rows with the columns computed from each row alone: the whole epoch of
    rows recorded before `epoch_s`, and the cost columns. The user workloads the rows came
    from are registered first, for their declarations: folders (`path:`) from where they
    are, commands from what the run directory keeps of them."""
    for info in load_declarations(store.root):
        if not is_command(info.name):
            register_command_workload(info)
    joined = store.joined()
    if "workload_dir" in joined.columns:
        pairs = joined[["workload", "workload_dir"]].dropna().drop_duplicates()
        for name, folder in pairs.itertuples(index=False):
            if workload_folder(name) is None:
                register_recorded_folder(str(name), Path(folder))
    return add_cost_columns(with_whole_epoch(joined))


def register_recorded_folder(name: str, folder: Path) -> None:
    """Register the folder a run's workload came from; WorkloadFolderError where it is gone."""
    if not (folder / "defaults.yaml").is_file():
        raise WorkloadFolderError(f"the run's workload {name} came from {folder}, which holds "
                                  "no workload any more: put it back to report the run")
    register_workload_folder(name, folder)


def ceiling_probes(store: ResultStore) -> pd.DataFrame:
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


def run_frame(store: ResultStore) -> pd.DataFrame:
    """One run's rows with everything derived: what the report and the parquet hold."""
    return derived(recorded(store), ceiling_probes(store))


def merged_frame(stores: list[ResultStore]) -> pd.DataFrame:
    """One DataFrame of every run's rows; `run_dir` says which run directory each came from
    (two runs of one matrix share their `run` name). Scaling is derived again over all of
    them: a one-GPU twin may come from another run."""
    import pandas as pd

    frames, probes = [], []
    for store in stores:
        frame = recorded(store)
        frame.insert(0, "run_dir", store.root.name)
        frames.append(frame)
        probes.append(ceiling_probes(store).assign(run_dir=store.root.name))
    if not frames:
        return pd.DataFrame()
    return derived(pd.concat(frames, ignore_index=True), pd.concat(probes, ignore_index=True))


def write_results(store: ResultStore) -> pd.DataFrame:
    """Write the run's results.parquet from its journal and return what it holds."""
    df = run_frame(store)
    write_parquet(df, store.parquet)
    return df
