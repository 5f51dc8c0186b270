"""Every row judged when the report is made (issue 21): journal records with no peak fields
and no flags, as another tool or an older version writes them, fed to `matrix report`."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from orchestrator.results.records import CellRecord, MeasurementRecord, ProvenanceRecord, Status
from orchestrator.results.run_directory import RunDirectory
from tests.conftest import run_cli

GIB = 1024 ** 3
# Seed 000's P100 row: the 1-layer LSTM-1024 language model on WikiText-2, batch 128 x 128,
# fp32, 547,106 train words/s on a Tesla P100-SXM2-16GB (fp32 peak 10.6 TFLOP/s).
SEED_000 = {"dataset": "wikitext2", "emb_dim": 1024, "hidden": 1024, "layers": 1,
            "batch_size": 128, "seq_len": 128, "precision": "fp32"}


def journal_cell(store: RunDirectory, cell_id: str, workload: str, hardware: str,
                 params: dict, rate: float, unit: str, gpu_model: str | None = None,
                 gpus: int = 0, extra: dict | None = None, instance_type: str | None = None,
                 config_id: str | None = None, provenance: dict | None = None) -> None:
    ident = {"run": "judged", "cell_id": cell_id, "config_id": config_id or cell_id,
             "repeat": 1}
    store.append([
        ProvenanceRecord(**ident, gpu_model=gpu_model, gpu_count=gpus or None, cpu_count=2,
                         instance_type=instance_type, **(provenance or {})),
        *(MeasurementRecord(**ident, epoch=epoch, train_s=100.0, items=rate * 100,
                            item_unit=unit, items_per_s=rate, **(extra or {}))
          for epoch in (1, 2)),
        CellRecord(**ident, status=Status.OK, started_at="2026-11-23T00:00:00+00:00",
                   wall_s=200.0, hardware=hardware, stack="here", workload=workload,
                   **{f"param.{k}": v for k, v in params.items()})])


def report_of(store: RunDirectory, tmp_path) -> tuple[str, pd.DataFrame]:
    done = run_cli("report", str(store.root), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return ((store.root / "report.md").read_text(),
            pd.read_parquet(store.root / "results.parquet"))


def new_store(tmp_path) -> RunDirectory:
    store = RunDirectory(tmp_path / "judged")
    store.root.mkdir()
    return store


def test_seed_000s_p100_row_is_judged_implausible_with_its_factor_and_is_no_best_choice(
        tmp_path):
    store = new_store(tmp_path)
    journal_cell(store, "p100", "lstm_lm", "p100", SEED_000, 547_106, "word",
                 gpu_model="Tesla P100-SXM2-16GB", gpus=1)
    journal_cell(store, "cpu", "lstm_lm", "laptop", SEED_000, 2_000, "word")
    report, rows = report_of(store, tmp_path)

    p100 = rows[rows["cell_id"] == "p100"]
    assert (p100["flags"] == "implausible").all()
    factor = 547_106 * 3 * (2 * 4 * 1024 * 2048 + 2 * 1024 * 33278) / 10.6e12
    assert p100["peak_fraction"].iloc[0] == factor  # about 13x
    assert 13 < factor < 14
    line = next(ln for ln in report.splitlines() if ln.startswith("| ↳ implausible"))
    assert f"{factor:.1f}x the fp32 peak of Tesla P100-SXM2-16GB (10.6 TFLOP/s" in line
    # Under the row in the workload table and in seed 000's own table.
    seed_table = report.split("### As seed 000 published it")[1].split("###")[0]
    assert "| p100 | 547,106 |" in seed_table and "↳ implausible: 13." in seed_table
    choices = report.split("## Best choices")[1].split("\n## ")[0]
    assert "547,106" not in choices and "| lstm_lm | fastest | laptop | 2,000 words/s |" in choices
    assert "## Implausible figures (1)" in report


def test_a_stored_peak_fraction_without_a_flag_is_judged_again(tmp_path):
    store = new_store(tmp_path)
    journal_cell(store, "p100", "lstm_lm", "p100", SEED_000, 547_106, "word",
                 gpu_model="Tesla P100-SXM2-16GB", gpus=1,
                 extra={"peak_flops": 10.6e12, "peak_fraction": 13.151, "peak_source":
                        "datasheet"})
    report, rows = report_of(store, tmp_path)
    assert (rows["flags"] == "implausible").all()
    assert "fastest" not in report


def test_a_speedup_above_the_worker_count_is_implausible(tmp_path):
    store = new_store(tmp_path)
    params = {"preset": "tiny", "dp_mode": "allreduce"}
    journal_cell(store, "one", "nmt_dp", "laptop", {**params, "workers": 1}, 100, "word",
                 config_id="w1")
    journal_cell(store, "two", "nmt_dp", "laptop", {**params, "workers": 2}, 1_450, "word",
                 config_id="w2")
    report, rows = report_of(store, tmp_path)
    two = rows[rows["cell_id"] == "two"]
    assert two["speedup_ratio"].iloc[0] == 14.5
    assert (two["flags"] == "implausible").all()
    assert (rows[rows["cell_id"] == "one"]["flags"] == "").all()
    assert "speedup 14.50x on 2 devices (efficiency 725%, above 100% + 10%)" in \
        two["judgement"].iloc[0]
    scaling = report.split("### Scaling, as seed 003 published it")[1]
    assert "↳ implausible: speedup 14.50x" in scaling
    assert "| nmt_dp | fastest | laptop workers=1 | 100 words/s |" in report


def test_memory_above_the_device_is_implausible(tmp_path):
    store = new_store(tmp_path)
    journal_cell(store, "big", "sleep", "t4", {"seconds": 1.0}, 5, "sample",
                 gpu_model="Tesla T4", gpus=1,
                 extra={"mem_alloc_peak_bytes": 40 * GIB})
    journal_cell(store, "host", "sleep", "g4dn", {"seconds": 2.0}, 5, "sample",
                 instance_type="g4dn.xlarge", extra={"host_rss_peak_bytes": 64 * GIB})
    journal_cell(store, "fits", "sleep", "laptop", {"seconds": 3.0}, 5, "sample",
                 gpu_model="NVIDIA A100-SXM4-40GB", gpus=1,
                 extra={"mem_alloc_peak_bytes": 39 * GIB})
    _, rows = report_of(store, tmp_path)
    judged = rows.drop_duplicates("cell_id").set_index("cell_id")
    assert re.search(r"40\.0 GiB of GPU memory on a Tesla T4 that holds 16 GiB \(2\.5x\)",
                     judged.loc["big", "judgement"])
    assert "64.0 GiB resident on a g4dn.xlarge with 16 GiB of memory (4.0x)" in \
        judged.loc["host", "judgement"]
    assert judged.loc["fits", "flags"] == "" and judged.loc["fits", "judgement"] == ""


def test_a_bus_bandwidth_above_the_link_between_nodes_is_implausible(tmp_path):
    store = new_store(tmp_path)

    def across(cell_id: str, busbw: float, instance_type: str | None = None,
               link: float | None = None) -> None:
        journal_cell(store, cell_id, "sleep", cell_id, {"seconds": 1.0}, 5, "sample",
                     instance_type=instance_type,
                     provenance={"nodes": 2, "world_size": 2, "net_busbw_gbs": busbw,
                                 "net_link_gbps": link})

    across("fast", 60.0, instance_type="p4d.24xlarge")  # 400 Gbit/s: 50 GB/s
    across("stated", 2.0, link=10.0)  # its entry's net_gbps: 1.25 GB/s
    across("honest", 45.0, instance_type="p4d.24xlarge")
    across("loopback", 3.0)  # two nodes of one machine: no link stated, nothing to judge
    _, rows = report_of(store, tmp_path)
    judged = rows.drop_duplicates("cell_id").set_index("cell_id")
    assert "all-reduce bus bandwidth 60 GB/s between nodes linked at 400 Gbit/s (50 GB/s; " \
        "1.2x)" in judged.loc["fast", "judgement"]
    assert "implausible" in judged.loc["fast", "flags"]
    assert "(1.25 GB/s; 1.6x)" in judged.loc["stated", "judgement"]
    for honest in ("honest", "loopback"):
        assert judged.loc[honest, "flags"] == "" and judged.loc[honest, "judgement"] == ""


def test_the_network_workloads_own_bus_bandwidth_is_held_to_the_link_across_nodes(tmp_path):
    store = new_store(tmp_path)

    def network(cell_id: str, busbw: float, nodes: int) -> None:
        journal_cell(store, cell_id, "network", cell_id, {"size_mib": 32.0}, busbw * 1e9,
                     "byte", extra={"busbw_gbs": busbw},
                     provenance={"nodes": nodes, "world_size": nodes, "net_link_gbps": 10.0})

    network("faster", 5.0, nodes=2)  # 40 Gbit/s over a 10 Gbit/s link
    network("within", 1.2, nodes=2)
    network("one-node", 5.0, nodes=1)  # its ranks met over loopback: no link to hold it to
    _, rows = report_of(store, tmp_path)
    judged = rows.drop_duplicates("cell_id").set_index("cell_id")
    assert "implausible: the epoch's all-reduce bus bandwidth 5 GB/s between nodes linked " \
        "at 10 Gbit/s (1.25 GB/s; 4.0x)" in judged.loc["faster", "judgement"]
    assert "implausible" in judged.loc["faster", "flags"]
    for honest in ("within", "one-node"):
        assert judged.loc[honest, "flags"] == "" and judged.loc[honest, "judgement"] == ""


def test_an_unknown_gpu_shows_no_peak_and_is_not_flagged(tmp_path):
    store = new_store(tmp_path)
    journal_cell(store, "new", "lstm_lm", "mystery", SEED_000, 547_106, "word",
                 gpu_model="NVIDIA RTX A1000", gpus=1)
    report, rows = report_of(store, tmp_path)
    assert rows["peak_fraction"].isna().all() and (rows["flags"] == "").all()
    assert rows["peak_note"].iloc[0] == "unknown GPU model 'NVIDIA RTX A1000'"
    assert "| no peak |" in report


def test_a_cpu_rows_own_peak_estimate_is_what_it_is_judged_against(tmp_path):
    """The node that ran a CPU cell estimated its own CPU's peak (its clock, its FMA width):
    the report keeps that, not the generic per-core ceiling of any CPU."""
    store = new_store(tmp_path)
    node_peak = 3.3e11
    journal_cell(store, "cpu", "lstm_lm", "laptop", SEED_000, 2_000, "word",
                 extra={"peak_flops": node_peak, "peak_source": "estimate"})
    journal_cell(store, "old", "lstm_lm", "laptop", {**SEED_000, "batch_size": 64}, 2_000,
                 "word")  # recorded without a peak: the ceiling of any CPU of its cores
    _, rows = report_of(store, tmp_path)
    own = rows[rows["cell_id"] == "cpu"]
    assert (own["peak_flops"] == node_peak).all() and (own["peak_note"] == "this CPU").all()
    assert (own["peak_fraction"] == own["achieved_flops"] / node_peak).all()
    old = rows[rows["cell_id"] == "old"]
    assert (old["peak_note"] == "any CPU of 2 cores").all()
    assert (old["peak_flops"] > node_peak).all()


# GPT-2 small as gpt_lm resolves it: 854,438,400 FLOP per token by its model (flops.py)
GPT2 = {"preset": "gpt2", "n_layer": 12, "n_head": 12, "d_model": 768, "max_context": 1024,
        "context": 1024, "vocab": 50257, "batch_size": 8, "precision": "bf16",
        "compile": True, "activation_checkpointing": False, "dp_mode": "ddp", "workers": 0,
        "data": "synthetic", "steps_per_epoch": 50, "warmup_steps": 5, "lr": 0.0006,
        "seed": 1337}
H100 = "NVIDIA H100 80GB HBM3"


def gpt2_row(store: RunDirectory, cell_id: str, rate: float, flops: float,
             version: str | None) -> None:
    ident = {"run": "judged", "cell_id": cell_id, "config_id": cell_id, "repeat": 1}
    store.append([
        ProvenanceRecord(**ident, gpu_model=H100, gpu_count=1, workload_version=version),
        MeasurementRecord(**ident, epoch=1, train_s=10.0, items=rate * 10, item_unit="token",
                          items_per_s=rate, flops_per_item=flops),
        CellRecord(**ident, status=Status.OK, started_at="2026-11-23T00:00:00+00:00",
                   wall_s=20.0, hardware="h100", stack="here", workload="gpt_lm",
                   **{f"param.{k}": v for k, v in GPT2.items()})])


def test_a_recorded_flop_count_cannot_hide_an_impossible_mfu(tmp_path):
    # 1.5 M tokens/s of GPT-2 small is 129.5% of the H100's 989.4 dense bf16 TFLOP/s; a row
    # that recorded 1e8 FLOP per token claimed 15.2%, and was named fastest
    store = new_store(tmp_path)
    gpt2_row(store, "hand", 1_500_000, 1e8, version="1")
    gpt2_row(store, "honest", 400_000, 854_438_400, version="1")
    report, rows = report_of(store, tmp_path)
    hand = rows[rows["cell_id"] == "hand"].iloc[0]
    assert hand["flags"] == "implausible"
    assert hand["peak_fraction"] == pytest.approx(1.295, abs=0.001)
    assert "recorded 1e+08 FLOP per item, the model says 8.54e+08" in hand["judgement"]
    assert "1.3x the bf16 peak" in hand["judgement"]
    honest = rows[rows["cell_id"] == "honest"].iloc[0]
    assert not honest["flags"] and pd.isna(honest["flops_note"])
    choices = report.split("## Best choices")[1].split("\n## ")[0]
    assert "400,000" in choices and "1,500,000" not in choices  # the honest row is fastest


def test_a_count_from_a_revised_model_is_noted_not_flagged(tmp_path):
    # recorded under an earlier version of the workload (or before rows named theirs): the
    # model was revised since; the row is judged with today's model and says so
    store = new_store(tmp_path)
    gpt2_row(store, "old", 400_000, 854_438_400 * 1.2, version="0")
    gpt2_row(store, "unnamed", 400_000, 854_438_400 * 1.2, version=None)
    _, rows = report_of(store, tmp_path)
    for cell in ("old", "unnamed"):
        row = rows[rows["cell_id"] == cell].iloc[0]
        assert not row["flags"], row["judgement"]
        assert row["flops_note"].startswith("FLOP model revised: recorded 1.03e+09")
        assert row["achieved_flops"] == pytest.approx(400_000 * 854_438_400)


def test_without_a_model_the_recorded_count_is_the_workloads_own_claim(tmp_path):
    store = new_store(tmp_path)
    journal_cell(store, "s", "sleep", "laptop", {"seconds": 1.0}, 10.0, "sample",
                 extra={"flops_per_item": 1e6})
    report, rows = report_of(store, tmp_path)
    assert rows.iloc[0]["flops_note"] == "the workload's own FLOP count (no model)"
    assert "↳ the workload's own FLOP count (no model)" in report


def a100_row(store: RunDirectory, cell_id: str, params: dict, devices_used: int | None) -> None:
    """gpt_lm GPT-2 small in bf16 at 150,000 tokens/s on a node of 8 A100s: 128.2 TFLOP/s."""
    ident = {"run": "judged", "cell_id": cell_id, "config_id": cell_id, "repeat": 1}
    store.append([
        ProvenanceRecord(**ident, gpu_model="NVIDIA A100-SXM4-80GB", gpu_count=8,
                         devices_used=devices_used, workload_version="1"),
        MeasurementRecord(**ident, epoch=1, train_s=10.0, items=1_500_000, item_unit="token",
                          items_per_s=150_000),
        CellRecord(**ident, status=Status.OK, started_at="2026-11-23T00:00:00+00:00",
                   wall_s=20.0, hardware="a100x8", stack="here", workload="gpt_lm",
                   **{f"param.{k}": v for k, v in {**GPT2, **params}.items()})])


def test_the_peak_is_the_devices_the_cell_used_not_the_nodes(tmp_path):
    store = new_store(tmp_path)
    a100_row(store, "recorded", {"workers": 1}, devices_used=1)
    a100_row(store, "older", {"workers": 1}, devices_used=None)  # before devices_used
    a100_row(store, "all", {"workers": 0}, devices_used=None)  # 0: one rank per GPU
    report, rows = report_of(store, tmp_path)
    by_cell = rows.set_index("cell_id")
    for cell in ("recorded", "older"):  # 41.1%, not the 5.1% of eight A100s
        assert by_cell.loc[cell, "peak_fraction"] == pytest.approx(0.411, abs=0.001)
        assert by_cell.loc[cell, "peak_note"] == \
            "NVIDIA A100-SXM4-80GB (1 of the node's 8 GPUs used)"
    assert by_cell.loc["all", "peak_fraction"] == pytest.approx(0.411 / 8, abs=0.001)
    assert by_cell.loc["all", "peak_note"] == "8 x NVIDIA A100-SXM4-80GB"
    # gpt_lm's own table counts the ranks each configuration ran
    ranks = re.findall(r"^\| a100x8 \| (\d+) \| 150,000 \|", report, re.MULTILINE)
    assert sorted(ranks) == ["1", "1", "8"], report


def test_a_cpu_rank_count_of_zero_is_one_rank(tmp_path):
    # workers: 0 means one rank per GPU, or 1 on a CPU; the table said 0
    store = new_store(tmp_path)
    journal_cell(store, "cpu", "gpt_lm", "laptop", {**GPT2, "precision": "fp32"}, 500.0,
                 "token")
    report, _ = report_of(store, tmp_path)
    assert re.search(r"^\| laptop \| 1 \| 500 \|", report, re.MULTILINE), report


def test_small_rates_keep_their_significant_digits_everywhere():
    from orchestrator.report.markdown import fmt_rate

    # transformer_ft at 1.204 samples/s showed "1"; sleep at 1.999 steps/s showed "2"
    assert [fmt_rate(v) for v in (1.204, 1.999, 999.54, 1000.4, 547_106.0)] == \
        ["1.204", "1.999", "999.5", "1,000", "547,106"]


def test_a_metric_in_bytes_is_shown_in_mib_like_every_memory_column(tmp_path):
    store = new_store(tmp_path)
    journal_cell(store, "cpu", "gpt_lm", "laptop", {**GPT2, "precision": "fp32"}, 500.0,
                 "token", extra={"rank_mem_peak_max_bytes": 403_171_328.0,
                                 "tokens_per_s_per_rank": 500.0})
    report, _ = report_of(store, tmp_path)
    assert "rank_mem_peak_max MiB" in report and "| 384 |" in report
    assert "403,171,328" not in report
