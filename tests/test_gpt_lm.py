"""`gpt_lm`: its FLOP model against torch's own FLOP counter, its ranks under DDP and FSDP2
over gloo, a real sweep of its `tiny` preset, and the configurations validate refuses."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from orchestrator.workload_registry import load_workload
from tests.conftest import assert_statuses, descendants, left_behind, run_cli, write
from workloads.gpt_lm.flops import flops_per_item
from workloads.gpt_lm.model import build
from workloads.gpt_lm.workload import one_step_checksums

pytestmark = pytest.mark.slow


def params(**given: object) -> dict:
    return load_workload("gpt_lm").resolve(given)  # type: ignore[arg-type]


def counted_flops_per_token(p: dict, device: str) -> float:
    """torch's count of one training step's FLOPs (forward and backward), per token; the
    math attention kernel, whose matrix products the counter sees on any device."""
    model = build(p, device)
    tokens = torch.randint(0, p["vocab"], (2, p["context"] + 1), device=device)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(tokens[:, :-1], tokens[:, 1:]).backward()
    return counter.get_total_flops() / (2 * p["context"])


@pytest.mark.parametrize(("preset", "device"), [("tiny", "cpu"), ("gpt2", "meta"),
                                                ("gpt2-xl", "meta")])
def test_the_flop_model_agrees_with_torchs_counter_within_2_percent(preset, device):
    p = params(preset=preset)
    counted = counted_flops_per_token(p, device)
    assert flops_per_item(p) == pytest.approx(counted, rel=0.02), (flops_per_item(p), counted)


def test_gpt2_small_is_the_published_size():
    model = build(params(preset="gpt2"), "meta")
    total = sum(p.numel() for p in model.parameters())  # tied: the embedding counted once
    assert total == 124_439_808  # GPT-2 small, as Hugging Face's gpt2 checkpoint holds it


def test_two_gloo_ranks_hold_equal_weights_after_a_step_under_ddp_and_fsdp_alike():
    before = descendants()
    ddp = one_step_checksums({**params(preset="tiny"), "dp_mode": "ddp"}, 2)
    fsdp = one_step_checksums({**params(preset="tiny"), "dp_mode": "fsdp"}, 2)
    assert ddp[0] == ddp[1] and fsdp[0] == fsdp[1]  # every rank holds the same model
    assert fsdp[0] == pytest.approx(ddp[0], rel=1e-9)  # and both train the same model
    untrained = build(params(preset="tiny"), "cpu")
    with torch.no_grad():
        assert ddp[0] != pytest.approx(sum(float(p.double().sum())
                                           for p in untrained.parameters()))
    assert left_behind(before) == set()  # both complete and leave no process


def test_tiny_runs_on_the_cpu_with_exact_tokens_and_mfu(tmp_path):
    path = write(tmp_path / "m.yaml", """
        name: gpt
        hardware: [{name: cpu, kind: local}]
        stacks: [{name: here, executor: process}]
        workloads:
          - name: gpt_lm
            preset: tiny
            params: {workers: [1, 2], dp_mode: ddp, steps_per_epoch: 4, warmup_steps: 1}
            epochs: 1
        """)
    done = run_cli("run", str(path), "--no-ray", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "reports" / "gpt"
    assert_statuses(run_dir, ["ok", "ok"])
    rows = pd.read_parquet(run_dir / "results.parquet").sort_values("param.workers")
    # 3 timed steps of 4 sequences of 128 tokens on each rank
    assert list(rows["items"]) == [3 * 4 * 128 * 1, 3 * 4 * 128 * 2]
    assert list(rows["item_unit"]) == ["token", "token"]
    assert list(rows["tokens_per_s_per_rank"] * rows["param.workers"]) == pytest.approx(
        list(rows["items_per_s"]))
    assert (rows["flops_per_item"] == flops_per_item(params(preset="tiny"))).all()
    assert rows["peak_fraction"].between(0, 1).all()  # the MFU, against the CPU's peak
    assert (rows["rank_mem_peak_max_bytes"] > 50 * 2**20).all()
    # a CPU cell used no CUDA, whatever build of torch ran it
    assert "cuda" not in rows or rows["cuda"].isna().all()
    # an ok cell's log says what ran, where, and each epoch's figures
    (one,) = rows[rows["param.workers"] == 1]["cell_id"]
    log = (run_dir / "logs" / f"{one}.log").read_text()
    assert f"matrix-bench: cell {one} (repeat 1), gpt_lm 1: " in log
    assert "matrix-bench: epoch 1/1: " in log and "over 3 timed steps (1,536 tokens" in log
    assert "matrix-bench: ran with torch " in log


@pytest.mark.parametrize(("hardware", "entry", "where", "problem"), [
    ("gpus: 1", "params: {workers: 2}", "workloads[0].params.workers",
     "2 ranks need a GPU each; the hardware gives the cell 1 (on box)"),
    ("gpus: 0", "params: {dp_mode: fsdp}", "workloads[0].params.dp_mode",
     "fsdp shards the model over the ranks, and this cell has one"),
    ("gpus: 0", "preset: tiny, params: {context: 256}", "workloads[0].params.context",
     "context 256 is longer than the model's 128 positions (max_context, tiny preset)"),
])
def test_a_configuration_gpt_lm_cannot_train_is_one_line(tmp_path, hardware, entry, where,
                                                        problem):
    path = write(tmp_path / "m.yaml", f"""
        name: bad
        hardware: [{{name: box, kind: local, {hardware}}}]
        stacks: [{{name: here, executor: process}}]
        workloads: [{{name: gpt_lm, {entry}}}]
        """)
    done = run_cli("validate", str(path), cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {path}:4: {where}: ") and problem in line, line


def test_activation_checkpointing_recomputes_the_same_gradients():
    p = params(preset="tiny")
    tokens = torch.randint(0, p["vocab"], (2, p["context"] + 1),
                           generator=torch.Generator().manual_seed(0))
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(p["seed"])
        model = build({**p, "activation_checkpointing": checkpointing}, "cpu")
        model(tokens[:, :-1], tokens[:, 1:]).backward()
        grads.append(torch.cat([q.grad.flatten() for q in model.parameters()]))
    assert torch.allclose(grads[0], grads[1], rtol=1e-5, atol=1e-7)


def test_a_token_file_gives_windows_of_its_ids_and_refuses_ids_beyond_the_vocab(tmp_path):
    import numpy as np

    from workloads.gpt_lm.workload import token_source

    path = tmp_path / "train.bin"
    np.arange(1000, dtype=np.uint16).tofile(path)  # id = position: windows are runs
    p = {**params(preset="tiny"), "data": str(path), "context": 16, "vocab": 1000}
    window = token_source(p)(0, 0)
    assert window.shape == (p["batch_size"], 17)
    assert (window[:, 1:] - window[:, :-1] == 1).all()  # consecutive ids of the file
    assert torch.equal(window, token_source(p)(0, 0))  # a function of (seed, rank, step)
    with pytest.raises(ValueError, match="beyond the vocabulary of 10"):
        token_source({**p, "vocab": 10})(0, 0)  # every window of 17 holds an id >= 16
