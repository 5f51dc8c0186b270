"""What every peer comparison (bench/*_vs_*.py) holds both sides to: the same CPU threads,
set and read back on each side, and the intervals a figure is taken from, never a start-up
interval in their place (issue 55: one series ran ours on 2 threads and the peer on 1; a
peer run that logged one interval was read from its start-up interval, a bogus 3.5x).

Ours runs through `matrix run`, which gives the cell the driver's thread variables and
records the threads torch computed with (provenance `cpu_threads`); a peer runs in a child
process with the same variables, under `peer_command`, which sets torch's threads to them
before the peer's own code starts and prints what torch then reports.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
PEER_THREADS = re.compile(r"^peer-threads (\d+)$", re.MULTILINE)
# run the peer's script as its own __main__, on the threads asked, saying which it got
LAUNCH = ("import runpy, sys, torch; torch.set_num_threads(int(sys.argv[1])); "
          "print(f'peer-threads {torch.get_num_threads()}', file=sys.stderr, flush=True); "
          "sys.argv = sys.argv[2:]; runpy.run_path(sys.argv[0], run_name='__main__')")


class UnfairPair(RuntimeError):
    """A pair whose two sides did not run alike: other threads, or no timed interval."""


def thread_environment(threads: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (this process's environment) with the math libraries' threads set to `threads`."""
    return {**(os.environ if base is None else base),
            **{name: str(threads) for name in THREAD_VARIABLES}}


def peer_command(script: Path | str, args: Sequence[str], threads: int) -> list[str]:
    """The argument list that runs `script ARGS` unmodified on `threads` torch threads."""
    return [sys.executable, "-c", LAUNCH, str(threads), str(script), *args]


def peer_threads(output: str) -> int:
    """The threads `peer_command`'s child computed with, from its output."""
    found = PEER_THREADS.findall(output)
    if not found:
        raise UnfairPair("the peer did not say which threads it computed with")
    return int(found[-1])


def same_threads(ours: int | None, peer: int | None, asked: int) -> int:
    """The threads both sides computed with; UnfairPair where either differs from `asked`."""
    if ours != asked or peer != asked:
        raise UnfairPair(f"threads differ: ours computed with {ours}, the peer with {peer}, "
                         f"{asked} asked: the pair is not comparable")
    return asked


def after_warmup(intervals: Sequence[float], warmup: int, what: str) -> list[float]:
    """The intervals after the first `warmup` (start-up, compilation, the first batches);
    UnfairPair where none is left: a figure read from start-up is not a throughput."""
    if len(intervals) <= warmup:
        raise UnfairPair(f"{what} logged {len(intervals)} interval(s), none after its "
                         f"{warmup} warm-up interval(s): no timed figure to compare")
    return list(intervals[warmup:])
