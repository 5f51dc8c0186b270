"""nmt_dp (seed 003): 1 and 2 gloo workers on CPU complete through the real worker;
allreduce really averages gradients (identical weights after a step) and independent
replicas do not; words exclude padding; no worker process outlives the cell; precision
follows the glossary (true fp32 recorded as such, bf16 where the LSTMs really compute in it,
`unsupported` with the reason everywhere else)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from orchestrator.worker.context import Unsupported
from orchestrator.workload_registry import load_workload
from tests import cells
from tests.cells import run_workload
from tests.conftest import cell_records, descendants, journal, left_behind, run_cli
from workloads.nmt_dp.workload import (
    PAD,
    Seq2Seq,
    Worker,
    one_step_checksums,
    synthetic_batch,
    words_of,
)

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

TINY = {**{k: v.default for k, v in load_workload("nmt_dp").params.items()},
        **load_workload("nmt_dp").presets["tiny"], "preset": "tiny"}
TRUE_FP32 = {"torch.backends.cuda.matmul.allow_tf32": "False",
             "torch.backends.cudnn.allow_tf32": "False",
             "torch.float32_matmul_precision": "highest", "torch.autocast_dtype": "off"}


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
    before = descendants()
    records = run_workload(tmp_path, "nmt_dp", {**TINY, "workers": 2}, epochs=2)
    assert left_behind(before) == set()
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
    for text in rows["precision_switches"]:  # the default fp32 is true fp32, TF32 off
        assert json.loads(text) == TRUE_FP32
    for impl in ("fused", "unfused"):
        pair = rows[rows["param.rnn_impl"] == impl].set_index("param.workers")
        assert pair.loc[1, "speedup_ratio"] == 1.0
        expected = np.median(rates[(2, impl)]) / np.median(rates[(1, impl)])
        assert pair.loc[2, "speedup_ratio"] == pytest.approx(expected)
        assert pair.loc[2, "parallel_efficiency_fraction"] == pytest.approx(expected / 2)


# Precision ----------------------------------------------------------------------------------------

def worker_run(tmp_path, env=None, **given):
    """One round of a tiny cell through the real worker, in a process of its own."""
    cell = cells.make_cell("nmt_dp", {**TINY, "batches_per_round": 3, **given}, epochs=1)
    done, records = cells.run_worker(tmp_path, cell, env=env)
    by_kind = {}
    for record in records:
        by_kind.setdefault(record["record"], []).append(record)
    return done, by_kind


def test_every_rank_sets_its_own_switches_before_building_its_model():
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = True  # torch's default in a fresh rank process
        torch.backends.cuda.matmul.allow_tf32 = True
        Worker(TINY, rank=1, workers=1, device=torch.device("cpu"))
        assert torch.backends.cudnn.allow_tf32 is False
        assert torch.backends.cuda.matmul.allow_tf32 is False
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.mark.parametrize("precision", ["tf32", "fp16"])
def test_gpu_only_precisions_are_unsupported_on_the_cpu_with_the_reason(tmp_path, precision):
    done, records = worker_run(tmp_path, precision=precision)
    assert done.returncode == 1
    [error] = records["error"]
    assert error["kind"] == "unsupported"
    assert error["message"] == f"precision {precision} needs a GPU"
    assert "measurement" not in records


def test_bf16_fused_runs_where_onednn_has_bf16_kernels_and_is_unsupported_elsewhere(tmp_path):
    done, records = worker_run(tmp_path, rnn_impl="fused", precision="bf16", workers=2)
    if cells.cpu_has_bf16_lstm():
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(records["measurement"]) == 1  # both ranks trained a round in bf16
        [provenance] = records["provenance"]
        assert provenance["precision_switches"] == {**TRUE_FP32, "torch.autocast_dtype":
                                                    "bfloat16"}
    else:
        [error] = records["error"]
        assert error["kind"] == "unsupported"
        assert "precision bf16: nn.LSTM cannot run in bf16 on this CPU" in error["message"]


def test_a_cpu_without_bf16_kernels_makes_a_bf16_cell_unsupported_with_the_reason(tmp_path):
    # oneDNN capped at AVX2 (read when torch loads, so in a worker of its own) stands for a
    # CPU without AVX-512 on a machine that has it.
    done, records = worker_run(tmp_path, env={"ONEDNN_MAX_CPU_ISA": "AVX2"}, rnn_impl="fused",
                               precision="bf16", workers=2)
    assert done.returncode == 1
    [error] = records["error"]
    assert error["kind"] == "unsupported"
    assert "precision bf16: nn.LSTM cannot run in bf16 on this CPU" in error["message"]
    assert "measurement" not in records


def test_a_bf16_cell_loop_on_the_cpu_is_unsupported_not_timed_in_fp32(tmp_path):
    # CPU autocast leaves nn.LSTMCell in fp32: timing it would label fp32 numbers bf16.
    with pytest.raises(Unsupported,
                       match=r"runs nn\.LSTMCell loop in torch\.float32 .* not bf16"):
        run_workload(tmp_path, "nmt_dp", {**TINY, "rnn_impl": "unfused", "precision": "bf16"},
                     epochs=1)
