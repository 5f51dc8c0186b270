"""The report of a fixed, hand-made run (tests/report_fixtures.py) against its golden
markdown, and its figures against the tables they draw.

After an intended change of the report, regenerate the golden file with
MATRIX_BENCH_REGOLD=1 and review its diff like code."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import matplotlib.image
import pytest

from orchestrator.report.frame import run_frame
from orchestrator.report.plots import epoch_time, scaling
from orchestrator.report.writer import workload_summaries, write_report
from tests.report_fixtures import fixture_run

GOLDEN = Path(__file__).parent / "golden" / "report.md"
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    store = fixture_run(tmp_path_factory.mktemp("report") / "fixture")
    df = run_frame(store)
    return store.root, df, write_report(store.root, df, now=NOW).read_text()


def test_the_report_equals_its_golden_markdown(written):
    _, _, text = written
    if os.environ.get("MATRIX_BENCH_REGOLD"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_every_status_and_the_implausible_row_are_shown(written):
    _, df, text = written
    failures = text.split("## Cells that did not finish ok (11)")[1]
    for status in set(df["status"]) - {"ok"}:
        assert f"| {status} | the {status} reason |" in failures
    implausible = text.split("## Implausible figures (1)")[1]
    assert "over the 312 TFLOP/s peak" in implausible
    choices = text.split("## Best choices")[1].split("\n## ")[0]
    assert "bf16" not in choices  # the implausible configuration never wins


def test_scaling_and_cost_columns_are_derived_as_documented(written):
    _, df, _ = written
    fp32 = df[df["param.precision"] == "fp32"].drop_duplicates("config_id")
    by_gpus = dict(zip(fp32["gpu_count"], fp32["speedup_ratio"], strict=True))
    assert by_gpus == pytest.approx({1: 1.0, 2: 1.8, 4: 3.2})
    efficiency = dict(zip(fp32["gpu_count"], fp32["parallel_efficiency_fraction"], strict=True))
    assert efficiency == pytest.approx({1: 1.0, 2: 0.9, 4: 0.8})
    lstm = df[df["workload"] == "lstm_lm"]
    assert lstm["speedup_ratio"].isna().all()  # no GPUs: no scaling to speak of


def test_each_figure_exists_opens_at_800_px_and_draws_the_tables_values(written):
    root, df, text = written
    pngs = sorted((root / "plots").glob("*.png"))
    assert {p.name for p in pngs} >= {"lstm_lm-epoch-time.png", "lstm_lm-memory.png",
                                      "transformer_ft-scaling.png", "transformer_ft-cost.png"}
    for png in pngs:
        assert f"](plots/{png.name})" in text
        height, width, _ = matplotlib.image.imread(png).shape
        assert (width, height) == (800, 450)
    summaries = {w: s for w, s, _ in workload_summaries(df)}
    lstm = summaries["lstm_lm"]
    patches = epoch_time(lstm, "lstm_lm").axes[0].patches
    ordered = lstm.sort_values("hardware")  # c5.18xlarge, c5.xlarge, laptop
    timed, rest = patches[:3], patches[3:]  # each bar: timed steps, the rest stacked on it
    assert [p.get_height() for p in timed] == pytest.approx(ordered["train_s"].tolist())
    tops = [p.get_y() + p.get_height() for p in rest]
    assert tops == pytest.approx(ordered["epoch_s"].tolist())  # the whole epoch
    assert [p.get_height() for p in rest] == pytest.approx([0.07] * 3)  # warm-up + eval
    figure = scaling(summaries["transformer_ft"], "transformer_ft")
    lines = {line.get_label(): line.get_ydata().tolist() for line in figure.axes[0].lines}
    assert lines["ideal"] == [1, 4]
    assert [1.0, 1.8, 3.2] in [pytest.approx(v) for v in lines.values()]
