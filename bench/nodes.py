"""A cell across nodes, measured (issue 58): the network probe against torch's own
all_reduce loop, and gpt_lm's scaling from one node to two on a real two-node Ray cluster.

1. **Probe against reference.** Two processes join one gloo group on 127.0.0.1, as two
   nodes' ranks do. In each round, both run the probe (workloads/net_probe.py: 8 B to
   32 MiB, the median of 5 timed all-reduces per size) and a reference: torch's
   all_reduce in a plain loop at the probe's largest size, 3 warm-up and 20 timed together
   (nccl-tests' way: one clock around the loop), busbw by the same formula. The two
   alternate in order round by round; the ratio probe / reference is each round's.
2. **gpt_lm on 1 and 2 nodes.** `matrix run --ray-address` on a Ray cluster of two nodes
   on this machine, both offering hw:pair, gpt_lm preset tiny with `nodes: [1, 2]`, one
   rank a node on one thread (OMP_NUM_THREADS=1: two nodes of one 2-core machine would
   otherwise oversubscribe it), 3 repeats. Throughput, speedup, weak-scaling efficiency
   and the busbw each 2-node cell measured come from its results.parquet.

Usage: python bench/nodes.py [--rounds 5] [--repeats 3]
Writes bench/results/nodes.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
REFERENCE_WARMUP, REFERENCE_ITERS = 3, 20

MATRIX = """
name: nodes-bench
hardware:
  - {{name: pair, kind: local, nodes: [1, 2]}}
stacks: [{{name: here, executor: process}}]
workloads:
  - name: gpt_lm
    params: {{preset: tiny, workers: 1, steps_per_epoch: 20, warmup_steps: 2}}
    epochs: 3
repeats: {repeats}
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _rank(rank: int, port: int, rounds: int, results: object) -> None:
    import torch
    import torch.distributed as dist

    from workloads.net_probe import MAX_BYTES, bus_factor, measure_busbw

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    found = []
    for index in range(rounds):
        figures = {}
        for what in (("probe", "reference") if index % 2 == 0 else ("reference", "probe")):
            if what == "probe":
                answer = measure_busbw(2, torch.device("cpu"))
                figures["probe"] = answer.busbw_gbs
                figures["probe_bytes"] = answer.largest_bytes
            else:
                buffer = torch.ones(MAX_BYTES // 4)
                for _ in range(REFERENCE_WARMUP):
                    dist.all_reduce(buffer)
                dist.barrier()
                start = time.perf_counter()
                for _ in range(REFERENCE_ITERS):
                    dist.all_reduce(buffer)
                seconds = (time.perf_counter() - start) / REFERENCE_ITERS
                figures["reference"] = MAX_BYTES / seconds * bus_factor(2) / 1e9
        found.append(figures)
    dist.destroy_process_group()
    if rank == 0:
        results.put(found)  # type: ignore[attr-defined]


def _node_ports() -> dict[str, int]:
    """Ports of its own for each node's agents: nodes of one machine race for the defaults."""
    return {"dashboard_agent_listen_port": _free_port(), "metrics_agent_port": _free_port(),
            "metrics_export_port": _free_port(), "runtime_env_agent_port": _free_port()}


def probe_against_reference(rounds: int) -> dict[str, object]:
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    port = _free_port()
    ranks = [spawn.Process(target=_rank, args=(rank, port, rounds, results))
             for rank in (0, 1)]
    for process in ranks:
        process.start()
    found = results.get(timeout=600)
    for process in ranks:
        process.join(60)
    ratios = [r["probe"] / r["reference"] for r in found]
    return {"rounds": found, "ratio_median": statistics.median(ratios),
            "ratio_min": min(ratios), "ratio_max": max(ratios)}


def gpt_lm_scaling(repeats: int) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="mb-nodes-"))
    token = work / "ray_token"  # Ray's token authentication: the nodes' and the sweep's
    token.write_text(secrets.token_hex(32))
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    import pandas as pd
    from ray.cluster_utils import Cluster

    os.makedirs(os.path.join(tempfile.gettempdir(), "ray"), exist_ok=True)
    cluster = Cluster(initialize_head=False, connect=False)
    args = {"num_cpus": 1, "object_store_memory": 100 * 2**20,
            "temp_dir": tempfile.mkdtemp(prefix="mb-ray-")}
    try:
        for _ in range(2):
            cluster.add_node(**args, **_node_ports(), resources={"hw:pair": 1})
        cluster.wait_for_nodes()
        (work / "m.yaml").write_text(MATRIX.format(repeats=repeats))
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run",
                               str(work / "m.yaml"), "-o", str(work / "run"), "--db", "none",
                               "--ray-address", cluster.address], env=env, cwd=work,
                              capture_output=True, text=True, timeout=1800)
        sweep_s = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(done.stdout[-3000:] + done.stderr[-3000:])
    finally:
        cluster.shutdown()
    rows = pd.read_parquet(work / "run" / "results.parquet")
    rows = rows[rows["status"] == "ok"]
    figures: dict[str, object] = {"sweep_s": sweep_s}
    per_nodes = {}
    for nodes, group in rows.groupby(rows["hw.nodes"].fillna(1).astype(int)):
        per_repeat = group.groupby("cell_id")["items_per_s"].median()
        per_nodes[int(nodes)] = {
            "tokens_per_s_per_repeat": [float(v) for v in per_repeat],
            "tokens_per_s": float(per_repeat.median()),
            "net_busbw_gbs": [float(v) for v in group.drop_duplicates("cell_id")
                              ["net_busbw_gbs"].dropna()],
            "flags": sorted(set(",".join(group["flags"].fillna("")).split(",")) - {""})}
    one, two = per_nodes[1]["tokens_per_s"], per_nodes[2]["tokens_per_s"]
    figures |= {"by_nodes": per_nodes, "speedup": two / one, "efficiency": two / one / 2}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "nodes.json")
    options = parser.parse_args()
    import torch

    probe = probe_against_reference(options.rounds)
    print(f"probe / torch's all_reduce loop at 32 MiB, 2 ranks (gloo, loopback): median "
          f"{probe['ratio_median']:.3f} (min {probe['ratio_min']:.3f}, max "
          f"{probe['ratio_max']:.3f}) over {options.rounds} rounds")
    scaling = gpt_lm_scaling(options.repeats)
    by = scaling["by_nodes"]
    print(f"gpt_lm tiny, 1 rank a node on 1 thread: 1 node {by[1]['tokens_per_s']:,.0f} "
          f"tokens/s, 2 nodes {by[2]['tokens_per_s']:,.0f} (speedup "
          f"{scaling['speedup']:.2f}x, efficiency {scaling['efficiency']:.0%}); busbw "
          f"{by[2]['net_busbw_gbs']} GB/s")
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps({
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"node": platform.node(), "cpus": os.cpu_count(),
                    "python": platform.python_version(), "torch": torch.__version__,
                    "load_avg": os.getloadavg()},
        "probe_against_reference": probe, "gpt_lm_scaling": scaling}, indent=2))


if __name__ == "__main__":
    main()
