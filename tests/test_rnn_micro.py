"""The `rnn_micro` workload for real on the CPU: its FLOP model, the seed's grid, the three
implementations computing one function, and measured rounds."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from orchestrator.plan.cells import expand
from orchestrator.results.records import MeasurementRecord
from orchestrator.validate import load_spec
from orchestrator.worker.context import Unsupported
from orchestrator.workload_registry import load_workload
from tests import cells
from workloads.rnn_micro import workload
from workloads.rnn_micro.flops import flops_per_item, forward_flops_per_item

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

PROJECT = Path(__file__).resolve().parent.parent
INFO = load_workload("rnn_micro")
CPU = torch.device("cpu")


def tiny(**given: Any) -> dict[str, Any]:
    return INFO.resolve({"preset": "tiny", **given})


def make_cell(params: dict[str, Any], epochs: int, gpus: int = 0) -> dict[str, Any]:
    return cells.make_cell("rnn_micro", params, epochs, gpus)


def run_cell(tmp_path: Path, params: dict[str, Any], epochs: int,
             gpus: int = 0) -> list[dict[str, Any]]:
    return cells.run_workload(tmp_path, "rnn_micro", params, epochs, gpus)


# FLOP model ----------------------------------------------------------------------------------

def test_flops_match_a_hand_count() -> None:
    seed = INFO.resolve({})
    # One layer, 30 steps, H = 128: per step 4 gates x (128x128 input + 128x128 recurrent)
    # multiply-adds = 131,072 MACs = 262,144 FLOPs; x 30 steps = 7,864,320.
    assert forward_flops_per_item(seed) == 7_864_320
    # Training, in gate GEMMs G = 2 x 4 x 128 x 128 = 131,072 FLOPs per example and step:
    # forward 2G and weight gradients 2G per step (60 G + 60 G), the state gradient G per step
    # but the first (zero initial state: 29 G), no input gradient (the input is data): 149 G.
    assert flops_per_item(seed) == 149 * 131_072 == 19_529_728
    big = {**seed, "seq_len": 200, "hidden": 1024, "layers": 3}
    macs_per_step_layer = 4 * (1024 * 1024 + 1024 * 1024)
    assert forward_flops_per_item(big) == 2 * macs_per_step_layer * 200 * 3 == 10_066_329_600
    # 1200 G forward + 1200 G weight gradients + 3 x 199 G state gradients + 2 x 200 G input
    # gradients (layers 2 and 3), G = 2 x 4 x 1024 x 1024
    assert flops_per_item(big) == (1200 + 1200 + 597 + 400) * 8_388_608 == 28_496_101_376
    assert flops_per_item({**seed, "batch_size": 128}) == flops_per_item(seed)  # per example


# Declaration and the seed's grid ----------------------------------------------------------------

def test_defaults_are_the_seeds_first_cell() -> None:
    seed = INFO.resolve({})
    assert (seed["batch_size"], seed["seq_len"], seed["hidden"], seed["layers"]) == (32, 30, 128, 1)
    assert seed["rnn_impl"] == "fused" and seed["precision"] == "fp32"
    assert INFO.item_unit == "example" and INFO.epochs == 3
    assert INFO.metrics == ("us_per_example_train", "us_per_example_fwd")
    assert INFO.params["rnn_impl"].choices == ("fused", "unfused", "compiled")


def test_the_seed_matrix_expands_to_the_seeds_cells() -> None:
    cells = expand(load_spec(PROJECT / "matrix" / "rnn_micro_seed.yaml"))
    assert len(cells) == 2 * 2 * 3 * 2 * 3 == 72
    axes = ("batch_size", "seq_len", "hidden", "layers", "rnn_impl")
    got = sorted(tuple(c.params[a] for a in axes) for c in cells)
    want = sorted(itertools.product([32, 128], [30, 200], [128, 512, 1024], [1, 3],
                                    ["fused", "unfused", "compiled"]))
    assert got == want
    assert len({c.config_id for c in cells}) == 72
    for cell in cells:
        assert cell.hardware.gpus == 1 and cell.stack.effective_executor == "process"
        assert cell.params["precision"] == "fp32" and cell.params["preset"] == "seed"
    # The seed's published tables (depth, batch, seq_len, hidden) are all among them.
    published = ([(1, b, 30, h) for b in (32, 128) for h in (128, 512, 1024)]
                 + [(3, 128, s, h) for s in (30, 200) for h in (512, 1024)])
    have = {(c.params["layers"], c.params["batch_size"], c.params["seq_len"], c.params["hidden"])
            for c in cells}
    assert set(published) <= have and len(published) == 10


# One function, three implementations --------------------------------------------------------

@pytest.mark.parametrize("layers", [1, 2])
def test_fused_and_unfused_agree_on_outputs_and_gradients(layers: int) -> None:
    torch.manual_seed(1)
    fused = workload.Fused(16, layers).double()
    torch.manual_seed(2)  # other weights, until copied: the copy is what makes them agree
    loop = workload.CellLoop(16, layers).double()
    workload.copy_fused_weights(fused, loop)
    x = torch.randn(4, 7, 16, dtype=torch.float64)
    target = torch.randn(4, 7, 16, dtype=torch.float64)
    out_fused, out_loop = fused(x), loop(x)
    torch.testing.assert_close(out_fused, out_loop, rtol=1e-9, atol=1e-12)
    torch.nn.functional.mse_loss(out_fused, target).backward()
    torch.nn.functional.mse_loss(out_loop, target).backward()
    for k, cell in enumerate(loop.cells):  # every layer gets gradients, and the same ones
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            want = getattr(fused.lstm, f"{name}_l{k}").grad
            assert want is not None and want.abs().sum() > 0
            torch.testing.assert_close(getattr(cell, name).grad, want, rtol=1e-9, atol=1e-12)


def test_every_impl_starts_from_the_same_weights_and_data() -> None:
    params = tiny(layers=2)
    fused = workload.setup({**params, "rnn_impl": "fused"}, CPU)
    loop = workload.setup({**params, "rnn_impl": "unfused"}, CPU)
    assert torch.equal(fused.inputs, loop.inputs) and torch.equal(fused.target, loop.target)
    assert fused.inputs.shape == (8, 10, 32)
    torch.testing.assert_close(fused.forward(), loop.forward(), rtol=1e-5, atol=1e-6)


def test_compiled_is_torch_compile_and_computes_the_same_function() -> None:
    # bootstrap.sh --dev installs a C++ compiler, so inductor compiles here for real.
    assert workload.compile_problem(CPU) is None
    params = tiny(layers=2)
    compiled = workload.setup({**params, "rnn_impl": "compiled"}, CPU)
    loop = workload.setup({**params, "rnn_impl": "unfused"}, CPU)
    assert compiled.how == "torch.compile"
    for _ in range(2):
        torch.testing.assert_close(compiled.train_step(), loop.train_step())
    torch.testing.assert_close(compiled.forward(), loop.forward(), rtol=1e-5, atol=1e-6)


def test_compiled_is_unsupported_where_no_compiler_runs_never_another_path(
        tmp_path: Path) -> None:
    cell = make_cell(tiny(rnn_impl="compiled"), epochs=1)
    done, records = cells.run_worker(tmp_path, cell, env={"CXX": "/nonexistent/c++"})
    assert done.returncode == 1, done.stderr  # an error record, not a crash
    (error,) = [r for r in records if r["record"] == "error"]
    assert error["kind"] == "unsupported", error
    assert error["message"].startswith("rnn_impl=compiled needs torch.compile, which cannot "
                                       "run here: No working C++ compiler found"), error
    assert not [r for r in records if r["record"] == "measurement"]


@pytest.mark.parametrize("impl", ["fused", "unfused"])
def test_the_tiny_lstm_really_trains(impl: str) -> None:
    bench = workload.setup(tiny(rnn_impl=impl), CPU)
    losses = [float(bench.train_step()) for _ in range(40)]
    assert all(b < a for a, b in itertools.pairwise(losses))  # plain SGD on one batch
    assert losses[-1] < losses[0] - 1e-3


# Measured rounds ----------------------------------------------------------------------------

@pytest.mark.parametrize("impl", ["fused", "unfused"])
def test_tiny_rounds_are_measured_with_every_declared_column(tmp_path: Path, impl: str) -> None:
    params = tiny(rnn_impl=impl)
    records = run_cell(tmp_path, params, epochs=2)
    assert [r["epoch"] for r in records] == [1, 2]
    for record in records:
        assert record["record"] == "measurement" and record["item_unit"] == "example"
        assert set(INFO.metrics) <= set(record)
        assert record["steps"] == params["timed_steps"] == 10
        assert record["items"] == 10 * params["batch_size"]
        assert record["warmup_steps"] == params["warmup_steps"]
        # the same totals as items/s (docs/MEASUREMENT.md), not the median step
        assert record["us_per_example_train"] == pytest.approx(
            record["train_s"] / record["items"] * 1e6, rel=1e-12)
        # forward and training are timed in rounds of their own, so their figures are never
        # the same totals. No ratio between them is asserted: on a shared 2-core machine a
        # tiny model's forward round came out slower than its training round (81 us against
        # 76 us once in CI; 2,795 us against 386 us beside another test worker).
        assert record["us_per_example_fwd"] > 0
        assert record["us_per_example_fwd"] != pytest.approx(record["us_per_example_train"],
                                                             rel=1e-9)
        assert record["flops_per_item"] == flops_per_item(params)
        assert record["host_rss_peak_bytes"] > 0
        assert "mem_alloc_peak_bytes" not in record  # no CUDA probe on the CPU
        assert "timing_block_steps" not in record  # a step per synchronisation on the CPU
        assert record["epoch_s"] >= record["warmup_s"] + record["train_s"]
        MeasurementRecord(**record, run="test", cell_id="c", config_id="k", repeat=1)


def test_steps_are_timed_in_blocks_on_a_gpu_and_one_by_one_on_the_cpu() -> None:
    assert workload.timing_block_steps(torch.device("cuda")) == workload.TIMING_BLOCK_STEPS
    assert workload.timing_block_steps(torch.device("cuda", 0)) > 1
    assert workload.timing_block_steps(CPU) == 1


def test_a_round_timed_in_blocks_closes_its_last_block_before_the_forward_passes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU's block path, driven on the CPU: 10 timed steps in blocks of 4 (the last one
    partial), then forward passes slowed to 0.1 s each that must stay out of train_s."""
    monkeypatch.setattr(workload, "timing_block_steps", lambda device: 4)
    forward = workload.Bench.forward

    def slow_forward(self: workload.Bench) -> torch.Tensor:
        time.sleep(0.1)
        return forward(self)

    monkeypatch.setattr(workload.Bench, "forward", slow_forward)
    params = tiny()
    [record] = run_cell(tmp_path, params, epochs=1)
    assert record["timing_block_steps"] == 4
    assert record["steps"] == 10 and record["items"] == 10 * params["batch_size"]
    slowed_s = (params["warmup_steps"] + params["timed_steps"]) * 0.1  # the forward passes'
    assert record["train_s"] < slowed_s, "the forward passes ran into the last training block"
    assert record["us_per_example_fwd"] > 0.1 / params["batch_size"] * 1e6
    assert record["epoch_s"] >= record["warmup_s"] + record["train_s"]
    MeasurementRecord(**record, run="test", cell_id="c", config_id="k", repeat=1)


