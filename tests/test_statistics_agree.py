"""One statistic per column family (issue 21, docs/MEASUREMENT.md): every figure of a row is
computed from the same totals over its timed steps, so a row's rate, its time per step and
its time per item always agree, and so does the report's ms/step."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from orchestrator.report.analysis import config_summary
from orchestrator.workload_registry import load_workload
from tests import cells

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

SMALL = {
    "sleep": {"seconds": 0.2, "steps": 4},
    "rnn_micro": {"preset": "tiny"},
    "nmt_dp": {"preset": "tiny", "workers": 2},
    "lstm_lm": {"preset": "tiny", "dataset": "synthetic", "synthetic_tokens": 20000,
                "eval_tokens": 2000},
}


@pytest.mark.parametrize("workload", sorted(SMALL))
def test_a_rows_figures_agree_with_each_other(workload, tmp_path):
    params = load_workload(workload).resolve(SMALL[workload])
    done, records = cells.run_worker(tmp_path, cells.make_cell(workload, params, epochs=2))
    assert done.returncode == 0, done.stderr
    rows = [r for r in records if r.get("record") == "measurement"]
    assert len(rows) == 2
    for row in rows:
        assert_consistent(row)
    summary = config_summary(pd.DataFrame([{**r, "config_id": "c", "cell_id": "x",
                                            "workload": workload, "hardware": "h",
                                            "stack": "s", "flags": ""} for r in rows]))
    mean_step_s = [r["train_s"] / r["steps"] for r in rows]
    assert summary["step_s"].iloc[0] == pytest.approx(sum(mean_step_s) / 2, rel=1e-12)


def assert_consistent(row: dict[str, Any]) -> None:
    rel = 1e-9
    assert row["items_per_s"] == pytest.approx(row["items"] / row["train_s"], rel=rel)
    if "ms_per_step" in row:
        assert row["ms_per_step"] == pytest.approx(1e3 * row["train_s"] / row["steps"], rel=rel)
    if "us_per_example_train" in row:
        assert row["us_per_example_train"] == pytest.approx(1e6 / row["items_per_s"], rel=rel)
    if row.get("achieved_flops") is not None:
        assert row["achieved_flops"] == pytest.approx(
            row["flops_per_item"] * row["items_per_s"], rel=rel)
    if row.get("peak_fraction") is not None:
        assert row["peak_fraction"] == pytest.approx(
            row["achieved_flops"] / row["peak_flops"], rel=rel)
