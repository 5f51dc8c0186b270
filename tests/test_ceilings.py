"""Each node's own ceiling (issue 40): dense products measured once per node, hardware,
stack, precision and framework in a run, every row's FLOP/s read against it beside the
datasheet, and the two flags it makes possible: `above_ceiling` (a row faster than its
node's measured ceiling: here, a journal whose probe was disturbed) and `below_datasheet`
(a GPU whose ceiling is under 60% of its datasheet: here, the honest H100 row of
tests/journals/impossible/ on a node that measured 395 of 989.5 bf16 TFLOP/s)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.hardware.peaks import cpu_peak_estimate
from orchestrator.report.ceilings import with_ceilings
from orchestrator.report.markdown import fmt_pct
from orchestrator.worker.ceiling import NoCeiling, measure
from tests.conftest import PROJECT, cell_records, journal, run_cli

IMPOSSIBLE = Path(__file__).parent / "journals" / "impossible"

MATRIX = """\
name: ceilings
hardware: [{name: box, kind: local}]
stacks: [{name: here, executor: process}]
workloads:
  - name: lstm_lm
    preset: tiny
    dataset: synthetic
    params: {batch_size: [16, 32], synthetic_tokens: 20000, eval_tokens: 2000}
    epochs: 1
    timeout_s: 300
  - {name: sleep, params: {seconds: 0.1}, epochs: 1}
repeats: 2
"""


@pytest.mark.parametrize("framework", ["torch", "jax", "tensorflow"])
def test_the_probe_measures_dense_products_under_this_cpus_bound(framework):
    found = measure(framework, "fp32", on_gpu=False)
    bound = cpu_peak_estimate("fp32")
    assert bound is not None
    assert 1e9 < found.flops <= bound.flops, (found, bound)
    op = "linear" if framework == "torch" else "matmul"  # torch's as its models compute
    assert found.probe.startswith(f"{framework} fp32 {op} ") and "best of 5" in found.probe
    # its cost is bench/ceiling_cost.py's to measure; here only a hang is bounded
    assert found.precision == "fp32" and 0 < found.cost_s < 120


def test_a_framework_or_precision_without_a_probe_says_why():
    with pytest.raises(NoCeiling, match="framework 'mxnet'"):
        measure("mxnet", "fp32", on_gpu=False)
    with pytest.raises(NoCeiling, match="precision 'int8'"):
        measure("torch", "int8", on_gpu=False)


def test_a_gpu_rows_ceiling_is_its_devices_and_a_cpus_covers_its_cores():
    rows = pd.DataFrame({
        "run": "r", "node": "n", "hardware": ["gpu", "cpu"], "stack": "s",
        "framework": "torch", "param.precision": "bf16",
        "gpu_model": ["NVIDIA H100 80GB HBM3", None],
        "achieved_flops": [700e12, 50e9], "peak_flops": [2 * 989.5e12, 400e9],
        "ceiling_flops": [700e12, 100e9], "ceiling_precision": "bf16",
        "ceiling_probe": "p", "ceiling_cost_s": 3.0})
    found = with_ceilings(rows, devices=pd.Series([2, 4]))  # 2 GPUs; 4 CPU ranks
    assert list(found["ceiling_fraction"]) == pytest.approx([0.5, 0.5])
    assert list(found["ceiling_of_peak"]) == pytest.approx([700 / 989.5, 0.25])


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A sweep of lstm_lm in two configurations, two repeats each, beside `sleep` (no FLOP
    model), on this machine: four cells on one node, hardware, stack and precision."""
    root = tmp_path_factory.mktemp("ceilings")
    (root / "m.yaml").write_text(MATRIX)
    out = root / "run"
    done = run_cli("run", str(root / "m.yaml"), "-o", str(out), "--no-ray", "--db", "none",
                   cwd=PROJECT)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def probes(run_dir: Path) -> list[dict]:
    return [r for r in journal(run_dir) if r["record"] == "provenance" and r.get("ceiling_flops")]


