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
    # the configuration's ms/step is its items per step over its figure, exactly
    items_per_step = sum(r["items"] for r in rows) / sum(r["steps"] for r in rows)
    assert summary["step_s"].iloc[0] * summary["items_per_s"].iloc[0] == \
        pytest.approx(items_per_step, rel=1e-12)


def test_a_configurations_figure_is_the_median_of_its_repeats_and_ms_per_step_agrees():
    # two repeats of two epochs: epochs at 1000 and 3000 items/s, then 1100 and 1300. The
    # repeats' medians are 2000 and 1200, their median 1600 (matrix history's figure); the
    # median of the four epochs would be 1200. 512 items a step: 320 ms a step at 1600/s.
    rows = pd.DataFrame([
        {"config_id": "c", "cell_id": cell, "workload": "gpt_lm", "hardware": "h",
         "stack": "s", "flags": "", "items_per_s": rate, "items": 512.0 * 10,
         "steps": 10, "train_s": 512.0 * 10 / rate}
        for cell, rate in (("r1", 1000.0), ("r1", 3000.0), ("r2", 1100.0), ("r2", 1300.0))])
    summary = config_summary(rows).iloc[0]
    assert summary["items_per_s"] == pytest.approx(1600.0)
    assert summary["step_s"] == pytest.approx(512 / 1600.0)


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
