"""Data-parallel ranks inside one cell, as the data-parallel workloads run them (nmt_dp,
gpt_lm): this process is its node's first rank, the node's other ranks are spawned
processes that die with it, and all join one torch.distributed group (gloo on CPUs, NCCL on
GPUs): on this machine, or across the cell's nodes (worker/nodes.py: one worker per node,
global rank = node rank x ranks per node + local rank). Not a workload (it has no
defaults.yaml)."""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from orchestrator.worker.context import Context, Unsupported
from orchestrator.worker.host import die_with_parent_setter, hostname
from orchestrator.worker.measure import TorchCudaProbe, no_sync
from orchestrator.worker.nodes import NodePlace, RendezvousError
from orchestrator.worker.threads import rank_threads
from workloads.net_probe import Busbw, measure_busbw

JOIN_TIMEOUT_S = 60


@dataclass(frozen=True)
class Ranks:
    """A cell's process group: `local` ranks on each of its node's `node.nodes` nodes
    (worker/nodes.py), this node's first rank `first`, and where they meet: rank 0's node
    and port across nodes, 127.0.0.1 and a free port on one."""

    local: int
    on_gpu: bool
    node: NodePlace = field(default_factory=NodePlace)
    port: int = 0  # on one node: the port rank 0 listens on

    @property
    def world(self) -> int:
        return self.local * self.node.nodes

    @property
    def first(self) -> int:
        """The global rank of this node's first process (the worker's own)."""
        return self.node.node_rank * self.local

    @property
    def addr(self) -> str:
        return self.node.addr or "127.0.0.1"

    @property
    def master_port(self) -> int:
        return self.node.port or self.port


def cell_ranks(ctx: Context) -> Ranks:
    """The cell's ranks: its `workers` parameter per node, or 0 for one per GPU (1 on a
    CPU), on each of its nodes; all of them recorded as the devices the cell uses (its
    throughput counts every rank's items, so its peak is every device's)."""
    local = int(ctx.params["workers"]) or max(ctx.gpus, 1)
    ctx.uses_devices(local * ctx.node.nodes)
    return Ranks(local=local, on_gpu=ctx.gpus > 0, node=ctx.node)


def first_rank_device(ctx: Context, ranks: Ranks) -> torch.device:
    """This worker's device, registered with the harness (CUDA synchronisation and
    allocator peaks on a GPU); on a CPU, the CPUs it may use shared out among this node's
    ranks' threads (`rank_threads`). Unsupported where the cell sees fewer GPUs than its
    node's ranks."""
    workers = ranks.local
    on_gpu = ranks.on_gpu
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


def other_rank_device(rank: int, ranks: Ranks) -> torch.device:
    """A spawned rank's device (global `rank`), the rank made to die with its node's
    first (so a killed cell leaves no rank waiting in a collective)."""
    die_with_parent_setter()()
    device = torch.device(f"cuda:{rank - ranks.first}" if ranks.on_gpu else "cpu")
    if ranks.on_gpu:
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(rank_threads(ranks.local))
    return device


def barrier(ranks: Ranks) -> None:
    if ranks.world > 1:
        dist.barrier()


@contextlib.contextmanager
def rank_group(ctx: Context, ranks: Ranks, other_rank: Callable[..., None],
               *args: Any) -> Iterator[Ranks]:
    """The process group, this process its node's first rank, with `other_rank(rank,
    ranks, *args)` running in a spawned process for each of this node's other ranks; they
    are joined (or, on an error here, terminated) before the block is left. Across nodes,
    the group's hosts and the network between them (net_probe.py) are recorded on node 0.
    One rank in all: no group at all. Yields the ranks, with the port chosen."""
    if ranks.world == 1:
        yield ranks
        return
    if not ranks.node.spans_nodes:
        ranks = replace(ranks, port=free_port())
    spawn = multiprocessing.get_context("spawn")
    children = [spawn.Process(target=other_rank, args=(rank, ranks, *args), daemon=True)
                for rank in range(ranks.first + 1, ranks.first + ranks.local)]
    for child in children:
        child.start()
    try:
        facts = join_group(ranks.first, ranks)
        if facts is not None and ranks.node.times:
            ctx.record_group(ranks.world, facts.hosts, facts.network.busbw_gbs,
                             facts.network.largest_bytes, facts.rendezvous_s)
        yield ranks
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


@dataclass(frozen=True)
class GroupFacts:
    """What every rank of a group across nodes learns as it joins: each rank's host, and
    the all-reduce bus bandwidth between them."""

    hosts: list[str]
    network: Busbw
    rendezvous_s: float  # from this rank's first try to join to every rank joined


def join_group(rank: int, ranks: Ranks) -> GroupFacts | None:
    """Join the group as global `rank`. Across nodes, every rank waits at most its node's
    `wait_s` (worker/nodes.py: rendezvous_wait_s) for all to join (a node that never comes
    fails the cell, naming the rendezvous), then takes part in gathering the hosts and in
    the network probe, in the same order on every rank."""
    backend = "nccl" if ranks.on_gpu else "gloo"
    if not ranks.node.spans_nodes:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(ranks.port))
        dist.init_process_group(backend, rank=rank, world_size=ranks.world)
        return None
    wait = timedelta(seconds=ranks.node.wait_s)
    started = time.perf_counter()
    try:
        store = dist.TCPStore(ranks.addr, ranks.master_port, ranks.world, is_master=rank == 0,
                              timeout=wait, wait_for_workers=True)
        # the collectives keep the backend's own timeout: a slow step (a first compile)
        # may hold a barrier longer than the rendezvous may take; the cell's timeout bounds
        # them (the executor ends the worker's whole group)
        dist.init_process_group(backend, store=store, rank=rank, world_size=ranks.world)
    except (RuntimeError, dist.DistStoreError) as exc:
        raise RendezvousError(
            f"the rendezvous at {ranks.addr}:{ranks.master_port} did not complete: the "
            f"{ranks.world} ranks of {ranks.node.nodes} nodes did not all join within "
            f"{ranks.node.wait_s:g} s ({str(exc).splitlines()[0][:200]})") from None
    joined_s = time.perf_counter() - started
    hosts: list[Any] = [None] * ranks.world
    dist.all_gather_object(hosts, hostname())
    device = torch.device(f"cuda:{rank - ranks.first}" if ranks.on_gpu else "cpu")
    return GroupFacts([str(h) for h in hosts], measure_busbw(ranks.world, device), joined_s)


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
    """What `target(rank, ranks, results, *args)` puts on `results` as (rank, value)
    in every rank, all of them spawned, in rank order (for the tests)."""
    ranks = Ranks(local=workers, on_gpu=False, port=free_port())
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    children = [spawn.Process(target=target, args=(rank, ranks, results, *args))
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