def test_a_run_measures_each_ceiling_once_and_every_row_reads_against_it(run_dir):
    assert {c["status"] for c in cell_records(run_dir)} == {"ok"}
    (probe,) = probes(run_dir)  # one of the four lstm_lm cells measured, the first
    assert probe["ceiling_precision"] == "fp32" and probe["framework"] == "torch"
    assert probe["node"] and 0 < probe["ceiling_cost_s"] < 30
    df = pd.read_parquet(run_dir / "results.parquet")
    lstm = df[df["workload"] == "lstm_lm"]
    assert lstm["cell_id"].nunique() == 4 and lstm["node_ceiling_flops"].notna().all()
    assert (lstm["node_ceiling_flops"] == probe["ceiling_flops"]).all()
    assert list(lstm["ceiling_fraction"]) == pytest.approx(
        list(lstm["achieved_flops"] / probe["ceiling_flops"]))
    assert df.loc[df["workload"] == "sleep", "node_ceiling_flops"].isna().all()
    assert not df["flags"].fillna("").str.contains("ceiling|datasheet").any()
    report = (run_dir / "report.md").read_text()
    table = report.split("## lstm_lm")[1].split("\n## ")[0]
    assert "| % of peak | % of ceiling |" in table
    ceilings = report.split("### Measured ceilings")[1].split("\n## ")[0]
    assert len([line for line in ceilings.splitlines() if line.startswith("| ")
                and " torch | fp32 | " in line]) == 1
    assert "of the estimate" in ceilings  # a CPU's peak is our estimate, and says so


