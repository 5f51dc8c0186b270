"""The network between a cell's nodes, measured as nccl-tests measures it: the bus bandwidth
of torch.distributed's all_reduce over the cell's whole group (gloo on CPUs, NCCL on GPUs),
before its workload trains. Not a workload (it has no defaults.yaml): every rank of a group
across nodes runs it as it joins (torch_ranks.join_group), in the same order.

For each size, from 8 bytes up by a factor of 4 to MAX_BYTES, every rank runs WARMUP_ITERS
untimed all-reduces, then times TIMED_ITERS one by one (synchronised before each clock
read); the size's time is their median. The algorithm bandwidth is bytes / time, and the
bus bandwidth `algbw x 2(n-1)/n` for n ranks (a ring all-reduce moves that much per rank,
so busbw is comparable with the link's speed whatever n is: nccl-tests' PERFORMANCE.md).
The probe stops before a size once BUDGET_S has gone by; the ranks agree on that (the
slowest rank's elapsed time, all-reduced), so none waits in a collective the others skip.
What is recorded is the bus bandwidth at the largest size measured, with that size.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

MIN_BYTES = 8
MAX_BYTES = 32 * 2**20
GROWTH = 4
WARMUP_ITERS = 2
TIMED_ITERS = 5
BUDGET_S = 10.0


@dataclass(frozen=True)
class Busbw:
    """The probe's answer: bus bandwidth in GB/s (1e9 bytes/s) at `largest_bytes`, and each
    size's figure (bytes, busbw GB/s) for the log."""

    busbw_gbs: float
    largest_bytes: int
    by_size: tuple[tuple[int, float], ...]


def bus_factor(ranks: int) -> float:
    """What a ring all-reduce moves per rank, as a multiple of the buffer: 2(n-1)/n."""
    return 2 * (ranks - 1) / ranks


def sizes(limit: int = MAX_BYTES) -> list[int]:
    found, size = [], MIN_BYTES
    while size <= limit:
        found.append(size)
        size *= GROWTH
    return found


def measure_busbw(ranks: int, device: torch.device, budget_s: float = BUDGET_S,
                  limit: int = MAX_BYTES) -> Busbw:
    """The group's all-reduce bus bandwidth (this rank's clock), within about `budget_s`."""
    sync: Callable[[], None] = (
        (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None))
    started = time.perf_counter()
    by_size: list[tuple[int, float]] = []
    for size in sizes(limit):
        if by_size and _slowest(time.perf_counter() - started, device) > budget_s:
            break
        buffer = torch.ones(size // 4, dtype=torch.float32, device=device)
        for _ in range(WARMUP_ITERS):
            dist.all_reduce(buffer)
        timings = []
        for _ in range(TIMED_ITERS):
            sync()
            start = time.perf_counter()
            dist.all_reduce(buffer)
            sync()
            timings.append(time.perf_counter() - start)
        seconds = statistics.median(timings)
        by_size.append((size, size / seconds * bus_factor(ranks) / 1e9))
    largest, busbw = by_size[-1]
    print("matrix-bench: all-reduce bus bandwidth over " + ", ".join(
        f"{size:,} B {gbs:.3g} GB/s" for size, gbs in by_size), flush=True)
    return Busbw(busbw_gbs=busbw, largest_bytes=largest, by_size=tuple(by_size))


def _slowest(elapsed_s: float, device: torch.device) -> float:
    """The largest of every rank's `elapsed_s`: the same answer on each."""
    value = torch.tensor([elapsed_s], dtype=torch.float64, device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return float(value.item())
