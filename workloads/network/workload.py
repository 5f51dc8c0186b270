"""The `network` workload: the all_reduce bandwidth of a cell's group alone (defaults.yaml).

It is the probe every cell across nodes runs before it trains (workloads/net_probe.py,
through torch_ranks.rank_group, which also records the group's hosts and its sweep of sizes
in provenance), then epochs of timed all_reduce calls of one buffer, so the figure is a
throughput the report, the history and the judge read as any other: bytes reduced per
second (algbw), and the bus bandwidth beside it.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from orchestrator.worker.context import Context, Unsupported
from workloads.net_probe import bus_factor
from workloads.torch_ranks import (
    Ranks,
    barrier,
    cell_ranks,
    first_rank_device,
    join_group,
    leave_group,
    other_rank_device,
    rank_group,
)

ELEMENT_BYTES = 4  # float32


def run(ctx: Context) -> None:
    p = ctx.params
    ranks = cell_ranks(ctx)
    if ranks.world < 2:
        raise Unsupported("the network workload needs 2 ranks or more: give the hardware "
                          "nodes: 2 or more, or workers: 2 or more")
    device = first_rank_device(ctx, ranks)
    with rank_group(ctx, ranks, _other_rank, p, ctx.epochs) as ranks:
        buffer = _buffer(p, device)
        if not ranks.node.times:  # another node's first rank: the same calls, untimed
            _untimed_rounds(buffer, p, ctx.epochs)
            return
        factor = bus_factor(ranks.world)
        for epoch in ctx.epoch_range():
            barrier(ranks)  # every rank starts the round together
            meter = ctx.start_epoch(warmup_steps=p["warmup_steps"])
            for _ in range(p["warmup_steps"] + p["steps"]):
                with meter.step(items=buffer.numel() * ELEMENT_BYTES):
                    dist.all_reduce(buffer)
            summary = meter.summary()
            ctx.end_epoch(epoch, meter,
                          busbw_gbs=float(summary["items_per_s"]) * factor / 1e9)


def _buffer(p: dict[str, Any], device: torch.device) -> torch.Tensor:
    elements = max(1, int(p["size_mib"] * 2**20) // ELEMENT_BYTES)
    return torch.zeros(elements, dtype=torch.float32, device=device)  # sums stay finite


def _other_rank(rank: int, ranks: Ranks, p: dict[str, Any], rounds: int) -> None:
    """A node's other ranks: rank 0's calls, untimed."""
    device = other_rank_device(rank, ranks)
    join_group(rank, ranks)
    try:
        _untimed_rounds(_buffer(p, device), p, rounds)
    finally:
        leave_group()


def _untimed_rounds(buffer: torch.Tensor, p: dict[str, Any], rounds: int) -> None:
    for _ in range(rounds):
        dist.barrier()
        for _ in range(p["warmup_steps"] + p["steps"]):
            dist.all_reduce(buffer)