def test_a_rerun_on_the_same_node_keeps_its_ceiling_and_a_new_journal_measures_again(
        run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    matrix = run_dir.parent / "m.yaml"
    again = run_cli("run", str(matrix), "-o", str(copy), "--no-ray", "--db", "none",
                    "--rerun", "--only", "workload=lstm_lm", "--only", "batch_size=16",
                    cwd=PROJECT)
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(probes(copy)) == 1  # the node measured its ceiling already in this run
    df = pd.read_parquet(copy / "results.parquet")
    assert df.loc[df["workload"] == "lstm_lm", "node_ceiling_flops"].notna().all()
    (copy / "results.jsonl").unlink()  # a new run in the same folder
    fresh = run_cli("run", str(matrix), "-o", str(copy), "--no-ray", "--db", "none",
                    "--only", "workload=lstm_lm", "--only", "batch_size=32", cwd=PROJECT)
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    assert [p["ceiling_precision"] for p in probes(copy)] == ["fp32"]


def test_a_disturbed_probe_flags_the_rows_above_it_on_every_path(run_dir, tmp_path):
    copy = tmp_path / "disturbed"
    shutil.copytree(run_dir, copy)
    lines = []
    for record in journal(copy):  # the probe, as if another process had taken the CPU
        if record.get("ceiling_flops"):
            record["ceiling_flops"] = 1e6
        lines.append(json.dumps(record))
    (copy / "results.jsonl").write_text("\n".join(lines) + "\n")
    done = run_cli("report", str(copy), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    df = pd.read_parquet(copy / "results.parquet").drop_duplicates("cell_id")
    above = df[df["flags"].fillna("").str.contains("above_ceiling")]
    assert set(above["cell_id"]) == set(df.loc[df["workload"] == "lstm_lm", "cell_id"])
    assert not above["flags"].str.contains("implausible").any()  # the datasheet bound holds
    assert all(j.startswith("above_ceiling: ") and "x the fp32 ceiling measured on" in j
               for j in above["judgement"])
    report = (copy / "report.md").read_text()
    assert report.count("↳ above_ceiling: ") == 2  # under each configuration
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert run_cli("db", "import", str(copy), "--db", url, cwd=tmp_path).returncode == 0
    trend = json.loads(run_cli("history", "trend", "--db", url, "--format", "json",
                               cwd=tmp_path).stdout)
    lstm = [r for r in trend if r["workload"] == "lstm_lm"]
    assert len(lstm) == 2 and all("above_ceiling" in r["flags"] for r in lstm)
    assert all(r["ceiling_fraction"] > 1.05 and r["judgement"].startswith("above_ceiling: ")
               for r in lstm)
    compare = run_cli("compare", str(run_dir), str(copy), cwd=tmp_path, env={"COLUMNS": "80"})
    assert "% ceil" in compare.stdout and max(map(len, compare.stdout.splitlines()[4:-1])) <= 80


def below_datasheet_journal(target: Path) -> Path:
    """The impossible journal, its honest H100 row on a node that measured 395 bf16
    TFLOP/s (40% of the datasheet's 989.5): a power-capped card."""
    shutil.copytree(IMPOSSIBLE, target)
    lines = []
    for record in journal(target):
        if record["cell_id"] == "h100-gpt" and record["record"] == "provenance":
            record |= {"node": "gpu-b", "ceiling_flops": 395e12, "ceiling_precision": "bf16",
                       "ceiling_probe": "torch bf16 linear 8192x8192x8192 on GPU 0",
                       "ceiling_cost_s": 3.2}
        lines.append(json.dumps(record))
    (target / "results.jsonl").write_text("\n".join(lines) + "\n")
    return target


def test_a_gpu_under_60_percent_of_its_datasheet_is_flagged_below_datasheet(tmp_path):
    run = below_datasheet_journal(tmp_path / "capped")
    assert run_cli("report", str(run), cwd=tmp_path).returncode == 0
    df = pd.read_parquet(run / "results.parquet").drop_duplicates("cell_id").set_index(
        "cell_id")
    row = df.loc["h100-gpt"]
    assert "below_datasheet" in row["flags"] and "implausible" not in row["flags"]
    assert row["ceiling_of_peak"] == pytest.approx(395 / 989.5)
    assert row["ceiling_fraction"] == pytest.approx(row["achieved_flops"] / 395e12)
    assert "below_datasheet: its node gpu-b measured 395.0 bf16 TFLOP/s, 40% of the" in \
        row["judgement"]
    report = (run / "report.md").read_text()
    assert "39.9% (below_datasheet)" in report.split("### Measured ceilings")[1]
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert run_cli("db", "import", str(run), "--db", url, cwd=tmp_path).returncode == 0
    table = run_cli("history", "trend", "--db", url, cwd=tmp_path, env={"COLUMNS": "80"})
    assert "↳ below_datasheet: its node gpu-b" in table.stdout
    assert max(len(line) for line in table.stdout.splitlines()) <= 80


@pytest.mark.slow
def test_the_dashboard_shows_both_fractions_and_the_reason_in_the_browser(tmp_path, browser):
    run = below_datasheet_journal(tmp_path / "capped")
    url = f"sqlite:///{tmp_path / 'site.db'}"
    assert run_cli("db", "import", str(run), "--db", url, cwd=tmp_path).returncode == 0
    done = run_cli("dashboard", "-o", str(tmp_path / "site"), "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert browser.open(tmp_path / "site" / "workload-gpt_lm.html") == []
    rows = browser.js("""
        const table = document.querySelector('#rows-gpt_lm');
        const heads = [...table.querySelectorAll('thead th')].map(th => th.textContent.trim());
        return [...table.querySelectorAll('tbody tr')].map(tr => Object.fromEntries(
            heads.map((h, i) => [h, tr.cells[i].textContent])));""")
    trend = json.loads(run_cli("history", "trend", "--db", url, "--format", "json",
                               cwd=tmp_path).stdout)
    judged = next(r for r in trend if r["configuration"].startswith("h100-b/"))
    capped = next(r for r in rows if r["hardware"] == "h100-b")
    assert capped["% of peak"] == fmt_pct(judged["peak_fraction"]) == "34.7%", capped
    assert capped["% of ceiling"] == fmt_pct(judged["ceiling_fraction"]), capped
    assert judged["ceiling_fraction"] == pytest.approx(0.347 * 989.5 / 395, rel=2e-3)
    assert "below_datasheet: its node gpu-b measured 395.0 bf16 TFLOP/s" in capped["flags"]
    browser.screenshot("ceilings-gpt_lm")
