"""nmt_dp (seed 003): 1 and 2 gloo workers on CPU complete through the real worker;
allreduce really averages gradients (identical weights after a step) and independent
replicas do not; words exclude padding; no worker process outlives the cell."""

from __future__ import annotations

import numpy as np
import pandas as pd
import psutil
import pytest
import torch

from orchestrator.registry import load_workload
from tests.cells import run_workload
from tests.conftest import cell_records, journal, run_cli
from workloads.nmt_dp.workload import PAD, Seq2Seq, one_step_checksums, synthetic_batch, words_of

TINY = {**{k: v.default for k, v in load_workload("nmt_dp").params.items()},
        **load_workload("nmt_dp").presets["tiny"], "preset": "tiny"}


@pytest.mark.parametrize("mode", ["allreduce", "independent"])
def test_two_workers_average_gradients_only_in_allreduce(mode):
    first, second = one_step_checksums({**TINY, "dp_mode": mode}, workers=2)
    if mode == "allreduce":
        assert first == pytest.approx(second, rel=1e-9)
    else:
        assert abs(first - second) > 1e-6


def test_words_are_source_plus_target_without_padding():
    batch = synthetic_batch(TINY, rank=0, step=3, device=torch.device("cpu"))
    real = int((batch.source != PAD).sum() + (batch.target != PAD).sum())
    assert batch.words == real
    assert (batch.source == PAD).any()  # lengths vary, so padding exists to be excluded
    other = synthetic_batch(TINY, rank=1, step=3, device=torch.device("cpu"))
    assert words_of(TINY, workers=2, step=3) == batch.words + other.words


def test_fused_and_unfused_models_have_the_same_shapes_and_outputs_shape():
    fused, unfused = Seq2Seq({**TINY, "rnn_impl": "fused"}), Seq2Seq({**TINY,
                                                                      "rnn_impl": "unfused"})
    assert sum(p.numel() for p in fused.parameters()) == \
        sum(p.numel() for p in unfused.parameters())
    batch = synthetic_batch(TINY, 0, 0, torch.device("cpu"))
    for model in (fused, unfused):
        logits = model(batch.source, batch.decoder_input)
        assert logits.shape == (TINY["batch_size"], TINY["tgt_len"], TINY["tgt_vocab"])


def test_one_and_two_workers_complete_and_leave_no_process(tmp_path):
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    records = run_workload(tmp_path, "nmt_dp", {**TINY, "workers": 2}, epochs=2)
    after = {c.pid for c in psutil.Process().children(recursive=True)}
    assert after - before == set()
    epochs = [r for r in records if r["record"] == "measurement"]
    assert [e["epoch"] for e in epochs] == [1, 2]
    # round 1 is steps 0-5 with step 0 warm-up: its words are both workers' steps 1-5
    assert epochs[0]["items"] == sum(words_of(TINY, 2, step) for step in range(1, 6))
    assert epochs[1]["items"] == sum(words_of(TINY, 2, step) for step in range(7, 12))


def test_a_sweep_over_workers_and_implementations_runs_through_the_worker(tmp_path):
    (tmp_path / "m.yaml").write_text("""
name: nmt
hardware: [{name: cpu, kind: local}]
stacks: [{name: here, executor: process}]
workloads:
  - name: nmt_dp
    preset: tiny
    epochs: 2
    params: {workers: [1, 2], rnn_impl: [fused, unfused]}
""")
    done = run_cli("run", "m.yaml", "--no-ray", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "reports" / "nmt"
    cells = cell_records(run_dir)
    assert len(cells) == 4 and {c["status"] for c in cells} == {"ok"}, cells
    rates = {(c["param.workers"], c["param.rnn_impl"]): [
        r["items_per_s"] for r in journal(run_dir)
        if r["record"] == "measurement" and r["cell_id"] == c["cell_id"]] for c in cells}
    assert all(len(v) == 2 and min(v) > 0 for v in rates.values())
    # the report's scaling: 2 workers against the 1-worker twin of the same implementation
    rows = pd.read_parquet(run_dir / "results.parquet").drop_duplicates("config_id")
    for impl in ("fused", "unfused"):
        pair = rows[rows["param.rnn_impl"] == impl].set_index("param.workers")
        assert pair.loc[1, "speedup_ratio"] == 1.0
        expected = np.median(rates[(2, impl)]) / np.median(rates[(1, impl)])
        assert pair.loc[2, "speedup_ratio"] == pytest.approx(expected)
        assert pair.loc[2, "parallel_efficiency_fraction"] == pytest.approx(expected / 2)
