"""One CPU configuration timed three ways by `matrix run`: serially (`--no-ray`), through the
embedded Ray, and through Ray with OMP_NUM_THREADS=1, which is what every Ray task had
before the driver's thread settings reached it (Ray sets it wherever none is set). Each run
is the same one-configuration matrix (lstm_lm tiny on synthetic tokens, batch 16, as in
matrix/local.yaml; 3 repeats of 2 epochs); the three are alternated `rounds` times.
Figures: the configuration's items/s (the report's statistic, median of the repeats'
medians) and the thread count each cell's provenance recorded; the ratios to the serial
run.
Usage: python bench/ray_threads.py [rounds]   (writes bench/results/ray_threads.json)
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MATRIX = """
name: threads
hardware: [{name: box, kind: local}]
stacks: [{name: here, executor: process}]
workloads: [{name: lstm_lm, preset: tiny, dataset: synthetic, params: {batch_size: 16},
             epochs: 2}]
repeats: 3
"""
WAYS = {  # name -> (extra arguments, thread settings of the user's environment)
    "--no-ray": (["--no-ray"], {}),
    "Ray": ([], {}),
    "Ray, OMP_NUM_THREADS=1 (before)": ([], {"OMP_NUM_THREADS": "1"}),
}


def run_once(work: Path, name: str, args: list[str], threads: dict[str, str]) -> dict:
    """One `matrix run` of the matrix; its configuration's items/s and its cells' threads."""
    import pandas as pd

    from orchestrator.worker.threads import THREAD_PREFIXES

    out = work / f"run-{len(list(work.glob('run-*')))}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(THREAD_PREFIXES)}
    env |= {"RAY_USAGE_STATS_ENABLED": "0", **threads}
    subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(work / "m.yaml"),
                    "-o", str(out), "--db", "none", *args], cwd=ROOT, env=env, check=True,
                   capture_output=True, text=True, timeout=1800)
    rows = pd.read_parquet(out / "results.parquet")
    assert (rows["status"] == "ok").all(), name
    per_repeat = rows.groupby("cell_id")["items_per_s"].median()
    return {"items_per_s": float(per_repeat.median()),
            "cpu_threads": sorted({int(t) for t in rows["cpu_threads"].dropna()})}


def main(rounds: int) -> None:
    import torch

    sys.path.insert(0, str(ROOT))
    found: dict[str, list[dict]] = {name: [] for name in WAYS}
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "m.yaml").write_text(MATRIX)
        for _ in range(rounds):
            for name, (args, threads) in WAYS.items():
                found[name].append(run_once(work, name, args, threads))
    serial = statistics.median(r["items_per_s"] for r in found["--no-ray"])
    summary = {name: {"items_per_s": statistics.median(r["items_per_s"] for r in runs),
                      "runs": [r["items_per_s"] for r in runs],
                      "cpu_threads": runs[0]["cpu_threads"]} for name, runs in found.items()}
    for figures in summary.values():
        figures["ratio_to_no_ray"] = figures["items_per_s"] / serial
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                         capture_output=True, text=True).stdout.strip()
    result = {"date": f"{datetime.now(UTC):%Y-%m-%d}", "git": git, "host": platform.node(),
              "cpus": os.cpu_count(), "python": platform.python_version(),
              "torch": torch.__version__, "rounds": rounds, "ways": summary}
    (ROOT / "bench" / "results" / "ray_threads.json").write_text(json.dumps(result, indent=2))
    print(f"# {result['date']}, {git}, {result['cpus']} CPUs, torch {result['torch']}, "
          f"{rounds} round(s) alternated")
    print("| how | torch threads | lstm_lm tiny words/s | x --no-ray |")
    print("|---|---|---|---|")
    for name, figures in summary.items():
        print(f"| {name} | {figures['cpu_threads']} | {figures['items_per_s']:,.0f} | "
              f"{figures['ratio_to_no_ray']:.2f} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
