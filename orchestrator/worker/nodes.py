"""Where this worker stands in a cell that spans nodes (docs/ARCHITECTURE.md: a cell across
nodes): how many nodes the cell has, this one's rank among them, and the rendezvous, rank
0's node address and port, as torchrun names them (`NNODES`, `NODE_RANK`, `MASTER_ADDR`,
`MASTER_PORT`). The dispatcher starts one worker per node and the launch sets these; a
workload's ranks then join one process group of nodes x ranks per node.

Node 0's worker is the cell's: it times the epochs and writes the measurements. The others
run the same loop untimed and write no measurement. Stdlib only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

NODES_ENV = "NNODES"
NODE_RANK_ENV = "NODE_RANK"
ADDR_ENV = "MASTER_ADDR"
PORT_ENV = "MASTER_PORT"
RENDEZVOUS_ENV = (NODES_ENV, NODE_RANK_ENV, ADDR_ENV, PORT_ENV)
# how long the ranks of a cell across nodes wait for each other to join its group, at most
# (and half the cell's timeout at most: rendezvous_wait_s): past it, the cell fails naming
# the rendezvous, instead of waiting out its timeout
RENDEZVOUS_TIMEOUT_S = 120.0


def rendezvous_wait_s(timeout_s: float) -> float:
    """How long a cell of `timeout_s` waits for its nodes to meet: RENDEZVOUS_TIMEOUT_S, or
    half its timeout where that is shorter, so a node that never comes is named before the
    cell's own timeout ends it without a reason."""
    return min(RENDEZVOUS_TIMEOUT_S, timeout_s / 2)


class RendezvousError(RuntimeError):
    """The ranks of a cell across nodes did not all join within RENDEZVOUS_TIMEOUT_S."""


@dataclass(frozen=True)
class NodePlace:
    """This worker's node among the cell's: `nodes` of them, this one `node_rank`, and the
    rendezvous (None on one node: its ranks meet on 127.0.0.1)."""

    nodes: int = 1
    node_rank: int = 0
    addr: str | None = None
    port: int | None = None
    wait_s: float = RENDEZVOUS_TIMEOUT_S  # rendezvous_wait_s of the cell's timeout

    @property
    def spans_nodes(self) -> bool:
        return self.nodes > 1

    @property
    def times(self) -> bool:
        """Whether this worker is the cell's own (node 0): the one that times and reports."""
        return self.node_rank == 0

    def as_environment(self) -> dict[str, str]:
        """The variables the launch sets for the worker (none on one node)."""
        if not self.spans_nodes:
            return {}
        return {NODES_ENV: str(self.nodes), NODE_RANK_ENV: str(self.node_rank),
                ADDR_ENV: str(self.addr), PORT_ENV: str(self.port)}


def node_place(nodes: int, timeout_s: float,
               environ: Mapping[str, str] = os.environ) -> NodePlace:
    """The place of this worker in a cell of `nodes` nodes (its hardware's) and
    `timeout_s`, from the variables its launch set. ValueError where a cell across nodes
    lacks them: run alone, its ranks would wait for nodes that never come."""
    if nodes <= 1:
        return NodePlace()
    missing = [name for name in RENDEZVOUS_ENV if not environ.get(name)]
    if missing:
        raise ValueError(f"a cell across {nodes} nodes needs {', '.join(missing)} from its "
                         "dispatcher: it runs on a Ray cluster (--ray-address), one worker "
                         "per node")
    place = NodePlace(nodes=int(environ[NODES_ENV]), node_rank=int(environ[NODE_RANK_ENV]),
                      addr=environ[ADDR_ENV], port=int(environ[PORT_ENV]),
                      wait_s=rendezvous_wait_s(timeout_s))
    if place.nodes != nodes or not 0 <= place.node_rank < nodes:
        raise ValueError(f"node {place.node_rank} of {place.nodes} in a cell across {nodes} "
                         "nodes")
    return place
