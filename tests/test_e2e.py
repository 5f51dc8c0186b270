"""End to end: `matrix run matrix/local.yaml` as a user runs it, then resume and --no-ray.

The tests of this module build on one another's run directory, in file order.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.report.markdown import fmt_rate
from tests.conftest import PROJECT, cell_records, journal, run_cli

pytestmark = pytest.mark.e2e

LOCAL = PROJECT / "matrix" / "local.yaml"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """The README's first command, on the embedded Ray it starts itself."""
    out = tmp_path_factory.mktemp("e2e") / "local"
    result = run_cli("run", str(LOCAL), "-o", str(out), cwd=PROJECT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 cells to run" in result.stdout
    # Ray's banners stay in the run's ray.log (--verbose shows them)
    assert "Ray" not in result.stderr and (out / "ray.log").is_file()
    return out


def test_the_local_matrix_writes_journal_parquet_and_report(run_dir):
    cells = cell_records(run_dir)
    assert len(cells) == 4 and {c["status"] for c in cells} == {"ok"}
    assert {c["param.batch_size"] for c in cells} == {16, 32}
    measurements = [r for r in journal(run_dir) if r["record"] == "measurement"]
    assert len(measurements) == 4 * 3  # three epochs per cell
    for m in measurements:
        assert m["item_unit"] == "word" and m["items_per_s"] == pytest.approx(
            m["items"] / m["train_s"])
        assert m["train_words_per_s"] == pytest.approx(m["items_per_s"])
    df = pd.read_parquet(run_dir / "results.parquet")
    assert len(df) == 12 and set(df["status"]) == {"ok"}
    assert sorted(df["items_per_s"]) == sorted(m["items_per_s"] for m in measurements)
    assert set(df["framework"]) == {"torch"} and df["hostname"].notna().all()
    # every epoch says whether the cell had its CPUs to itself (worker/contention.py); a
    # cell that trains kept at least a tenth of a core busy, and no more than the machine has
    cores = df["cpu_count"].iloc[0]
    assert df["cell_cpu_cores"].between(0.1, cores).all(), df["cell_cpu_cores"]
    assert (df["cpu_wait_cores"] >= 0).all() and df["other_cpu_cores"].between(0, cores).all()


def test_the_report_shows_the_medians_of_this_run(run_dir):
    df = pd.read_parquet(run_dir / "results.parquet")
    report = (run_dir / "report.md").read_text()
    for batch_size, group in df.groupby("param.batch_size"):
        # the median of the repeats' medians, as matrix history and compare take it
        median = group.groupby("cell_id")["items_per_s"].median().median()
        row = next(line for line in report.splitlines()
                   if line.startswith(f"| local-cpu | here | {batch_size} |"))
        assert f"| {fmt_rate(median)} |" in row, (row, median)
        assert "6 (2x)" in row


def test_a_second_run_does_nothing_new(run_dir):
    before = (run_dir / "results.jsonl").read_bytes()
    result = run_cli("run", str(LOCAL), "-o", str(run_dir), cwd=PROJECT)
    assert result.returncode == 0, result.stderr
    assert "0 cells to run" in result.stdout and "4 already done" in result.stdout
    assert (run_dir / "results.jsonl").read_bytes() == before


def test_deleting_a_cells_records_redoes_exactly_that_cell(run_dir):
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    victim = json.loads(lines[0])["cell_id"]
    kept = [line for line in lines if json.loads(line)["cell_id"] != victim]
    (run_dir / "results.jsonl").write_text("\n".join(kept) + "\n")
    result = run_cli("run", str(LOCAL), "-o", str(run_dir), "--no-ray", cwd=PROJECT)
    assert result.returncode == 0, result.stderr
    assert "1 cells to run" in result.stdout
    new = [json.loads(line) for line in
           (run_dir / "results.jsonl").read_text().splitlines()[len(kept):]]
    assert {r["cell_id"] for r in new} == {victim}
    assert [r["record"] for r in new] == ["provenance", "measurement", "measurement",
                                          "measurement", "cell"]


def test_no_ray_gives_the_same_set_of_records(run_dir, tmp_path):
    """One configuration's cells again, serially (half the matrix: the other half adds
    nothing the comparison does not already see)."""
    out = tmp_path / "no-ray"
    result = run_cli("run", str(LOCAL), "-o", str(out), "--no-ray", "--only",
                     "batch_size=16", cwd=PROJECT)
    assert result.returncode == 0, result.stderr
    ran = {c["cell_id"] for c in cell_records(out)}
    assert len(ran) == 2  # its two repeats

    def shape(directory: Path) -> set[tuple]:
        return {(r["cell_id"], r["record"], r.get("epoch"), r.get("status"))
                for r in journal(directory) if r["cell_id"] in ran}

    assert shape(out) == shape(run_dir) and len(shape(out)) == 2 * (1 + 3 + 1)
    assert {c["node_id"] for c in cell_records(out)} == {f"local:{_hostname()}"}


def test_ls_counts_the_runs_cells(run_dir):
    reports = run_dir.parent / "reports"
    shutil.copytree(run_dir, reports / "local")
    result = run_cli("ls", "--reports", str(reports), cwd=PROJECT)
    assert result.returncode == 0 and "local: 4 ok" in result.stdout


def _hostname() -> str:
    import os

    return os.uname().nodename
