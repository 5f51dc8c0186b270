"""`profile: true` (a workload entry's option): the last epoch of a cell under torch's
profiler, written as a Chrome trace beside the worker's records, so that a workload short
of its goal is next profiled, not guessed at (bench/gpu/check.sh says by how much).

The last epoch, because by then compilation and autotuning are done; the profiler starts
before the epoch's meter and stops after its figures are taken, so its export is not
timed (its recording is: a profiled cell is a configuration of its own, plan/identity.py).
Only torch is profiled; another framework's cell says so in its log. Stdlib only until
the profiler starts: torch is the workload's import, never the worker's.
"""

from __future__ import annotations

import sys
from typing import Any

OUT_SUFFIX = ".out.jsonl"


def trace_path(out_path: str) -> str:
    """cells/<cell_id>.trace.json beside the worker's cells/<cell_id>.out.jsonl."""
    return out_path.removesuffix(OUT_SUFFIX) + ".trace.json"


class EpochProfiler:
    """Starts torch.profiler for one epoch and writes its trace when stopped."""

    def __init__(self, out_path: str) -> None:
        self.path = trace_path(out_path)
        self._profiler: Any = None

    def start(self) -> None:
        torch = sys.modules.get("torch")  # only if the workload imported it
        if torch is None:
            print("matrix-bench: profile: true profiles torch, which this cell does not use: "
                  "no trace", file=sys.stderr, flush=True)
            return
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self._profiler = torch.profiler.profile(activities=activities)
        self._profiler.start()

    def stop(self, epoch: int) -> None:
        if self._profiler is None:
            return
        self._profiler.stop()
        self._profiler.export_chrome_trace(self.path)
        self._profiler = None
        print(f"matrix-bench: epoch {epoch} profiled: Chrome trace {self.path}", flush=True)
