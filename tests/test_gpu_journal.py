"""The first GPU runs' journals (an H200, 2026-11-29, bench/results/gpu/2026-11-29-h200/),
read by the parts that judge and show figures: the GPU check's claims hold of the run made
after its fixes and caught what the first run got wrong, and the report judges a healthy,
power-capped card as healthy, no figure above what it can do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from tests.conftest import PROJECT, run_cli
from tests.gpu_node import load_summary

H200 = PROJECT / "bench" / "results" / "gpu" / "2026-11-29-h200"
summary = load_summary()


def recorded_run(tmp_path: Path, journal: Path) -> Path:
    run = tmp_path / journal.parent.name
    run.mkdir()
    shutil.copy(journal, run / "results.jsonl")
    return run


def judged(tmp_path: Path, folder: Path) -> dict[str, Any]:
    """What summary.py says of a recorded check, with the timing probe it recorded."""
    recorded = json.loads((folder / "summary.json").read_text())
    timing = next(c["figures"] for c in recorded["claims"] if c["name"].startswith("timing"))
    result: dict[str, Any] = summary.judge(recorded_run(tmp_path, folder / "results.jsonl"),
                                           "gpu", timing, elapsed_s=None)
    return result


def claim(result: dict[str, Any], starts: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in result["claims"] if c["name"].startswith(starts))
    return found


def test_the_h200_run_holds_every_claim_with_every_workload_on_the_gpu(tmp_path):
    result = judged(tmp_path, H200)
    assert result["held"], result["lines"]
    assert claim(result, "every cell ok")["figures"]["statuses"] == {"ok": 10}
    assert result["node"]["gpu_model"] == "NVIDIA H200"
    assert "'NVIDIA H200' is the H200-SXM" in claim(result, "the peak")["detail"]
    nvml = claim(result, "NVML")["figures"]
    assert nvml["energy_deviation_max"] < 0.01  # mean power is the counter's own
    assert nvml["power_w"][1] <= 700 * 1.05 and "sw_power_cap" in nvml["throttle_reasons"]
    gpt = next(g for g in result["goals"] if g["workload"] == "gpt_lm" and "goal" in g)
    assert 0.3 < gpt["fraction_of_peak"] < gpt["fraction_of_ceiling"] < 1


def test_the_first_h200_run_shows_the_lag_the_check_caught(tmp_path):
    # its mean power was NVML's one-second average, which lags a window that starts idle
    first = judged(tmp_path, H200 / "first")
    nvml = claim(first, "NVML")
    assert nvml["held"] is False and "energy off mean power" in nvml["detail"]
    assert nvml["figures"]["energy_deviation_max"] > 0.10


def test_a_healthy_power_capped_h200_is_judged_healthy_and_no_figure_passes_its_ceiling(
        tmp_path):
    run = recorded_run(tmp_path, H200 / "results.jsonl")
    done = run_cli("report", str(run), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = pd.read_parquet(run / "results.parquet")
    rows = rows[rows["status"] == "ok"]
    flags = set(",".join(rows["flags"].fillna("")).split(",")) - {""}
    assert not flags & {"implausible", "above_ceiling", "below_datasheet"}, flags
    # a sustained ceiling of 68% of the datasheet at the 700 W cap: a healthy H200
    assert rows["ceiling_of_peak"].dropna().between(0.6, 0.8).all()
    assert (rows["peak_fraction"].dropna() < rows["ceiling_of_peak"].dropna().max()).all()
    report = (run / "report.md").read_text()
    assert "↳ below_datasheet" not in report and "(below_datasheet)" not in report
    assert "| gpt_lm | fastest | gpu compile=True |" in report
