"""The report: per-workload medians over a configuration's samples, spread and noisy
mark, failures with their reasons, and sections that keep workloads apart."""

from __future__ import annotations

import pytest

from orchestrator.report.analysis import config_summary
from orchestrator.report.frame import run_frame
from orchestrator.report.writer import render
from orchestrator.results.records import CellRecord, MeasurementRecord, ProvenanceRecord
from orchestrator.results.run_directory import RunDirectory


def add_cell(store: RunDirectory, cell_id: str, config_id: str, workload: str,
             rates: list[float], params: dict, status: str = "ok", repeat: int = 1,
             error: str | None = None, flags: tuple[str, ...] = ()) -> None:
    ident = {"run": "r", "cell_id": cell_id, "config_id": config_id, "repeat": repeat}
    unit = "word" if workload == "lstm_lm" else "sample"
    measurements = [MeasurementRecord(**ident, epoch=i + 1, train_s=2.0, items=2.0 * rate,
                                      item_unit=unit, items_per_s=rate)
                    for i, rate in enumerate(rates)]
    cell = CellRecord(**ident, status=status, started_at="2026-11-22T00:00:00+00:00",
                      wall_s=5.0, hardware="box", stack="here", workload=workload, error=error,
                      flags=list(flags), **{f"param.{k}": v for k, v in params.items()})
    store.append([ProvenanceRecord(**ident, hostname="box"), *measurements, cell])


@pytest.fixture
def store(tmp_path) -> RunDirectory:
    store = RunDirectory(tmp_path / "run")
    store.root.mkdir()
    # lstm_lm batch 16: two repeats, samples 100, 102, 98, 100 -> median 100, spread 4%
    add_cell(store, "a1", "cfg16", "lstm_lm", [100, 102], {"batch_size": 16}, repeat=1)
    add_cell(store, "a2", "cfg16", "lstm_lm", [98, 100], {"batch_size": 16}, repeat=2)
    # lstm_lm batch 32: samples 200 and 300 -> median 250, spread 40%: noisy
    add_cell(store, "b1", "cfg32", "lstm_lm", [200, 300], {"batch_size": 32})
    add_cell(store, "c1", "cfgsleep", "sleep", [4.0], {"seconds": 1.0})
    add_cell(store, "d1", "cfgfail", "sleep", [], {"seconds": 2.0}, status="timeout",
             error="no result within the cell's timeout (3 s)")
    return store


def test_medians_and_spread_per_configuration(store):
    ok = run_frame(store).query("status == 'ok' and workload == 'lstm_lm'")
    summary = config_summary(ok).set_index("config_id")
    assert summary.loc["cfg16", "items_per_s"] == 100
    assert summary.loc["cfg16", "spread"] == pytest.approx(0.04)
    assert (summary.loc["cfg16", "samples"], summary.loc["cfg16", "repeats"]) == (4, 2)
    assert summary.loc["cfg32", "items_per_s"] == 250
    assert summary.loc["cfg32", "flags"] == "noisy" and summary.loc["cfg16", "flags"] == ""


def test_the_report_has_a_section_per_workload_and_lists_failures(store):
    text = render(run_frame(store), "r")
    lstm = text.split("## lstm_lm")[1].split("## ")[0]
    assert "| box | here | 16 | 4 (2x) |" in lstm and "| 100 | 4.0% |" in lstm
    assert "| 250 | 40.0% |" in lstm and "noisy" in lstm
    assert "train words/s" in lstm and "seconds" not in lstm  # no other workload's params
    sleep = text.split("## sleep")[1].split("## ")[0]
    assert "train samples/s" in sleep and "batch_size" not in sleep
    failures = text.split("## Cells that did not finish ok (1)")[1]
    assert "timeout" in failures and "within the cell's timeout" in failures
    assert "logs/d1.log" in failures


CONTENDED = ("contended: in epoch 1, 0.99 of its threads on average waited for a CPU while "
             "other processes used 0.99 cores of the CPUs it ran on")


def test_a_flag_the_executor_gave_a_cell_has_its_reason_under_the_row(store):
    # the second repeat of batch 16 was contended and oversubscribed; sleep claimed a bound
    add_cell(store, "a3", "cfg16", "lstm_lm", [99, 101], {"batch_size": 16}, repeat=3,
             flags=("contended", "oversubscribed"),
             error=f"{CONTENDED}; oversubscribed: 3 workers on 2 CPU cores")
    add_cell(store, "a4", "cfg16", "lstm_lm", [99, 101], {"batch_size": 16}, repeat=4,
             flags=("contended",), error=CONTENDED.replace("0.99", "0.50"))
    text = render(run_frame(store), "r")
    lstm = text.split("## lstm_lm")[1].split("## ")[0].splitlines()
    row = next(i for i, line in enumerate(lstm) if line.startswith("| box | here | 16 |"))
    assert "contended,oversubscribed" in lstm[row]
    # each kind of reason once, from the first cell that gave it
    assert lstm[row + 1].startswith(
        f"| ↳ {CONTENDED}; oversubscribed: 3 workers on 2 CPU cores |"), lstm[row + 1]
    other = next(i for i, line in enumerate(lstm) if line.startswith("| box | here | 32 |"))
    assert not lstm[other + 1].startswith("| ↳")  # noisy: its why is in the spread column
