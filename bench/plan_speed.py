"""How long `matrix validate` and `matrix plan` take on a 10,000-cell matrix, as a user runs
them: `sleep` over a 10 x 10 x 10 parameter grid, 10 repeats, on this machine's process
stack. Each command runs `--rounds` times in a fresh process, alternating with `matrix
--help`, the floor every command pays (the interpreter and the CLI's imports); reported: the
median wall time of each, its excess over the floor, and the 1-minute load average around
the runs, with the commit and the versions of the packages planning leans on. Planning is
arithmetic over the grid; issue 55 asks for each under 1 s above the floor.

    .venv/bin/python bench/plan_speed.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
RESULTS = PROJECT / "bench" / "results" / "plan_speed.json"
MATRIX = """name: big
hardware: [{name: box, kind: local}]
stacks: [{name: here, executor: process}]
workloads:
  - name: sleep
    params:
      seconds: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
      steps: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
      jitter: [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
repeats: 10
max_cells: 10000
"""


def load_average() -> float:
    with open("/proc/loadavg", encoding="utf-8") as handle:
        return float(handle.read().split()[0])


def commit() -> str:
    """The commit measured, `+dirty` where the work tree differs from it (what the bench
    timed is then not quite that commit)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=PROJECT, capture_output=True,
                              text=True).stdout.strip()
    return git("rev-parse", "--short", "HEAD") + ("+dirty" if git(
        "status", "--porcelain", "--untracked-files=no", "orchestrator") else "")


def versions() -> dict[str, str]:
    """The packages that planning's time depends on most (the models are pydantic's)."""
    from importlib.metadata import version
    return {name: version(name) for name in ("pydantic", "pydantic-core", "typer", "pyyaml")}


def timed(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{command} failed: {done.stderr[-1000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    matrix = str(Path(sys.executable).parent / "matrix")
    times: dict[str, list[float]] = {"--help": [], "validate": [], "plan": []}
    loads = [load_average()]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.yaml"
        path.write_text(MATRIX)
        for _ in range(args.rounds):
            for command in times:
                argv = [matrix, command] if command == "--help" else [matrix, command, str(path)]
                times[command].append(timed(argv, Path(tmp)))
            loads.append(load_average())
    record = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "python": platform.python_version()},
        "commit": commit(), "versions": versions(),
        "cells": 10_000, "rounds": args.rounds, "load_average": loads,
        "median_s": {k: statistics.median(v) for k, v in times.items()}, "runs_s": times,
    }
    record["above_floor_s"] = {k: v - record["median_s"]["--help"]
                               for k, v in record["median_s"].items() if k != "--help"}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: record[k] for k in ("median_s", "above_floor_s", "load_average")},
                     indent=1))


if __name__ == "__main__":
    main()
