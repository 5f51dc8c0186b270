"""What the contention probe (orchestrator/worker/contention.py) reads in the cases it must
tell apart, and what it costs: a torch matmul loop (the shape of a CPU cell's training
step) alone and beside busy loops, on torch's default threads and on one, and a cell that
only sleeps beside busy loops. Each case runs in its own session, as a worker does
(`start_new_session`); the busy loops run in another. Figures: the loop's wall time, and
the probe's `cell_cpu_cores`, `cpu_wait_cores`, `other_cpu_cores`; then what one reading
of the probe costs on this host.
Usage: python bench/contention_probe.py
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CELL = """
import json, sys, time
import torch
from orchestrator.worker.contention import ContentionProbe
kind = sys.argv[1]
a = torch.randn(512, 512)
for _ in range(5):
    a @ a  # warm-up, untimed
probe = ContentionProbe()
probe.reset()
start = time.perf_counter()
if kind == "sleep":
    time.sleep(2.0)
else:
    for _ in range(300):
        a @ a
wall = time.perf_counter() - start
print(json.dumps({"wall_s": wall, "threads": torch.get_num_threads(), **probe.read()}))
"""
CASES = (  # (name, busy loops beside, OMP_NUM_THREADS or None, kind)
    ("matmul, default threads, alone", 0, None, "matmul"),
    ("matmul, default threads, 1 busy loop", 1, None, "matmul"),
    ("matmul, default threads, 2 busy loops", 2, None, "matmul"),
    ("matmul, 1 thread, 2 busy loops", 2, "1", "matmul"),
    ("sleep 2 s, 2 busy loops", 2, None, "sleep"),
)


def run_case(loops: int, threads: str | None, kind: str) -> dict[str, float]:
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                             start_new_session=True) for _ in range(loops)]
    try:
        time.sleep(0.5)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        if threads:
            env["OMP_NUM_THREADS"] = threads
        done = subprocess.run([sys.executable, "-c", CELL, kind], env=env, check=True,
                              capture_output=True, text=True, start_new_session=True)
        figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
        return figures
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def reading_cost_s(rounds: int = 50) -> float:
    sys.path.insert(0, str(ROOT))
    from orchestrator.worker.contention import ContentionProbe

    probe = ContentionProbe()
    start = time.perf_counter()
    for _ in range(rounds):
        probe.reset()
    return (time.perf_counter() - start) / rounds


def main() -> None:
    import torch

    print(f"# {datetime.now(UTC):%Y-%m-%d}, {platform.node()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, torch {torch.__version__}, "
          f"{len(os.listdir('/proc'))} /proc entries")
    print("| case | threads | wall | cell_cpu_cores | cpu_wait_cores | other_cpu_cores |")
    print("|---|---|---|---|---|---|")
    for name, loops, threads, kind in CASES:
        f = run_case(loops, threads, kind)
        print(f"| {name} | {f['threads']} | {f['wall_s']:.2f} s | {f['cell_cpu_cores']:.3f} | "
              f"{f['cpu_wait_cores']:.4f} | {f['other_cpu_cores']:.2f} |")
    print(f"one reading: {reading_cost_s() * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
