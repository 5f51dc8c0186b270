"""`gpt_lm`: GPT-2-style language-model pretraining, data parallel inside one cell.

This process is rank 0: it times the epochs (each a round of `steps_per_epoch` optimizer
steps) and writes the records. Ranks 1..N-1 are spawned processes (one per further GPU, or
CPU worker) running the same loop on their own data, with the same barriers, and they die
with rank 0. Across nodes (`nodes: N`), each node's worker starts its own ranks, all in one
group; node 0's first process is rank 0, the others run the loop untimed. Every step
trains batch_size x context real tokens on each rank (dense windows, no padding), so a
step's items are batch_size x context x ranks (of every node), counted without a
collective. The round's batches are made before it is timed; a barrier starts the round,
and the round ends when the slowest rank's last step does.

`dp_mode` ddp wraps the model in DistributedDataParallel; fsdp applies FSDP2's
`fully_shard` to every block and then the root, so parameters, gradients and optimizer
state are sharded over the ranks. `precision` is set in every rank before its model is
built, and a half precision this device would not compute the model's matrix multiplies in
makes the cell `unsupported` before any rank starts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from orchestrator.worker.context import Context
from orchestrator.worker.datasets import sha256_of
from orchestrator.worker.measure import HostRssProbe
from workloads.gpt_lm.model import adamw, build
from workloads.torch_common import (
    autocast,
    backward_and_step,
    precision_switches,
    ran_on,
    require_autocast_dtype,
    set_precision,
)
from workloads.torch_ranks import (
    Ranks,
    barrier,
    cell_ranks,
    each_rank,
    first_rank_device,
    join_group,
    leave_group,
    other_rank_device,
    rank_group,
)

CLIP = 1.0  # gradient-norm clipping, as GPT-2-style training does


class Trainer:
    """One rank's model, optimizer and data."""

    def __init__(self, p: dict[str, Any], rank: int, workers: int, device: torch.device) -> None:
        self.p, self.rank, self.device = p, rank, device
        self.precision = p["precision"]
        set_precision(self.precision, device)  # before the model: TF32 is per process
        torch.manual_seed(p["seed"])  # the same initial weights on every rank
        model: nn.Module = build(p, device)
        if workers > 1 and p["dp_mode"] == "fsdp":
            from torch.distributed.fsdp import fully_shard

            for block in model.blocks:
                fully_shard(block)
            fully_shard(model)
        self.optimizer = adamw(model, p["lr"], device)
        if p["compile"]:
            model = torch.compile(model)
        if workers > 1 and p["dp_mode"] == "ddp":
            model = nn.parallel.DistributedDataParallel(
                model, device_ids=[device.index] if device.type == "cuda" else None)
        self.model = model
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.precision == "fp16")
        self.tokens = token_source(p)

    def batches(self, first: int, count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """A round's (inputs, targets), made before it is timed: sampling is not training."""
        found = []
        for step in range(first, first + count):
            window = self.tokens(self.rank, step).to(self.device, non_blocking=True)
            found.append((window[:, :-1], window[:, 1:]))
        return found

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        with autocast(self.precision, self.device):
            loss = self.model(inputs, targets)
        self.optimizer.zero_grad(set_to_none=True)
        backward_and_step(loss, self.model, self.optimizer, self.scaler, clip=CLIP)

    def checksum(self) -> float:
        """The sum of every weight, whole (an FSDP rank gathers its shards)."""
        total = 0.0
        for parameter in self.model.parameters():
            whole = parameter.full_tensor() if hasattr(parameter, "full_tensor") else parameter
            total += float(whole.detach().double().sum())
        return total


def token_source(p: dict[str, Any]) -> Any:
    """(rank, step) -> a (batch_size, context + 1) window of token ids, a function of
    (seed, rank, step) alone: synthetic ids, or windows of the `data` file of uint16 ids."""
    batch, length, vocab = p["batch_size"], p["context"] + 1, p["vocab"]
    if p["data"] == "synthetic":
        def synthetic(rank: int, step: int) -> torch.Tensor:
            generator = torch.Generator().manual_seed(_stream(p, rank, step))
            return torch.randint(0, vocab, (batch, length), generator=generator)
        return synthetic
    import numpy as np

    ids = np.memmap(p["data"], dtype=np.uint16, mode="r")
    if len(ids) <= length:
        raise ValueError(f"{p['data']} holds {len(ids)} tokens, fewer than one window")

    def from_file(rank: int, step: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(_stream(p, rank, step))
        starts = torch.randint(0, len(ids) - length, (batch,), generator=generator).tolist()
        window = torch.from_numpy(np.stack([ids[s:s + length] for s in starts]).astype(np.int64))
        if int(window.max()) >= vocab:
            raise ValueError(f"{p['data']} holds token id {int(window.max())}, beyond the "
                             f"vocabulary of {vocab}")
        return window
    return from_file


def _stream(p: dict[str, Any], rank: int, step: int) -> int:
    return int(p["seed"]) * 1_000_003 + rank * 10_007 + step


def run(ctx: Context) -> None:
    p = ctx.params
    ranks = cell_ranks(ctx)
    device = first_rank_device(ctx, ranks)
    set_precision(p["precision"], device)
    ctx.precision_switches.update(precision_switches(p["precision"], device))
    require_autocast_dtype(nn.Linear(8, 8).to(device), "the model's Linear layers",
                           torch.zeros(1, 8, device=device), p["precision"], device)
    if p["data"] != "synthetic":
        ctx.data_files[os.path.basename(p["data"])] = sha256_of(Path(p["data"]))
    with rank_group(ctx, ranks, _other_rank, p, ctx.epochs) as ranks:
        trainer = Trainer(p, ranks.first, ranks.world, device)
        ran_on(ctx, trainer.model)
        if ranks.node.times:
            _train(ctx, trainer, ranks, device)
        else:  # another node's first rank: the same rounds, untimed
            _untimed_rounds(trainer, p, ctx.epochs, ranks.world, device)


def _train(ctx: Context, trainer: Trainer, ranks: Ranks, device: torch.device) -> None:
    """Rank 0's timed rounds (the model is dropped on return, before the group is left)."""
    p = ctx.params
    workers = ranks.world
    steps, tokens = p["steps_per_epoch"], p["batch_size"] * p["context"] * workers
    for epoch in ctx.epoch_range():
        batches = trainer.batches((epoch - 1) * steps, steps)
        _reset_peak(device)
        barrier(ranks)  # every rank starts the round together
        meter = ctx.start_epoch(warmup_steps=p["warmup_steps"])
        for index, (inputs, targets) in enumerate(batches):
            with meter.step(items=tokens):
                trainer.step(inputs, targets)
                if index == steps - 1:
                    barrier(ranks)  # the round ends with the slowest rank's step
        summary = meter.summary()
        ctx.end_epoch(epoch, meter,
                      tokens_per_s_per_rank=float(summary["items_per_s"]) / workers,
                      rank_mem_peak_max_bytes=_largest_rank_peak(device, workers))

def _reset_peak(device: torch.device) -> None:
    """Start this rank's memory peak over (the allocator's on a GPU, resident on a CPU)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    else:
        HostRssProbe().reset()


def _largest_rank_peak(device: torch.device, workers: int) -> float:
    """The largest rank's peak memory of the round: allocated on a GPU, resident on a CPU."""
    if device.type == "cuda":
        peak = float(torch.cuda.max_memory_allocated(device))
    else:
        peak = float(HostRssProbe().read()["host_rss_peak_bytes"])
    if workers > 1:
        value = torch.tensor([peak], dtype=torch.float64, device=device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        peak = float(value.item())
    return peak


def _other_rank(rank: int, ranks: Ranks, p: dict[str, Any], rounds: int) -> None:
    """A node's other ranks: rank 0's loop with its barriers and collectives, untimed."""
    device = other_rank_device(rank, ranks)
    join_group(rank, ranks)
    try:
        _untimed_rounds(Trainer(p, rank, ranks.world, device), p, rounds, ranks.world, device)
    finally:
        leave_group()


def _untimed_rounds(trainer: Trainer, p: dict[str, Any], rounds: int, workers: int,
                    device: torch.device) -> None:
    steps = p["steps_per_epoch"]
    for round_index in range(rounds):
        batches = trainer.batches(round_index * steps, steps)
        _reset_peak(device)
        dist.barrier()
        for inputs, targets in batches:
            trainer.step(inputs, targets)
        dist.barrier()
        _largest_rank_peak(device, workers)


def one_step_checksums(p: dict[str, Any], workers: int) -> list[float]:
    """Each rank's whole-weight checksum after one step on its own data (for the tests:
    equal on every rank under DDP and FSDP alike)."""
    return each_rank(_checksum_rank, workers, p)


def _checksum_rank(rank: int, ranks: Ranks, results: Any, p: dict[str, Any]) -> None:
    torch.set_num_threads(1)
    join_group(rank, ranks)
    try:
        trainer = Trainer(p, rank, ranks.world, torch.device("cpu"))
        (inputs, targets), = trainer.batches(0, 1)
        trainer.step(inputs, targets)
        results.put((rank, trainer.checksum()))
        del trainer
    finally:
        leave_group()