def test_compiled_needs_warmup_for_its_compilation(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="warmup_steps must be at least 2, not 1"):
        run_cell(tmp_path, tiny(rnn_impl="compiled", warmup_steps=1), epochs=1)


def test_bf16_fused_runs_where_onednn_has_bf16_kernels_and_is_unsupported_elsewhere(
        tmp_path: Path) -> None:
    params = tiny(precision="bf16", layers=2)
    if cells.cpu_has_bf16_lstm():
        [record] = run_cell(tmp_path, params, epochs=1)
        assert record["us_per_example_train"] > 0
    else:
        with pytest.raises(Unsupported, match=r"nn\.LSTM cannot run in bf16 on this CPU"):
            run_cell(tmp_path, params, epochs=1)


@pytest.mark.parametrize("rnn_impl", ["unfused", "compiled"])
def test_a_bf16_cell_loop_on_the_cpu_is_unsupported_not_timed_in_fp32(
        tmp_path: Path, rnn_impl: str) -> None:
    # CPU autocast leaves nn.LSTMCell in fp32: timing it would label fp32 numbers bf16.
    with pytest.raises(Unsupported,
                       match=r"runs nn\.LSTMCell loop in torch\.float32 .* not bf16"):
        run_cell(tmp_path, tiny(precision="bf16", rnn_impl=rnn_impl), epochs=1)


