"""`matrix report` over one run, several runs merged, and a run in S3 (moto)."""

from __future__ import annotations

import boto3
import pandas as pd
import pytest

from orchestrator.providers.aws.s3 import upload_run
from orchestrator.report.frame import run_frame
from orchestrator.results.records import Status
from tests.conftest import run_cli
from tests.report_fixtures import fixture_run

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier


def test_several_runs_merge_into_one_parquet_and_report(tmp_path):
    first, second = fixture_run(tmp_path / "monday"), fixture_run(tmp_path / "tuesday")
    # Tuesday's cells ran a day later: two runs, not a run and its copy (whose attempts,
    # being the same ones, are read once)
    second.journal.write_text(second.journal.read_text().replace(
        '"started_at":"2026-11-22T', '"started_at":"2026-11-23T'))
    done = run_cli("report", str(first.root), str(second.root), "-o", "merged", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = pd.read_parquet(tmp_path / "merged" / "results.parquet")
    assert set(rows["run_dir"]) == {"monday", "tuesday"}
    assert len(rows) == len(run_frame(first)) + len(run_frame(second))
    report = (tmp_path / "merged" / "report.md").read_text()
    assert report.startswith("# merged: monday, tuesday")
    assert "of 2 runs" in report and (tmp_path / "merged" / "plots").is_dir()


def test_several_runs_need_an_output_directory(tmp_path):
    first, second = fixture_run(tmp_path / "a"), fixture_run(tmp_path / "b")
    done = run_cli("report", str(first.root), str(second.root), cwd=tmp_path)
    assert done.returncode == 2 and "-o DIR" in done.stderr


def test_a_run_in_s3_is_fetched_and_reported(moto_server, tmp_path):
    store = fixture_run(tmp_path / "runs" / "nightly")
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="results")
    upload_run(s3, store.root, "s3://results/sweeps")
    done = run_cli("report", "s3://results/sweeps/nightly", "-o", "from-s3", cwd=tmp_path,
                   env={"HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "from-s3" / "report.md").read_text()
    failed = len(Status) - 1  # the fixture run has a cell of every status but ok
    assert "## transformer_ft" in report and f"## Cells that did not finish ok ({failed})" \
        in report


def test_scaling_finds_the_one_gpu_twin_in_another_run(tmp_path):
    from orchestrator.results.run_directory import RunDirectory
    from tests.report_fixtures import cell

    for name, gpus, rate in (("one-gpu", 1, 100.0), ("two-gpus", 2, 180.0)):
        store = RunDirectory(tmp_path / name)
        store.root.mkdir()
        cell(store, f"ft-{gpus}", f"ft-{gpus}", "transformer_ft", f"p4d-{gpus}gpu",
             {"precision": "fp32"}, [rate], stack="torch-cu126", gpus=gpus, price=32.77)
        assert run_frame(store)["speedup_ratio"].isna().all()  # alone, a run has no twin
    done = run_cli("report", "one-gpu", "two-gpus", "-o", "both", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = pd.read_parquet(tmp_path / "both" / "results.parquet").set_index("gpu_count")
    assert rows.loc[2, "speedup_ratio"] == pytest.approx(1.8)
    assert rows.loc[2, "parallel_efficiency_fraction"] == pytest.approx(0.9)
