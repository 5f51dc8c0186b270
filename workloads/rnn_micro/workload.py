"""The `rnn_micro` workload: seed 001's LSTM microbenchmark, one record per timed round.

A stack of LSTM layers (input size = hidden) runs over a fixed random batch x seq_len x hidden
input; the MSE of all the last layer's hidden states against a fixed random target is
back-propagated through every layer and an SGD step taken. Three implementations of that same
function: `fused` (nn.LSTM: cuDNN on a GPU), `unfused` (a Python loop of nn.LSTMCell per layer)
and `compiled` (that loop under torch.compile; `unsupported` where torch.compile cannot run,
never another path under its label). A round times `timed_steps` training iterations, then
as many forward-only passes, each after `warmup_steps` untimed ones (where compilation
happens). On a GPU the timed steps are timed in synchronised blocks (`timing_block_steps`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from orchestrator.worker.context import Context, Unsupported
from workloads.torch_common import (
    autocast,
    precision_switches,
    ran_on,
    require_autocast_dtype,
    set_precision,
    use_torch,
)

Net = Callable[[torch.Tensor], torch.Tensor]
COMPILED_MIN_WARMUP = 2  # compile on the first call, specialise on the second (TorchScript)
# Timed steps per synchronised block on a GPU (EpochMeter: block timing). A synchronisation
# drains the queue and the next step's first kernel then waits a launch latency: an estimated
# 10 to 20 µs per sync (not yet measured here), as much as a whole step of the smallest
# cells. Once per 10 steps it is a few percent of a block even at tens of µs a step (and
# nothing at the large cells), while the default round of 50 timed steps still makes 5
# blocks for the median and p90 (blocks of 50 would leave one).
TIMING_BLOCK_STEPS = 10


def timing_block_steps(device: torch.device) -> int:
    """Steps per synchronised block: TIMING_BLOCK_STEPS on a GPU, where a synchronisation
    per step would serialise host and device; 1 on the CPU, where syncing costs nothing."""
    return TIMING_BLOCK_STEPS if device.type == "cuda" else 1


class Fused(nn.Module):
    """nn.LSTM over (batch, seq, hidden): one library call for all steps and layers."""

    def __init__(self, hidden: int, layers: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(hidden, hidden, layers, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lstm(x)[0]


class CellLoop(nn.Module):
    """The same LSTM as one nn.LSTMCell per layer, stepped over time in Python.

    Layer by layer, zero initial state, as nn.LSTM computes it; scriptable by TorchScript.
    """

    def __init__(self, hidden: int, layers: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.cells = nn.ModuleList([nn.LSTMCell(hidden, hidden) for _ in range(layers)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        states = x
        for cell in self.cells:
            h = torch.zeros(x.size(0), self.hidden, dtype=x.dtype, device=x.device)
            c = torch.zeros_like(h)
            outputs: list[torch.Tensor] = []
            for t in range(states.size(1)):
                h, c = cell(states[:, t], (h, c))
                outputs.append(h)
            states = torch.stack(outputs, dim=1)
        return states


def copy_fused_weights(fused: Fused, loop: CellLoop) -> None:
    """Give `loop` the weights of `fused` (same gate order i, f, g, o), layer by layer."""
    with torch.no_grad():
        for k, cell in enumerate(loop.cells):
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(cell, name).copy_(getattr(fused.lstm, f"{name}_l{k}"))


def compile_problem(device: torch.device) -> str | None:
    """Why torch.compile (inductor) cannot run on `device` here, or None when it can."""
    try:
        if device.type == "cuda":
            from torch.utils._triton import has_triton

            return None if has_triton() else "triton is not installed"
        from torch._inductor.cpp_builder import get_cpp_compiler

        get_cpp_compiler()
    except (ImportError, AttributeError):
        return None  # private probes moved: let torch.compile itself try
    except RuntimeError as exc:  # e.g. InvalidCxxCompiler: no working C++ compiler
        return str(exc).splitlines()[0]
    return None


def compile_loop(loop: CellLoop, device: torch.device) -> tuple[Net, str]:
    """The loop under torch.compile; Unsupported where it cannot run (no C++ compiler on
    a CPU, no triton on a GPU). Never another path under the `compiled` label: a row says
    what ran."""
    problem = compile_problem(device)
    if problem is not None:
        raise Unsupported(f"rnn_impl=compiled needs torch.compile, which cannot run here: "
                          f"{problem}")
    return torch.compile(loop), "torch.compile"


@dataclass
class Bench:
    """What one cell times: the network to call, its optimizer, and the fixed data."""

    model: nn.Module  # owns the parameters (net may be a compiled wrapper around it)
    net: Net
    how: str  # how rnn_impl was realised, in words (for the log)
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    inputs: torch.Tensor  # (batch, seq_len, hidden)
    target: torch.Tensor  # like inputs
    precision: str
    device: torch.device

    def train_step(self) -> torch.Tensor:
        """Forward, MSE of every last-layer state, backward through all layers, SGD step."""
        self.optimizer.zero_grad(set_to_none=True)
        with autocast(self.precision, self.device):
            loss = nn.functional.mse_loss(self.net(self.inputs).float(), self.target)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.detach()

    def forward(self) -> torch.Tensor:
        """Forward only: all hidden states of the last layer, no graph kept."""
        with torch.no_grad(), autocast(self.precision, self.device):
            return self.net(self.inputs)


def setup(params: dict[str, Any], device: torch.device) -> Bench:
    """Seeded data and weights (the same weights for every rnn_impl) on `device`."""
    hidden, layers, impl = params["hidden"], params["layers"], params["rnn_impl"]
    precision = params["precision"]
    set_precision(precision, device)
    generator = torch.Generator().manual_seed(params["seed"])
    shape = (params["batch_size"], params["seq_len"], hidden)
    inputs = torch.randn(shape, generator=generator).to(device)
    target = torch.randn(shape, generator=generator).to(device)
    torch.manual_seed(params["seed"])  # nn.LSTM and the cells draw in the same order
    model: nn.Module
    if impl == "fused":
        model, name = Fused(hidden, layers).to(device), "nn.LSTM"
    else:
        model, name = CellLoop(hidden, layers).to(device), "nn.LSTMCell loop"
    # Before compiling: compiled is the same loop, and a refused precision compiles nothing.
    require_autocast_dtype(model, name, torch.zeros(1, 2, hidden, device=device), precision,
                           device)
    net, how = (model, name)
    if impl == "compiled":  # the cell loop (Fused is already one kernel)
        assert isinstance(model, CellLoop)
        net, how = compile_loop(model, device)
    return Bench(model, net, how, torch.optim.SGD(model.parameters(), lr=0.01),
                 torch.amp.GradScaler(device.type, enabled=precision == "fp16"),
                 inputs, target, precision, device)


def run(ctx: Context) -> None:
    """ctx.epochs timed rounds of training steps then forward passes; a record per round."""
    p = ctx.params
    if ctx.gpus > 1:  # a single-device microbenchmark; idle GPUs would misstate the hardware
        raise Unsupported(f"rnn_micro runs on one device; this hardware has gpus={ctx.gpus}")
    warmup, timed, batch = p["warmup_steps"], p["timed_steps"], p["batch_size"]
    if p["rnn_impl"] == "compiled" and warmup < COMPILED_MIN_WARMUP:
        raise ValueError(f"rnn_impl=compiled compiles in its first calls: warmup_steps must be "
                         f"at least {COMPILED_MIN_WARMUP}, not {warmup}")
    device = use_torch(ctx)
    bench = setup(p, device)
    ran_on(ctx, bench.model)
    ctx.precision_switches.update(precision_switches(bench.precision, device))
    print(f"rnn_micro: rnn_impl={p['rnn_impl']} runs as {bench.how}", flush=True)

    block = timing_block_steps(device)
    for round_ in ctx.epoch_range():
        meter = ctx.start_epoch(warmup, block_steps=block)
        for _ in range(warmup + timed):
            with meter.step(items=batch):
                bench.train_step()
        # Taken before the forward passes: it closes the last (partial) block of training
        # steps, which would otherwise run on to the summary; the round's record (epoch_s,
        # memory peaks, NVML) is thus its training part.
        train = meter.summary()
        fwd = ctx.timer(warmup, block_steps=block)
        for _ in range(warmup + timed):
            with fwd.step(items=batch):
                bench.forward()
        forward = fwd.summary()
        print(f"rnn_micro: round {round_} warm-up {train['warmup_s']:.2f} s training, "
              f"{forward['warmup_s']:.2f} s forward-only", flush=True)
        # Per example from the same totals as items/s (docs/results-schema.md), so the two
        # always agree: the timed seconds over the timed examples.
        ctx.end_epoch(round_, meter,
                      us_per_example_train=float(train["train_s"]) / float(train["items"]) * 1e6,
                      us_per_example_fwd=float(forward["train_s"]) / float(forward["items"]) * 1e6)
