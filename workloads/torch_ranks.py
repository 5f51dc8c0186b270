"""Data-parallel ranks inside one cell, as the data-parallel workloads run them (nmt_dp,
gpt_lm): this process is rank 0, ranks 1..N-1 are spawned processes that die with it, and
all join one torch.distributed group on this machine (gloo on CPUs, NCCL on GPUs). Not a
workload (it has no defaults.yaml)."""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import socket
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist

from orchestrator.worker.context import Context, Unsupported
from orchestrator.worker.host import die_with_parent_setter
from orchestrator.worker.measure import TorchCudaProbe, no_sync
from orchestrator.worker.threads import rank_threads

JOIN_TIMEOUT_S = 60


def rank_count(ctx: Context) -> int:
    """The cell's ranks: its `workers` parameter, or 0 for one per GPU (1 on a CPU);
    recorded as the devices the cell uses."""
    ranks = int(ctx.params["workers"]) or max(ctx.gpus, 1)
    ctx.uses_devices(ranks)
    return ranks


def first_rank_device(ctx: Context, workers: int) -> torch.device:
    """Rank 0's device, registered with the harness (CUDA synchronisation and allocator
    peaks on a GPU); on a CPU, the CPUs it may use shared out among the ranks' threads
    (`rank_threads`). Unsupported where the cell sees fewer GPUs than ranks."""
    on_gpu = ctx.gpus > 0
    if on_gpu and torch.cuda.device_count() < workers:
        raise Unsupported(f"{workers} ranks need {workers} GPUs; {torch.cuda.device_count()} "
                          "visible to the cell")
    device = torch.device("cuda:0" if on_gpu else "cpu")
    if on_gpu:
        ctx.use_framework("torch", torch.__version__, sync=torch.cuda.synchronize,
                          probes=[TorchCudaProbe(device)])
    else:
        ctx.use_framework("torch", torch.__version__, sync=no_sync)
        torch.set_num_threads(rank_threads(workers))
    return device


def other_rank_device(rank: int, workers: int, on_gpu: bool) -> torch.device:
    """A spawned rank's device, the rank made to die with rank 0 (so a killed cell leaves
    no rank waiting in a collective)."""
    die_with_parent_setter()()
    device = torch.device(f"cuda:{rank}" if on_gpu else "cpu")
    if on_gpu:
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(rank_threads(workers))
    return device


def barrier(workers: int) -> None:
    if workers > 1:
        dist.barrier()


@contextlib.contextmanager
def rank_group(workers: int, on_gpu: bool, other_rank: Callable[..., None],
               *args: Any) -> Iterator[None]:
    """The process group, with `other_rank(rank, workers, port, on_gpu, *args)` running in a
    spawned process for each rank 1..N-1; they are joined (or, on an error here,
    terminated) before the block is left. One rank: no group at all."""
    if workers == 1:
        yield
        return
    port = free_port()
    spawn = multiprocessing.get_context("spawn")
    children = [spawn.Process(target=other_rank, args=(rank, workers, port, on_gpu, *args),
                              daemon=True) for rank in range(1, workers)]
    for child in children:
        child.start()
    try:
        join_group(0, workers, port, on_gpu)
        yield
        for child in children:
            child.join(JOIN_TIMEOUT_S)
        failed = [c.exitcode for c in children if c.exitcode != 0]
        if failed:
            raise RuntimeError(f"a rank's process ended with exit code {failed[0]}")
    finally:
        for child in children:
            if child.is_alive():
                child.terminate()
                child.join(5)
        leave_group()


def join_group(rank: int, workers: int, port: int, on_gpu: bool) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("nccl" if on_gpu else "gloo", rank=rank, world_size=workers)


def leave_group() -> None:
    """Destroy this rank's group once nothing holds it any more. A DDP or FSDP model keeps
    its group alive, and a group that lives on until the interpreter exits can take the
    process down with it (gloo's threads are still joinable then: SIGABRT after the work is
    done), so ranks drop their models before they leave."""
    gc.collect()  # the data-parallel wrappers hold cycles that reference counting leaves
    if dist.is_initialized():
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def each_rank(target: Callable[..., None], workers: int, *args: Any) -> list[Any]:
    """What `target(rank, workers, port, results, *args)` puts on `results` as (rank, value)
    in every rank, all of them spawned, in rank order (for the tests)."""
    port = free_port()
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    children = [spawn.Process(target=target, args=(rank, workers, port, results, *args))
                for rank in range(workers)]
    for child in children:
        child.start()
    try:
        found = dict(results.get(timeout=180) for _ in children)
    finally:
        for child in children:
            child.join(JOIN_TIMEOUT_S)
            if child.is_alive():
                child.terminate()
    return [found[rank] for rank in range(workers)]