def test_gpu_only_precision_is_unsupported_on_the_cpu(tmp_path: Path) -> None:
    with pytest.raises(Unsupported, match="fp16"):
        run_cell(tmp_path, tiny(precision="fp16"), epochs=1)


def test_more_than_one_gpu_is_unsupported(tmp_path: Path) -> None:
    with pytest.raises(Unsupported, match="gpus=2"):
        run_cell(tmp_path, tiny(), epochs=1, gpus=2)


def test_the_worker_runs_a_torch_compiled_cell_end_to_end(tmp_path: Path) -> None:
    """torch.compile for real where it can run (2 cores: about 15 s of compilation from a cold
    inductor cache, 2 s from a warm one)."""
    if workload.compile_problem(CPU) is not None:
        pytest.skip(f"torch.compile cannot run here: {workload.compile_problem(CPU)}")
    done, records = cells.run_worker(tmp_path, make_cell(tiny(rnn_impl="compiled"), epochs=2))
    assert done.returncode == 0, done.stderr
    assert "runs as torch.compile" in done.stdout
    rounds = [r for r in records if r["record"] == "measurement"]
    assert [r["epoch"] for r in rounds] == [1, 2]
    # Compilation happened in round 1's warm-up (seconds, even from inductor's cache), not in
    # a timed step nor in a later round.
    assert rounds[0]["warmup_s"] > 5 * rounds[1]["warmup_s"]
    assert all(r["step_s_p90"] < rounds[0]["warmup_s"] / 2 for r in rounds)
